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

using model::TaskKind;

absl::Status Bad(const std::string& why) { return absl::InvalidArgumentError(why); }

int32_t CodePointCount(std::string_view s) { return static_cast<int32_t>(CodePointOffsets(s).size() - 1); }

// The entity type of a B-X / I-X tag; nullopt for anything else.
std::optional<std::string> TagType(const std::string& tag, char prefix) {
  if (tag.size() > 2 && tag[0] == prefix && tag[1] == '-') return tag.substr(2);
  return std::nullopt;
}

// IOB2: each tag is O, B-X, or I-X continuing an X entity.
absl::Status CheckTags(const std::vector<std::string>& tags) {
  std::string open;  // the type of the entity the previous tag is in
  for (size_t i = 0; i < tags.size(); ++i) {
    const std::string& t = tags[i];
    if (t == "O") {
      open.clear();
    } else if (auto b = TagType(t, 'B')) {
      open = *b;
    } else if (auto in = TagType(t, 'I')) {
      if (*in != open) {
        return Bad(absl::StrCat("tags[", i, "] '", t, "' does not continue an entity of type ", *in, " (it follows '",
                                i == 0 ? std::string("the start") : tags[i - 1],
                                "'); tags are BIO (IOB2): an entity starts with B-", *in));
      }
    } else {
      return Bad(absl::StrCat("tags[", i, "] '", t, "' is not a BIO tag: O, B-<type> or I-<type>"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckEntities(const Example& e) {
  const int32_t length = CodePointCount(e.text);
  std::vector<size_t> order(e.entities.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::make_pair(e.entities[a].start, a) < std::make_pair(e.entities[b].start, b);
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const EntitySpan& x = e.entities[i];
    if (x.end > length) {
      return Bad(absl::StrCat("entities[", i, "] ends at ", x.end, ", past the text's ", length, " code points"));
    }
    if (k > 0 && e.entities[order[k - 1]].end > x.start) {
      return Bad(absl::StrCat("entities[", order[k - 1], "] and entities[", i, "] overlap; entities must not"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckQa(const Example& e) {
  if (IsBlank(e.text)) return Bad("the question (text) is blank");
  if (IsBlank(e.text_pair)) return Bad("the context (text_pair) is blank");
  // The context's code points, found once for all its answers.
  const std::vector<size_t> at = CodePointOffsets(e.text_pair);
  const auto length = static_cast<int32_t>(at.size() - 1);
  for (size_t i = 0; i < e.answers.size(); ++i) {
    const AnswerSpan& a = e.answers[i];
    // In 64 bits: answer_start comes from the caller and may be INT32_MAX.
    const int64_t end = int64_t{a.start} + CodePointCount(a.text);
    const auto cp = [&](int64_t x) { return at[static_cast<size_t>(std::clamp<int64_t>(x, 0, length))]; };
    const std::string_view found = std::string_view(e.text_pair).substr(cp(a.start), cp(end) - cp(a.start));
    if (end > length || found != a.text) {
      return Bad(absl::StrCat("answers[", i, "] '", a.text, "' is not at answer_start ", a.start,
                              " of the context (found '", std::string(found), "')"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckExampleForKind(TaskKind kind, const Example& e) {
  const bool has_tagging = !e.tokens.empty() || !e.entities.empty();
  switch (kind) {
    case TaskKind::kSequenceClassification:
      if (e.label.empty()) return Bad("label is missing");
      return absl::OkStatus();
    case TaskKind::kMultiLabelClassification: {
      std::set<std::string> seen;
      for (const std::string& l : MultiLabelsOf(e)) {
        if (!seen.insert(l).second) return Bad(absl::StrCat("labels lists '", l, "' twice"));
      }
      return absl::OkStatus();
    }
    case TaskKind::kRegression:
      return RegressionTargetOf(e).status();
    case TaskKind::kTokenClassification:
      if (!e.tokens.empty() && !e.entities.empty()) return Bad("tokens and entities are both set; give one");
      if (!e.tokens.empty()) return CheckTags(e.tags);
      if (!e.label.empty() || !e.labels.empty()) {
        return Bad("a token classification example has tokens and tags, or text and entities; not a label");
      }
      return CheckEntities(e);
    case TaskKind::kExtractiveQa:
      if (has_tagging || !e.label.empty()) return Bad("an extractive QA example has a question, a context and answers");
      return CheckQa(e);
  }
  return Bad(absl::StrCat("unknown task kind ", static_cast<int32_t>(kind)));
}

std::vector<std::string> MultiLabelsOf(const Example& e) {
  if (!e.labels.empty() || e.label.empty()) return e.labels;
  return {e.label};
}

std::vector<std::string> LabelNamesOf(TaskKind kind, const Example& e) {
  switch (kind) {
    case TaskKind::kSequenceClassification:
      return {e.label};
    case TaskKind::kMultiLabelClassification:
      return MultiLabelsOf(e);
    case TaskKind::kTokenClassification: {
      std::vector<std::string> types;
      for (const std::string& t : e.tags) {
        if (auto b = TagType(t, 'B')) types.push_back(*b);
        if (auto in = TagType(t, 'I')) types.push_back(*in);
      }
      for (const EntitySpan& x : e.entities) types.push_back(x.label);
      std::sort(types.begin(), types.end());
      types.erase(std::unique(types.begin(), types.end()), types.end());
      return types;
    }
    default:
      return {};
  }
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
