// How a task's examples become the encoder rows it trains and validates on,
// and how a validation pass is scored, per task kind (docs/ARCHITECTURE.md,
// "Task kinds"):
//
//   kind                     rows                          scored by (selection first)
//   sequence classification  one per example, truncated    accuracy; macro F1
//   multi-label              one per example, truncated    micro F1 at 0.5; macro F1,
//                                                          exact match
//   regression               one per example, truncated    Spearman; Pearson, MSE
//   token classification     windows of the text           entity F1 (conlleval)
//                            (TaggingStride apart)
//   extractive QA            windows of the context        SQuAD F1; exact match
//                            (run_squad's)
//
// A token classification window scores each word's first piece; a QA
// training window that does not hold the (first) answer targets [CLS], as
// run_squad's does. Validation decodes every window of an example the way
// Predict does (MaxContextWindows, DecodeQaSpans), so the selection metric
// is the metric a caller sees.
//
// Thread safety: RowSets are plain data; EvaluateRows runs on the calling
// thread.
#ifndef ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_
#define ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_encoder.h"
#include "server/model/heads.h"
#include "server/model/text_pieces.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"

namespace adapterd::training {

// One encoder row and its target (the kind's own field).
struct Row {
  std::vector<int32_t> input_ids, token_type_ids;
  int32_t example = 0;           // the example it came from
  int64_t label = 0;             // sequence classification
  std::vector<float> label_set;  // multi-label: 0/1 per label
  float value = 0;               // regression, standardised
  std::vector<int64_t> tags;     // token classification: per position
  int64_t start = 0, end = 0;    // extractive QA: positions in the row
  // Token-reading kinds: positions [context_begin, context_end) are the
  // text's (context's) pieces context_offset, context_offset + 1, ...
  int32_t context_begin = 0, context_end = 0, context_offset = 0;
};

// What scoring needs of each example.
struct ExampleGold {
  std::vector<int32_t> rows;         // its rows, in window order
  int64_t label = 0;                 // sequence classification
  std::vector<int32_t> label_ids;    // multi-label
  double value = 0;                  // regression, not standardised
  std::string text;                  // token classification: the text; QA: the context
  model::TextPieces pieces;          // ... and its pieces
  std::vector<std::string> tags;     // token classification: per word
  std::vector<std::string> answers;  // extractive QA ("" for no answer)
};

struct RowSet {
  std::vector<Row> rows;
  std::vector<ExampleGold> examples;
};

// Encodes `examples` for a task of `config` (labels, standardisation, QA
// windows) with `tokenizer` (whose max_seq_len is the rows' length).
// INVALID_ARGUMENT naming "<which> example i" for an example its kind
// cannot read (kind_examples.h; ValidateDataset refuses those first).
absl::StatusOr<RowSet> EncodeRows(const model::AdapterConfig& config, const model::BertTokenizer& tokenizer,
                                  const std::vector<Example>& examples, const char* which);

// The chosen rows padded into a batch on `device`, with their targets.
struct Batch {
  model::EncoderInput input;
  model::HeadTargets targets;
};
Batch MakeBatch(const RowSet& set, std::span<const size_t> rows, model::TaskKind kind, int32_t pad_id,
                c10::Device device);

// The logits a head reads: token_logits for the kinds that read tokens
// (trimmed to `outputs`), logits otherwise.
at::Tensor HeadLogits(const model::EncoderOutput& out, model::TaskKind kind, int64_t outputs);

// A validation pass's figures; each kind sets its own (table above), the
// rest stay 0. `loss` is the head's mean loss over rows.
struct Evaluation {
  double loss = 0;
  double accuracy = 0;
  double micro_f1 = 0;
  double macro_f1 = 0;
  double exact_match = 0;
  double f1 = 0;
  double spearman = 0;
  double pearson = 0;
  double mse = 0;
};

// An epoch's validation metrics as events and checkpoints store them
// (storage::v1::EpochMetrics). Records written before the kinds had no
// micro_f1: classification's is its accuracy.
Evaluation EvaluationOfRecord(const storage::v1::EpochMetrics& m);

// One of the figures, by name (model::Metric).
double MetricValue(const Evaluation& e, model::Metric metric);
// The figure that selects a kind's best epoch (its KindSpec's selection:
// higher is better; ties go to the lower loss).
double SelectionMetric(model::TaskKind kind, const Evaluation& e);

// Runs `set` over every row of `data` (no gradients) and scores the
// examples.
absl::StatusOr<Evaluation> EvaluateRows(const model::BertEncoder& encoder, const model::AdapterSet& set,
                                        const model::Head& head, const RowSet& data, int32_t pad_id, int batch_size);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_
