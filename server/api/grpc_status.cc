#include "server/api/grpc_status.h"

#include <string>
#include <string_view>

#include "common/utf8.h"

namespace adapterd::api {
namespace {

bool IsPathChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-' || c == '+' || c == '~' || c == '@' || c == '%' || c == '/';
}

}  // namespace

namespace {

bool StartsPath(std::string_view m, size_t i) {
  if (m[i] != '/' || i + 1 >= m.size() || !IsPathChar(m[i + 1]) || m[i + 1] == '/') return false;
  if (i == 0) return true;
  const char before = m[i - 1];
  return before == ' ' || before == '\'' || before == '"' || before == '(' || before == '=' || before == ':' ||
         before == '[';
}

}  // namespace

std::string CallerMessage(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (size_t i = 0; i < message.size();) {
    if (StartsPath(message, i)) {
      size_t end = i + 1;
      while (end < message.size() && IsPathChar(message[end])) ++end;
      out += "<path>";
      i = end;
    } else {
      out += message[i++];
    }
  }
  return ToValidUtf8(out);
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CallerMessage(std::string_view(status.message().data(), status.message().size())));
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
