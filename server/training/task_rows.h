// The rows a task's examples become for training and validation, and a
// validation pass's figures: the kind-neutral half. Each kind's own rows,
// targets and scoring are its KindRules (kind_rules.h, one file per kind
// under server/training/kinds/); batching the rows and running them through
// the encoder is row_batches.h (LibTorch). A token-reading kind's windows are
// cut at the task's window (AdapterConfig::window_length) with the same
// functions Predict cuts them with (server/model/text_pieces.h), and
// validation decodes every window of an example the way Predict does
// (window_decoding.h), so the selection metric is the metric a caller sees.
// No LibTorch (adapterd::training_data).
//
// Thread safety: plain data and pure functions.
#ifndef ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_
#define ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_config.h"
#include "server/model/task_kinds.h"
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
// cannot read (kind_rules.h; ValidateDataset refuses those first).
absl::StatusOr<RowSet> EncodeRows(const model::AdapterConfig& config, const model::BertTokenizer& tokenizer,
                                  const std::vector<Example>& examples, const char* which);

// Which of Row's target fields a kind's rows carry (KindRules::targets):
// the batch holds a target tensor for each.
enum RowTarget : uint32_t {
  kLabelTarget = 1 << 0,     // Row::label
  kLabelSetTarget = 1 << 1,  // Row::label_set
  kValueTarget = 1 << 2,     // Row::value
  kTagTarget = 1 << 3,       // Row::tags
  kSpanTarget = 1 << 4,      // Row::start, Row::end
};

// Each row's head outputs: K per row (pooled kinds), K per position of the
// row's own length (token kinds).
using RowOutputs = std::vector<std::vector<float>>;

// A validation pass's figures; each kind sets its own, the rest stay 0:
//   sequence classification  accuracy (selects), micro F1 (= accuracy), macro F1
//   multi-label              micro F1 at 0.5 (selects), macro F1, exact match
//   regression               Spearman (selects), Pearson, MSE
//   token classification     entity F1, conlleval's (selects)
//   extractive QA            SQuAD F1 (selects), exact match
// `loss` is the head's mean loss over rows.
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

// One of the figures, by name (model::Metric).
double MetricValue(const Evaluation& e, model::Metric metric);
// The figure that selects a kind's best epoch (its KindSpec's selection:
// higher is better; ties go to the lower loss).
double SelectionMetric(model::TaskKind kind, const Evaluation& e);

// The task's kind's figures (KindRules::Score) of `outputs` on `data`;
// all 0 for no examples. `loss` is left 0.
Evaluation ScoreRows(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_TASK_ROWS_H_
