// Reading an Example the way more than one place does: a multi-label
// example's labels, a regression target, token classification's words and
// gold tags, a QA answer's pieces. The kinds' rules themselves (what each
// kind requires of an example) are kind_rules.h. Messages name the field
// and the rule only; callers say which example. No LibTorch
// (adapterd::training_data).
//
// Thread safety: pure functions of their arguments.
#ifndef ADAPTERD_SERVER_TRAINING_KIND_EXAMPLES_H_
#define ADAPTERD_SERVER_TRAINING_KIND_EXAMPLES_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/task_kinds.h"
#include "server/model/text_pieces.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"

namespace adapterd::training {

// Multi-label: `labels`, or {label} when only `label` is set.
std::vector<std::string> MultiLabelsOf(const Example& e);

// Regression: the target `label` holds. INVALID_ARGUMENT when it is not a
// finite decimal number.
// A regression target's largest magnitude (its mean and variance over a
// dataset stay finite).
inline constexpr double kMaxRegressionTarget = 1e15;
absl::StatusOr<double> RegressionTargetOf(const Example& e);

// Token classification: the example's text (`text`, or its `tokens` joined
// by spaces), its words and their pieces, and each word's gold tag ("O",
// "B-X", "I-X"). A word an entity overlaps is the entity's (B- on its first
// word). INVALID_ARGUMENT for an entity that covers no word.
struct TaggedWords {
  std::string text;
  model::TextPieces pieces;
  std::vector<std::string> tags;
};
absl::StatusOr<TaggedWords> TagWords(const Example& e, const model::BertTokenizer& tokenizer);

// Extractive QA: the pieces [first, last] of `context` an answer covers.
// INVALID_ARGUMENT when it covers none (only characters the tokenizer
// drops).
absl::StatusOr<std::pair<int32_t, int32_t>> AnswerPieces(const model::TextPieces& context, const AnswerSpan& answer);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_KIND_EXAMPLES_H_
