#include "server/api/grpc_status.h"

#include <string>
#include <string_view>

#include "common/utf8.h"

namespace adapterd::api {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Messages may quote a caller's bytes (a malformed header, an id); a
  // caller always gets valid UTF-8 back.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      ToValidUtf8(std::string_view(status.message().data(), status.message().size())));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

const char* CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kUnknown: return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted: return "ABORTED";
    case absl::StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal: return "INTERNAL";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss: return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

}  // namespace adapterd::api
