#include "server/training/kind_examples.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd::training {
namespace {

absl::Status Bad(const std::string& why) { return absl::InvalidArgumentError(why); }

int32_t CodePointCount(std::string_view s) { return static_cast<int32_t>(CodePointOffsets(s).size() - 1); }

}  // namespace

std::vector<std::string> MultiLabelsOf(const Example& e) {
  if (!e.labels.empty() || e.label.empty()) return e.labels;
  return {e.label};
}

namespace {

// A decimal number as the API documents it: an optional sign, digits with
// an optional point (or a point and digits), an optional exponent; no
// spaces, no hexadecimal ("0x10"), no "inf" or "nan".
bool IsDecimalNumber(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exponent = 0;
    while (i < s.size() && absl::ascii_isdigit(s[i])) ++i, ++exponent;
    if (exponent == 0) return false;
  }
  return i == s.size();
}

}  // namespace

absl::StatusOr<double> RegressionTargetOf(const Example& e) {
  if (e.label.empty()) return Bad("label is missing (a regression target is a number)");
  double v = 0;
  if (!IsDecimalNumber(e.label) || !absl::SimpleAtod(e.label, &v)) {
    return Bad(absl::StrCat("label '", e.label, "' is not a decimal number (like 3.25 or -1e3)"));
  }
  // Bounded so that the targets' mean and variance cannot overflow.
  if (!std::isfinite(v) || std::abs(v) > kMaxRegressionTarget) {
    return Bad(absl::StrCat("label '", e.label, "' is outside [-1e15, 1e15], the regression targets' range"));
  }
  return v;
}

absl::StatusOr<TaggedWords> TagWords(const Example& e, const model::BertTokenizer& tokenizer) {
  TaggedWords out;
  if (!e.tokens.empty()) {
    out.text = model::JoinWords(e.tokens);
    out.pieces = model::PiecesOfWords(tokenizer, e.tokens);
    out.tags = e.tags;
    return out;
  }
  out.text = e.text;
  out.pieces = model::PiecesOfText(tokenizer, e.text);
  out.tags.assign(out.pieces.word_spans.size(), "O");
  for (size_t i = 0; i < e.entities.size(); ++i) {
    const EntitySpan& x = e.entities[i];
    bool first = true;
    for (size_t w = 0; w < out.pieces.word_spans.size(); ++w) {
      const auto [start, end] = out.pieces.word_spans[w];
      if (start < x.end && end > x.start) {
        out.tags[w] = absl::StrCat(first ? "B-" : "I-", x.label);
        first = false;
      }
    }
    if (first) return Bad(absl::StrCat("entities[", i, "] covers no word of the text"));
  }
  return out;
}

absl::StatusOr<std::pair<int32_t, int32_t>> AnswerPieces(const model::TextPieces& context, const AnswerSpan& answer) {
  const int32_t end = answer.start + CodePointCount(answer.text);
  std::optional<std::pair<int32_t, int32_t>> pieces = model::PiecesCovering(context, answer.start, end);
  if (!pieces) return Bad(absl::StrCat("answer '", answer.text, "' covers no token of the context"));
  return *pieces;
}

}  // namespace adapterd::training
