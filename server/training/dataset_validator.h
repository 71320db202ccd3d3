// Validates a training job's data before it is queued (docs/ARCHITECTURE.md, "server/training").
//
// Errors (INVALID_ARGUMENT, naming the offending example as "train example
// 17" or "validation example 3", 0-based, and why):
//   an example's own fields (CheckExampleFields, example.h: empty text,
//   invalid UTF-8, a missing label or one over kMaxLabelBytes), fewer than
//   2 distinct labels, fewer than limits.min_examples examples, more than
//   limits.max_examples or
//   limits.max_bytes in total, a validation label absent from the training
//   data, and (when retraining) labels outside the existing task's set.
// Warnings (returned, not errors): examples truncated to max_seq_len, label
// imbalance, the same example in both training and validation data, a
// retraining dataset that lacks some of the task's labels.
//
// No LibTorch (library adapterd::training_data), so the dataset fuzz harness
// builds it alone.
//
// Thread safety: a pure function of its arguments.
#ifndef ADAPTERD_SERVER_TRAINING_DATASET_VALIDATOR_H_
#define ADAPTERD_SERVER_TRAINING_DATASET_VALIDATOR_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"

namespace adapterd::training {

struct DatasetLimits {
  int64_t min_examples = 8;
  int64_t max_examples = 1'000'000;
  int64_t max_bytes = 256ll << 20;  // text + text_pair + label, all examples
  int64_t max_labels = 1000;
  // Majority/minority count ratio above which imbalance is reported.
  double imbalance_warning_ratio = 10.0;
};

struct DatasetReport {
  // Labels in logit order: the existing task's order when retraining,
  // otherwise sorted.
  std::vector<std::string> labels;
  std::map<std::string, int64_t> label_counts;  // training data
  int64_t num_train = 0;
  int64_t num_validation = 0;
  int64_t total_bytes = 0;
  int64_t truncated_examples = 0;
  int64_t train_validation_duplicates = 0;
  std::vector<std::string> warnings;
};

// `existing_labels` is the task's label list when retraining (nullptr for a
// new task).
absl::StatusOr<DatasetReport> ValidateDataset(const std::vector<Example>& train, const std::vector<Example>& validation,
                                              const model::BertTokenizer& tokenizer, int max_seq_len,
                                              const DatasetLimits& limits,
                                              const std::vector<std::string>* existing_labels = nullptr);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_DATASET_VALIDATOR_H_
