// UTF-8 validation (utf8proc). Thread-safe free functions.
#ifndef ADAPTERD_COMMON_UTF8_H_
#define ADAPTERD_COMMON_UTF8_H_

#include <string>
#include <string_view>

namespace adapterd {

// True iff `s` is well-formed UTF-8 (no overlong forms, surrogates or
// code points past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every byte that does not start a well-formed sequence replaced by
// U+FFFD (the replacement character); unchanged when IsValidUtf8(s). For text
// that may carry a caller's raw bytes into a message (error statuses).
std::string ToValidUtf8(std::string_view s);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_UTF8_H_
