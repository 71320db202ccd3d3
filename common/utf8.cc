#include "common/utf8.h"

#include <utf8proc.h>

namespace adapterd {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0 || cp < 0) return false;
    p += n;
    left -= n;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t left = static_cast<utf8proc_ssize_t>(s.size());
  while (left > 0) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0 || cp < 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++p;
      --left;
      continue;
    }
    out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
    p += n;
    left -= n;
  }
  return out;
}

std::vector<size_t> CodePointOffsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(pos);
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p + pos, static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
    pos += (n <= 0 || cp < 0) ? 1 : static_cast<size_t>(n);
  }
  out.push_back(s.size());
  return out;
}

bool IsBlank(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  size_t pos = 0;
  while (pos < s.size()) {
    utf8proc_int32_t cp;
    const utf8proc_ssize_t n = utf8proc_iterate(p + pos, static_cast<utf8proc_ssize_t>(s.size() - pos), &cp);
    if (n <= 0 || cp < 0) return false;  // a byte that is not text is not blank either
    pos += static_cast<size_t>(n);
    const utf8proc_category_t c = utf8proc_category(cp);
    const bool space = c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP ||
                       c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF;
    if (!space) return false;
  }
  return true;
}

}  // namespace adapterd
