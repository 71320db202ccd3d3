// Helpers on the public API's types that the server and the client share:
// job states and the gRPC status conversion. A library of its own,
// adapterd::api_util (the rest of common/ does not depend on the protos).
//
// Thread safety: pure functions.
#ifndef ADAPTERD_COMMON_API_UTIL_H_
#define ADAPTERD_COMMON_API_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "proto/adapterd/v1/records.pb.h"

namespace adapterd {

// SUCCEEDED, FAILED or CANCELLED: a job in one of these never changes again.
bool IsTerminal(v1::JobState state);

// "QUEUED", "RUNNING", ...: the enum's name without JOB_STATE_, or the
// number for a value this build does not know.
std::string JobStateName(v1::JobState state);

// A grpc::Status as an absl::Status with the same code (the two share
// google.rpc.Code's numbering) and message. The server's other direction,
// which also cleans the message, is api::ToGrpcStatus.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_API_UTIL_H_
