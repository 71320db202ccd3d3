// What each task kind reads from an Example, and the rules its examples
// follow (docs/ARCHITECTURE.md, "Task kinds"):
//
//   kind                     reads                          rules
//   sequence classification  text [, text_pair], label      a label
//   multi-label              text [, text_pair], labels     no label twice
//                            (or one `label`)
//   regression               text [, text_pair], label      a finite decimal number
//   token classification     tokens + tags, or              tags are IOB2 (O, B-X,
//                            text + entities                I-X after B-X/I-X); entities
//                                                           inside the text, apart,
//                                                           each over a word
//   extractive QA            text (question), text_pair     both non-blank; each
//                            (context), answers             answer's text is at its
//                                                           answer_start
//
// Messages name the field and the rule only; callers say which example. No
// LibTorch (adapterd::training_data).
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

// OK, or INVALID_ARGUMENT: the example lacks what `kind` reads, or breaks
// one of its rules (the table above). Assumes CheckExampleFields passed.
absl::Status CheckExampleForKind(model::TaskKind kind, const Example& e);

// The names the example adds to its task's label set: its label
// (classification), its labels (multi-label), its entity types (token
// classification); none for regression and extractive QA.
std::vector<std::string> LabelNamesOf(model::TaskKind kind, const Example& e);

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
