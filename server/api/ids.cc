#include "server/api/ids.h"

#include "absl/strings/str_cat.h"

namespace adapterd::api {

absl::Status ValidateId(const char* kind, const std::string& id, size_t max_bytes) {
  if (id.empty()) return absl::InvalidArgumentError(absl::StrCat(kind, " is empty"));
  if (id.size() > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(kind, " is ", id.size(), " bytes; at most ", max_bytes, " are allowed"));
  }
  // Before the alphabet, so that "../x" is named for what it is.
  if (id[0] == '.') return absl::InvalidArgumentError(absl::StrCat(kind, " must not start with '.'"));
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(kind, " has a character outside [A-Za-z0-9._-] at byte ", i,
                       c >= 0x20 && c < 0x7f ? absl::StrCat(" ('", std::string(1, static_cast<char>(c)), "')") : ""));
    }
  }
  return absl::OkStatus();
}

}  // namespace adapterd::api
