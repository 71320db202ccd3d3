// From the outputs of a text's windows (SlidingWindows) to what the text
// gets, for the kinds whose head reads every token: each word's outputs
// (token classification) and the answers in a context (extractive QA), with
// spans into the caller's text. Validation (server/training/kinds/)
// and Predict (server/serving/kind_serving.cc) both decode here, so the metric that selects
// a task's best epoch is computed on what Predict returns. No LibTorch
// (adapterd::model_formats).
//
// Thread safety: pure functions of their arguments.
#ifndef ADAPTERD_SERVER_MODEL_WINDOW_DECODING_H_
#define ADAPTERD_SERVER_MODEL_WINDOW_DECODING_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/model/task_kinds.h"
#include "server/model/text_pieces.h"

namespace adapterd::model {

// `outputs[w]` holds window w's head outputs: `k` per position, for each of
// its positions (its row's length).
using WindowOutputs = std::span<const std::span<const float>>;

// Per word of `pieces`, the `k` outputs at its first piece in the window
// where that piece has the most context (MaxContextWindows); empty for a
// word without pieces.
std::vector<std::vector<float>> WordOutputs(const TextPieces& pieces, std::span<const SlidingWindow> windows,
                                            WindowOutputs outputs, int64_t k);

// An answer in the context: text[start, end) in code points; "no answer" is
// an empty text at 0, 0.
struct TextAnswer {
  std::string text;
  int32_t start = 0;
  int32_t end = 0;
  double score = 0;  // its probability among the candidates
  bool operator==(const TextAnswer&) const = default;
};

// Extractive QA: DecodeQaSpans over the windows (2 outputs per position:
// start and end logits), each span mapped to the context's text.
std::vector<TextAnswer> DecodeAnswers(std::string_view context, const TextPieces& pieces,
                                      std::span<const SlidingWindow> windows, WindowOutputs outputs,
                                      const QaDecodeOptions& options);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_WINDOW_DECODING_H_
