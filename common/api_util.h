// What the server and the client share of gRPC: the status conversion. A
// library of its own, adapterd::api_util (the rest of common/ does not depend
// on gRPC). Job states: common/job_state.h.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_COMMON_API_UTIL_H_
#define ADAPTERD_COMMON_API_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace adapterd {

// Metadata the HTTP gateway (server/http) sets to "http" on the gRPC calls it
// makes for an HTTP request, so that the call's metrics carry its protocol.
// Only a label: a gRPC client that sets it mislabels nothing but its own
// calls.
inline constexpr std::string_view kProtocolMetadata = "x-adapterd-protocol";

// A grpc::Status as an absl::Status with the same code (the two share
// google.rpc.Code's numbering) and message. The server's other direction,
// which also cleans the message, is api::ToGrpcStatus.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_API_UTIL_H_
