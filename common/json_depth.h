// How deeply a JSON text nests, read without parsing it: a bound checked
// before a parser builds a document, so that input like 16 MiB of '['
// (1.15 GB as nlohmann::json nodes) is refused at the cost of one scan.
#ifndef ADAPTERD_COMMON_JSON_DEPTH_H_
#define ADAPTERD_COMMON_JSON_DEPTH_H_

#include <string_view>

namespace adapterd {

// Arrays and objects nest at most this deep in anything adapterd reads as
// JSON (request bodies, dataset files): a SQuAD document needs 8.
inline constexpr int kMaxJsonDepth = 32;

// The deepest nesting of `json`'s arrays and objects, counted outside
// strings. Stops scanning once the depth passes `stop_above` (and returns
// that depth), so the cost of a hostile text is bounded by where it fails.
int JsonNestingDepth(std::string_view json, int stop_above = kMaxJsonDepth);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_JSON_DEPTH_H_
