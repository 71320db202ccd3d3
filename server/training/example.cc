#include "server/training/example.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd::training {
namespace {

absl::Status Bad(const std::string& why) { return absl::InvalidArgumentError(why); }

// A label-like name: non-empty UTF-8 of at most kMaxLabelBytes.
absl::Status CheckName(std::string_view value, const std::string& field) {
  if (value.empty()) return Bad(absl::StrCat(field, " is empty"));
  if (!IsValidUtf8(value)) return Bad(absl::StrCat(field, " is not valid UTF-8"));
  if (value.size() > kMaxLabelBytes) {
    return Bad(absl::StrCat(field, " has ", value.size(), " bytes; the limit is ", kMaxLabelBytes));
  }
  return absl::OkStatus();
}

// "tags[3]"
std::string At(std::string_view field, size_t i) { return absl::StrCat(std::string(field), "[", i, "]"); }

}  // namespace

size_t ExampleBytes(const Example& e) {
  size_t n = e.text.size() + e.text_pair.size() + e.label.size();
  for (const std::string& s : e.labels) n += s.size();
  for (const std::string& s : e.tokens) n += s.size();
  for (const std::string& s : e.tags) n += s.size();
  for (const EntitySpan& x : e.entities) n += x.label.size();
  for (const AnswerSpan& a : e.answers) n += a.text.size();
  return n;
}

absl::Status CheckExampleFields(const Example& e) {
  if (e.tokens.empty()) {
    if (e.text.empty()) return Bad("text is empty");
  } else if (!e.text.empty()) {
    return Bad("text and tokens are both set; give one");
  }
  if (!IsValidUtf8(e.text)) return Bad("text is not valid UTF-8");
  if (!IsValidUtf8(e.text_pair)) return Bad("text_pair is not valid UTF-8");
  if (!e.label.empty()) RETURN_IF_ERROR(CheckName(e.label, "label"));
  for (size_t i = 0; i < e.labels.size(); ++i) RETURN_IF_ERROR(CheckName(e.labels[i], At("labels", i)));
  if (e.tags.size() != e.tokens.size()) {
    return Bad(
        absl::StrCat("tokens has ", e.tokens.size(), " entries and tags ", e.tags.size(), "; one tag per token"));
  }
  for (size_t i = 0; i < e.tokens.size(); ++i) {
    if (e.tokens[i].empty()) return Bad(absl::StrCat(At("tokens", i), " is empty"));
    if (!IsValidUtf8(e.tokens[i])) return Bad(absl::StrCat(At("tokens", i), " is not valid UTF-8"));
    RETURN_IF_ERROR(CheckName(e.tags[i], At("tags", i)));
  }
  for (size_t i = 0; i < e.entities.size(); ++i) {
    const EntitySpan& x = e.entities[i];
    if (x.start < 0 || x.end <= x.start) {
      return Bad(
          absl::StrCat(At("entities", i), " spans [", x.start, ", ", x.end, "); an entity needs 0 <= start < end"));
    }
    RETURN_IF_ERROR(CheckName(x.label, absl::StrCat(At("entities", i), ".label")));
  }
  for (size_t i = 0; i < e.answers.size(); ++i) {
    const AnswerSpan& a = e.answers[i];
    if (a.text.empty()) return Bad(absl::StrCat(At("answers", i), ".text is empty"));
    if (!IsValidUtf8(a.text)) return Bad(absl::StrCat(At("answers", i), ".text is not valid UTF-8"));
    if (a.start < 0) return Bad(absl::StrCat(At("answers", i), ".answer_start is ", a.start));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::training
