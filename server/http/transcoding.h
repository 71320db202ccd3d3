// The REST/JSON mapping of adapterd.v1.Adapterd (docs/API.md, "REST/JSON"):
// the route table in the gRPC-transcoding style of google.api.http
// (AIP-127, AIP-136 custom methods), and the conversions between HTTP and
// the API's messages. The gateway (http_gateway.h) serves exactly Routes();
// `adapterd http-routes` prints them, and the OpenAPI test compares them
// with docs/openapi.yaml both ways.
//
// Rules, as gRPC transcoding has them:
// - A `{name}` path segment is the request field `name` (one segment; ids
//   have no '/' or ':'). A custom method is the last segment's ":verb".
// - A JSON body (BodyKind::kJson) is the whole request message in protobuf's
//   canonical JSON mapping; a field that the path also names must be absent
//   from the body or equal to it.
// - Query parameters set request fields of routes without a JSON body (with
//   one, the body is the whole request, `body: "*"`, and parameters are
//   INVALID_ARGUMENT): by proto name or JSON name, dotted for nested
//   messages (`hyperparameters.epochs`), repeated by repeating the
//   parameter; enums by name or number. An empty JSON body is the empty
//   message (POST :cancel with no body or `{}`).
// - Responses are the response message in canonical JSON (lowerCamelCase,
//   int64 as strings, enums by name), default values included.
// - Errors are a google.rpc.Status in JSON, {"code", "message", "details"},
//   with the HTTP status of the code (HttpStatusFor). Unknown JSON fields and
//   query parameters are INVALID_ARGUMENT, as is a body that is not valid
//   JSON for the message.
//
// Thread safety: pure functions; the table is immutable.
#ifndef ADAPTERD_SERVER_HTTP_TRANSCODING_H_
#define ADAPTERD_SERVER_HTTP_TRANSCODING_H_

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace adapterd::http {

// What a route's request body is.
enum class BodyKind {
  kNone,     // no body (GET, DELETE, and POST custom methods without one)
  kJson,     // the request message as JSON
  kDataset,  // a dataset file: CSV, JSON Lines (streamed) or SQuAD JSON
  kBytes,    // raw bytes (an adapter file for ImportAdapter)
};

// What a route answers.
enum class ResponseKind {
  kJson,         // the response message
  kEventStream,  // Server-Sent Events, one per streamed response message
  kDownload,     // the concatenated bytes of a streamed download
};

struct Route {
  const char* method;   // "GET", "POST" or "DELETE"
  const char* pattern;  // e.g. "/v1/tasks/{task_id}:predict"
  const char* rpc;      // adapterd.v1.Adapterd's method name, e.g. "Predict"
  BodyKind body;
  ResponseKind response;
};

// Every route, in the order docs/API.md lists them. The console (GET / and
// /console/...) and GET /healthz are the gateway's own, outside the API.
std::span<const Route> Routes();

struct RouteMatch {
  const Route* route = nullptr;  // null: no route for this method and path
  // The path's variables, e.g. {"task_id", "t1"}.
  std::vector<std::pair<std::string, std::string>> variables;
  // When the path matches but the method does not: the methods it has
  // (for 405's Allow header), e.g. "GET, HEAD, DELETE". Empty otherwise.
  std::string allowed_methods;
};

// Finds the route for `method` and `path` (percent-decoded, without the
// query string). HEAD matches every GET route (RFC 9110 9.3.2: the server
// answers as for GET; libmicrohttpd leaves out the body).
RouteMatch MatchRoute(std::string_view method, std::string_view path);

// Sets `field` (a proto or JSON field name, dotted for nested messages) of
// `message` from its text form. INVALID_ARGUMENT naming the parameter when
// the field is unknown, is a map, or the value does not parse as its type.
absl::Status SetFieldFromText(google::protobuf::Message& message, std::string_view field, std::string_view value);

// Reads `json` into `message` (unknown fields are errors).
absl::Status ParseJsonBody(std::string_view json, google::protobuf::Message& message);

// `message` in canonical JSON, default values included.
std::string ToJson(const google::protobuf::Message& message);

// A `Grpc-Timeout` header (gRPC's own format, as grpc-gateway takes it):
// 1 to 8 digits and a unit, H, M, S, m (milliseconds), u or n; e.g. "30S",
// "1500m". INVALID_ARGUMENT otherwise.
absl::StatusOr<absl::Duration> ParseGrpcTimeout(std::string_view value);

// The HTTP status of a gRPC (google.rpc.Code) status code: the standard
// mapping of google/rpc/code.proto (e.g. NOT_FOUND 404, INVALID_ARGUMENT
// 400, RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, CANCELLED 499).
int HttpStatusFor(absl::StatusCode code);

// `status` as a google.rpc.Status JSON object: {"code": <number>,
// "message": <valid UTF-8>, "details": []}.
std::string StatusJson(const absl::Status& status);

}  // namespace adapterd::http

#endif  // ADAPTERD_SERVER_HTTP_TRANSCODING_H_
