#include "server/api/page_token.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "storage/paging.h"

namespace adapterd::api {
namespace {

std::string PageTokenCheck(std::string_view listing, const std::string& tenant, const std::string& raw) {
  return Sha256Hex(absl::StrCat(std::string(listing), std::string(1, '\0'), tenant, std::string(1, '\0'), raw))
      .substr(0, 16);
}

}  // namespace

std::string EncodePageToken(std::string_view listing, const std::string& tenant, const std::string& raw) {
  if (raw.empty()) return "";
  return absl::StrCat(absl::WebSafeBase64Escape(raw), ".", PageTokenCheck(listing, tenant, raw));
}

absl::StatusOr<std::string> DecodePageToken(std::string_view listing, const std::string& tenant,
                                            const std::string& token) {
  if (token.empty()) return std::string();
  const size_t dot = token.rfind('.');
  std::string raw;
  if (dot == std::string::npos || !absl::WebSafeBase64Unescape(token.substr(0, dot), &raw) ||
      token.substr(dot + 1) != PageTokenCheck(listing, tenant, raw)) {
    return absl::InvalidArgumentError("page_token was not issued by this listing (pass next_page_token unchanged)");
  }
  return raw;
}

absl::StatusOr<int> EffectivePageSize(int requested) {
  if (requested < 0) return absl::InvalidArgumentError("page_size must not be negative");
  return requested == 0 ? 50 : std::min(requested, storage::kMaxPageSize);
}

}  // namespace adapterd::api
