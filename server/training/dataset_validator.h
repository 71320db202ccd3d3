// Validates a training job's data before it is queued (docs/ARCHITECTURE.md, "server/training").
//
// Errors (INVALID_ARGUMENT, naming the offending example as "train example
// 17" or "validation example 3", 0-based, and why):
//   an example's own fields (CheckExampleFields, example.h), what the task's
//   kind reads and its rules (KindRules::CheckExample, kind_rules.h: a
//   missing label, a target that is not a decimal number in [-1e15, 1e15], tags that are not
//   BIO, entities outside the text or overlapping or over no word, an answer
//   not at its answer_start or over no token, a blank question or context),
//   fewer than limits.min_examples examples, more than limits.max_examples
//   or limits.max_bytes in total; for the kinds with labels (classification,
//   multi-label, token classification's entity types): fewer than 2 distinct
//   labels (1 entity type), more than limits.max_labels, a validation label
//   absent from the training data, and (when retraining) labels outside the
//   existing task's set.
// Warnings (returned, not errors): examples truncated to max_seq_len (the
// kinds that read the pooled vector; the others window long inputs),
// questions cut to max_question_len, label imbalance (classification), the
// same example in both training and validation data, a retraining dataset
// that lacks some of the task's labels.
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
#include "server/model/task_kinds.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"

namespace adapterd::training {

struct DatasetLimits {
  int64_t min_examples = 8;
  int64_t max_examples = 1'000'000;
  int64_t max_bytes = 256ll << 20;  // every string of every example (ExampleBytes)
  int64_t max_labels = 1000;
  // Majority/minority count ratio above which imbalance is reported.
  double imbalance_warning_ratio = 10.0;
};

// What the job trains: the task's kind and the lengths its rows are cut to.
struct DatasetShape {
  int max_seq_len = 128;
  model::TaskKind kind = model::TaskKind::kSequenceClassification;
  int max_question_len = 64;  // extractive QA
};

struct DatasetReport {
  // The head's output names in logit order (AdapterConfig::labels): the
  // existing task's when retraining; otherwise the sorted labels
  // (classification kinds), BioTagSet of the sorted entity types (token
  // classification), none (regression, extractive QA).
  std::vector<std::string> labels;
  // Training examples per label (for token classification, per entity
  // type: the examples that mention it).
  std::map<std::string, int64_t> label_counts;
  int64_t num_train = 0;
  int64_t num_validation = 0;
  int64_t total_bytes = 0;
  int64_t truncated_examples = 0;
  int64_t cut_questions = 0;  // extractive QA
  int64_t train_validation_duplicates = 0;
  std::vector<std::string> warnings;
};

// `existing_labels` is the task's label list when retraining (nullptr for a
// new task).
absl::StatusOr<DatasetReport> ValidateDataset(const std::vector<Example>& train, const std::vector<Example>& validation,
                                              const model::BertTokenizer& tokenizer, const DatasetShape& shape,
                                              const DatasetLimits& limits,
                                              const std::vector<std::string>* existing_labels = nullptr);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_DATASET_VALIDATOR_H_
