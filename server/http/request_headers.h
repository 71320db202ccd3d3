// What the REST gateway reads from a request before its body, internal to
// server/http: its headers and query string, the path's variables and query
// parameters set on the request message, the gRPC call's metadata made from
// them (PrepareContext), the client certificate of a mutual-TLS connection,
// and the cross-site checks (http_gateway.h, "Cross-site requests").
//
// Thread safety: thread-safe (each call reads its own connection; State's
// options are read-only).
#ifndef ADAPTERD_SERVER_HTTP_REQUEST_HEADERS_H_
#define ADAPTERD_SERVER_HTTP_REQUEST_HEADERS_H_

#include <google/protobuf/message.h>
#include <grpcpp/client_context.h>
#include <microhttpd.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"
#include "server/http/gateway_state.h"
#include "server/http/transcoding.h"

namespace adapterd::http::gateway_internal {

// The request header `name`'s value; nullopt when absent.
std::optional<std::string> Header(MHD_Connection* c, const char* name);

// The query string's parameters, in order; a parameter without '=' has the
// value "".
std::vector<std::pair<std::string, std::string>> QueryParameters(MHD_Connection* c);

// Sets the path's variables, then the query's parameters, on `message`.
// A body field the path also names must agree with it; a query parameter
// may not name a path variable.
absl::Status ApplyPathAndQuery(google::protobuf::Message& message, const Variables& variables,
                               const std::vector<std::pair<std::string, std::string>>& query);

// The task a request concerns, for x-task-id: its task_id, else the task
// part of the minted job or dataset id it names.
std::string RoutingTask(const google::protobuf::Message& message);

// The gRPC call's metadata from the HTTP request: the caller's credentials,
// the task it concerns (X-Task-Id wins over the request's own), and the
// protocol for the metrics.
absl::Status PrepareContext(MHD_Connection* c, const std::string& task, grpc::ClientContext& ctx);

// Whether the request has a body to read (a Content-Length above 0, or a
// chunked one).
bool HasBody(MHD_Connection* c);

// With a client CA: the connection's certificate chain verified against it.
bool ClientCertificateVerified(MHD_Connection* c);

// The dataset format a Content-Type names (text/csv, JSON Lines' types,
// application/json for a SQuAD document); nullopt for another or none.
std::optional<v1::DatasetFormat> DatasetFormatOf(const std::optional<std::string>& content_type);

// The cross-site checks of an API request (http_gateway.h, "Cross-site
// requests"): PERMISSION_DENIED for a Host not allowed or a foreign Origin on
// a state-changing call, INVALID_ARGUMENT (answered 415) for a body of the
// wrong content type.
absl::Status CheckCrossSite(State* state, MHD_Connection* c, std::string_view method, const Route& route);

}  // namespace adapterd::http::gateway_internal

#endif  // ADAPTERD_SERVER_HTTP_REQUEST_HEADERS_H_
