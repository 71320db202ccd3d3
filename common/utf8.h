// UTF-8 validation and code-point offsets (utf8proc). Thread-safe free functions.
#ifndef ADAPTERD_COMMON_UTF8_H_
#define ADAPTERD_COMMON_UTF8_H_

#include <string>
#include <string_view>
#include <vector>

namespace adapterd {

// True iff `s` is well-formed UTF-8 (no overlong forms, surrogates or
// code points past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every byte that does not start a well-formed sequence replaced by
// U+FFFD (the replacement character); unchanged when IsValidUtf8(s). For text
// that may carry a caller's raw bytes into a message (error statuses).
std::string ToValidUtf8(std::string_view s);

// The byte offset in `s` of each of its code points, then s.size(): entry i
// is where code point i starts, so code points [a, b) are bytes
// [offsets[a], offsets[b]). A byte that does not start a well-formed
// sequence counts as one code point (as the tokenizer's offsets do).
std::vector<size_t> CodePointOffsets(std::string_view s);

// True when `s` holds nothing but white space (Unicode's separators and
// ASCII's tab, line feed, vertical tab, form feed, carriage return) and
// control characters: a text a reader would call empty.
bool IsBlank(std::string_view s);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_UTF8_H_
