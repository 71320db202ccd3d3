// The one place where absl::Status becomes grpc::Status (DESIGN.md section 8).
//
// Codes map one to one (absl and gRPC share google.rpc.Code numbering);
// messages are kept, except that ToGrpcStatus replaces bytes that are not
// valid UTF-8 with U+FFFD (a message may quote a caller's raw bytes). Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_API_GRPC_STATUS_H_
#define ADAPTERD_SERVER_API_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace adapterd::api {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// "OK", "NOT_FOUND", ... (the metrics label for a code).
const char* CodeName(absl::StatusCode code);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_GRPC_STATUS_H_
