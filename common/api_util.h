// What the server and the client share of gRPC: the status conversion. A
// library of its own, adapterd::api_util (the rest of common/ does not depend
// on gRPC). Job states: common/job_state.h.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_COMMON_API_UTIL_H_
#define ADAPTERD_COMMON_API_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace adapterd {

// A grpc::Status as an absl::Status with the same code (the two share
// google.rpc.Code's numbering) and message. The server's other direction,
// which also cleans the message, is api::ToGrpcStatus.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_API_UTIL_H_
