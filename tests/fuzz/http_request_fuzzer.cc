// Fuzzes the REST gateway's mapping of outside bytes into requests
// (server/http/transcoding.h): the method and path a client sends, its query
// parameters and its JSON body.
//
// Input: byte 0 picks the method (GET, POST, DELETE, PUT); the rest is
// "<path>\n<query key>=<query value>\n...\n\n<JSON body>" (missing parts are
// empty).
//
// Invariants: a matched route's variables are non-empty and hold no '/' or
// ':', and putting them back into its pattern gives the path; an unmatched
// path lists allowed methods only if some route's pattern matches it. On
// the route's request message, every query parameter and the body either
// apply or fail INVALID_ARGUMENT with a valid UTF-8 message; a body that
// parses prints (ToJson) as JSON that parses back into the same message.
// StatusJson of any message is a JSON object with code, message and
// details.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"
#include "server/http/transcoding.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::http {
namespace {

// A new, empty request message of `rpc`.
std::unique_ptr<google::protobuf::Message> NewRequest(std::string_view rpc) {
  const auto* service = v1::PredictRequest::descriptor()->file()->FindServiceByName("Adapterd");
  const auto* method = service->FindMethodByName(std::string(rpc));
  FUZZ_CHECK(method != nullptr) << "a route names no RPC: " << rpc;
  return std::unique_ptr<google::protobuf::Message>(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(method->input_type())->New());
}

void CheckError(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument) << what << ": " << s;
  FUZZ_CHECK(adapterd::IsValidUtf8(std::string(s.message()))) << what << ": the message is not valid UTF-8";
}

}  // namespace
}  // namespace adapterd::http

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::http;
  if (size < 1) return 0;
  static constexpr const char* kMethods[4] = {"GET", "POST", "DELETE", "PUT"};
  const std::string method = kMethods[data[0] % 4];
  std::string_view rest = adapterd::fuzz::AsStringView(data + 1, size - 1);
  const size_t body_at = rest.find("\n\n");
  const std::string_view head = rest.substr(0, body_at);
  const std::string_view body = body_at == std::string_view::npos ? "" : rest.substr(body_at + 2);
  const size_t path_end = head.find('\n');
  const std::string path(head.substr(0, path_end));

  const RouteMatch match = MatchRoute(method, path);
  if (match.route == nullptr) {
    if (!match.allowed_methods.empty()) {
      FUZZ_CHECK(MatchRoute("GET", path).route != nullptr || MatchRoute("POST", path).route != nullptr ||
                 MatchRoute("DELETE", path).route != nullptr)
          << "allowed methods for a path no route matches: " << path;
    }
    return 0;
  }
  // The variables put back into the pattern give the path.
  std::string rebuilt = match.route->pattern;
  for (const auto& [name, value] : match.variables) {
    FUZZ_CHECK(!value.empty() && value.find('/') == std::string::npos && value.find(':') == std::string::npos)
        << "variable " << name << " = '" << value << "'";
    const std::string placeholder = "{" + name + "}";
    const size_t at = rebuilt.find(placeholder);
    FUZZ_CHECK(at != std::string::npos) << "no {" << name << "} in " << match.route->pattern;
    rebuilt.replace(at, placeholder.size(), value);
  }
  FUZZ_CHECK(rebuilt == path) << "route " << match.route->pattern << " rebuilt as " << rebuilt << ", not " << path;

  std::unique_ptr<google::protobuf::Message> request = NewRequest(match.route->rpc);
  std::string_view params = path_end == std::string_view::npos ? "" : head.substr(path_end + 1);
  while (!params.empty()) {
    const size_t end = params.find('\n');
    const std::string_view param = params.substr(0, end);
    const size_t eq = param.find('=');
    CheckError(
        SetFieldFromText(*request, param.substr(0, eq), eq == std::string_view::npos ? "" : param.substr(eq + 1)),
        "a query parameter");
    params = end == std::string_view::npos ? "" : params.substr(end + 1);
  }
  std::unique_ptr<google::protobuf::Message> parsed(request->New());
  const absl::Status s = ParseJsonBody(body, *parsed);
  CheckError(s, "the body");
  if (s.ok()) {
    const std::string json = ToJson(*parsed);
    std::unique_ptr<google::protobuf::Message> back(parsed->New());
    const absl::Status again = ParseJsonBody(json, *back);
    FUZZ_CHECK(again.ok()) << "printed JSON does not parse back: " << again << "\n" << json;
    FUZZ_CHECK(back->SerializeAsString() == parsed->SerializeAsString()) << "JSON round trip changed " << json;
  }
  const nlohmann::json status =
      nlohmann::json::parse(StatusJson(absl::InvalidArgumentError(std::string(body.substr(0, 64)))));
  FUZZ_CHECK(status.is_object() && status.size() == 3 && status["details"].is_array()) << status.dump();
  return 0;
}
