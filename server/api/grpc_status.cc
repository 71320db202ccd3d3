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

}  // namespace adapterd::api
