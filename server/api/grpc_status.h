// The one place where absl::Status becomes grpc::Status (docs/ARCHITECTURE.md, "Conventions in force").
//
// Codes map one to one (absl and gRPC share google.rpc.Code numbering);
// messages pass through CallerMessage. Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_API_GRPC_STATUS_H_
#define ADAPTERD_SERVER_API_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace adapterd::api {

// What a caller may read of an internal message: absolute paths (the data
// directory, RocksDB's files, the model's) become "<path>", so errors show
// no server layout, and bytes that are not valid UTF-8 become U+FFFD (a
// message may quote a caller's raw bytes). A path is a '/' at the start or
// after a space, quote, '(', '=', ':' or '[', with the characters
// [A-Za-z0-9._+~@%/-] that follow it.
std::string CallerMessage(std::string_view message);

// (The other direction, FromGrpcStatus, is common/api_util.h; a code's
// name is absl::StatusCodeToString.)
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_GRPC_STATUS_H_
