// Task routing of server-minted ids (docs/DEPLOYMENT.md, "Scale-out").
//
// Behind a router that shards by task (nginx `hash $http_x_task_id`), every
// call that concerns a task must carry the task in `x-task-id` metadata. Calls
// that name only a job or a dataset can do so because the ids the server
// mints carry the task they were made for:
//
//   job-<13 hex: creation micros><6 hex: random>[.<task_id>]
//   ds-<13 hex: creation micros><6 hex: random>[.<task_id>]
//
// The task part is present when the id was minted for a task: every job, and
// datasets uploaded with `x-task-id` metadata. Ids minted before this scheme,
// client-chosen dataset ids and datasets uploaded without a task have no task
// part; their calls reach whichever replica the empty key maps to, which is
// right on a single replica and needs an explicit routing hint behind a
// router. A replica that knows it is one of several (--peers) refuses a call
// about a task whose header is missing or names another task
// (CheckRoutingHeader), so a task never gets a second copy on another shard. The hex prefix keeps ids in creation
// order, so listings in id order stay in creation order.
//
// Thread safety: pure functions (MintId draws from a thread-local engine).
#ifndef ADAPTERD_COMMON_ROUTING_H_
#define ADAPTERD_COMMON_ROUTING_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace adapterd {

// Metadata key a router shards on.
inline constexpr std::string_view kTaskRoutingHeader = "x-task-id";

// Longest id a minted id can be: the 23-byte head, '.', a 128-byte task id.
inline constexpr size_t kMaxMintedIdBytes = 160;

// "<prefix>-<13 hex><6 hex>" plus ".<task_id>" when `task_id` is non-empty.
// `prefix` is "job" or "ds". `random` supplies the low 24 bits.
std::string FormatMintedId(std::string_view prefix, int64_t now_micros, uint64_t random, std::string_view task_id);
// FormatMintedId with a random tail.
std::string MintId(std::string_view prefix, int64_t now_micros, std::string_view task_id);

// The task a minted job or dataset id was made for; "" when `id` is not a
// minted id or carries no task (see above).
std::string_view RoutingTaskOf(std::string_view id);

// On a task-sharded replica, a call that concerns task `task` must carry it
// as its routing header, or the router may have sent it to another replica,
// which would answer for (or create) the task there. OK when `header` (null
// = no header) equals `task`; otherwise FAILED_PRECONDITION saying what the
// header must be. `task` must be a valid id (it is quoted).
absl::Status CheckRoutingHeader(std::string_view task, const std::string* header);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_ROUTING_H_
