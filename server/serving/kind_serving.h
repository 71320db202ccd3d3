// A task kind's Predict side, behind one interface: what a request must
// look like for it, the rows each text becomes, which form of its head's
// outputs it reads, and what a text's outputs decode into. One class per
// kind (kind_serving.cc); ServingKindOf is serving's only dispatch on the
// kind. The same kind's training side is server/training/kind_rules.h, its
// facts server/model/task_kinds.h (KindSpec).
//
// Rows: the pooled kinds encode each text (and pair) into one row, cut at
// the server's --max_seq_len; the token-reading kinds cut the text (token
// classification) or the context (extractive QA) into windows of the length
// the task trained with (AdapterConfig::window_length), with the functions
// training cuts them with (server/model/text_pieces.h).
//
// Thread safety: the kinds are immutable singletons; every method is a pure
// function of its arguments.
#ifndef ADAPTERD_SERVER_SERVING_KIND_SERVING_H_
#define ADAPTERD_SERVER_SERVING_KIND_SERVING_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/model/adapter_config.h"
#include "server/model/task_kinds.h"
#include "server/model/text_pieces.h"
#include "server/model/tokenizer.h"
#include "server/serving/prediction.h"

namespace adapterd::serving {

// How one text of a request becomes rows: `windows` (one row each, in
// order) and, for the token-reading kinds, the pieces they cut. A pooled
// kind's one row is a window without context.
struct TextRows {
  size_t first_row = 0;  // the request's index of its first row
  model::TextPieces pieces;
  std::vector<model::SlidingWindow> windows;
};

class ServingKind {
 public:
  virtual ~ServingKind() = default;
  virtual model::TaskKind kind() const = 0;

  // OK, or INVALID_ARGUMENT saying what the kind needs of the request's
  // shape (QA: a context per question; tagging: no pairs).
  virtual absl::Status CheckRequest(const PredictRequest& request) const { return absl::OkStatus(); }
  // Text `k`'s rows for a task of `config`: windows of `length` tokens, at
  // most `most_windows` + 1 of them (the caller refuses more; see
  // SlidingWindows); one row for the pooled kinds.
  virtual TextRows Plan(const model::BertTokenizer& tokenizer, const model::AdapterConfig& config,
                        const PredictRequest& request, size_t k, int32_t length, size_t most_windows) const = 0;
  // What the windows are cut from, for messages: "" (the text), " of
  // context".
  virtual std::string_view windowed_what() const { return ""; }
  // True when the kind reads its head's outputs as a softmax over them (over
  // each position's, for the token-reading kinds), false for the raw
  // outputs.
  virtual bool softmax_outputs() const = 0;
  // Text `k`'s prediction from its rows' outputs (`windows`, one per row of
  // `text`: K values, or K per position for the token-reading kinds).
  virtual TextPrediction Decode(const PredictRequest& request, const model::AdapterConfig& config, const TextRows& text,
                                size_t k, std::span<const std::span<const float>> windows) const = 0;
};

// The Predict side of `kind`, which must be one of TaskKind's values.
const ServingKind& ServingKindOf(model::TaskKind kind);

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_KIND_SERVING_H_
