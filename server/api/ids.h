// Validation of client-chosen resource ids (task, dataset, job, request ids).
//
// An id is 1 to 128 bytes of [A-Za-z0-9._-] and does not start with '.'.
// Job and dataset ids may be up to kMaxMintedIdBytes (160): ids the server
// mints carry the task id they were made for (common/routing.h).
// That rules out "..", '/', NUL, whitespace and non-ASCII, so ids are safe in
// storage keys, file names, metric-free logs and URLs.
#ifndef ADAPTERD_SERVER_API_IDS_H_
#define ADAPTERD_SERVER_API_IDS_H_

#include <string>

#include "absl/status/status.h"
#include "common/routing.h"

namespace adapterd::api {

inline constexpr size_t kMaxIdBytes = 128;

// INVALID_ARGUMENT "<kind> ... " explaining what is wrong (the id is quoted
// only when it is printable and short).
absl::Status ValidateId(const char* kind, const std::string& id, size_t max_bytes = kMaxIdBytes);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_IDS_H_
