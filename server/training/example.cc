#include "server/training/example.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace adapterd::training {

absl::Status CheckExampleFields(std::string_view text, std::string_view text_pair, std::string_view label) {
  const auto bad = [](std::string_view why) { return absl::InvalidArgumentError(std::string(why)); };
  if (text.empty()) return bad("text is empty");
  if (!IsValidUtf8(text)) return bad("text is not valid UTF-8");
  if (!IsValidUtf8(text_pair)) return bad("text_pair is not valid UTF-8");
  if (label.empty()) return bad("label is missing");
  if (!IsValidUtf8(label)) return bad("label is not valid UTF-8");
  if (label.size() > kMaxLabelBytes) {
    return bad(absl::StrCat("label has ", label.size(), " bytes; the limit is ", kMaxLabelBytes));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::training
