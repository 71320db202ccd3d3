// The REST gateway's answers, internal to server/http: buffered responses
// queued on a libmicrohttpd connection, the JSON answer and the
// google.rpc.Status error answer (transcoding.h's StatusJson), and the
// statuses the gateway makes itself with their HTTP codes: a body over the
// gateway's limits (TooLarge: 413), the server-wide body budget spent (Busy:
// 503), a body of the wrong content type (UnsupportedMediaType: 415). Every
// other status is answered with transcoding.h's HttpStatusFor. An API
// request's error answer (Fail) is reported through Hooks::on_refusal when
// it came before the request's gRPC call.
//
// Thread safety: thread-safe (each call answers its own connection).
#ifndef ADAPTERD_SERVER_HTTP_REPLIES_H_
#define ADAPTERD_SERVER_HTTP_REPLIES_H_

#include <grpcpp/support/status.h>
#include <microhttpd.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/http/gateway_state.h"

namespace adapterd::http::gateway_internal {

inline constexpr char kJsonType[] = "application/json";

// Queues `response` on `c` with the status `code`, and releases it. MHD_NO
// when `response` is null.
MHD_Result Queue(MHD_Connection* c, unsigned int code, MHD_Response* response);

// A response of `body` (copied), with its Content-Type and nosniff and
// no-store. Null when libmicrohttpd cannot make it.
MHD_Response* BufferResponse(std::string_view body, const char* content_type);

// Answers `json` with the status `code`.
MHD_Result ReplyJson(MHD_Connection* c, unsigned int code, std::string_view json);

// Answers `status` as a google.rpc.Status JSON object, with `http_code`, or
// the HTTP status of its code when 0.
MHD_Result ReplyStatus(MHD_Connection* c, const absl::Status& status, unsigned int http_code = 0);

// The gateway's own body limits: RESOURCE_EXHAUSTED, answered 413 (a
// tenant's quotas, RESOURCE_EXHAUSTED from the service, are 429).
absl::Status TooLarge(const std::string& message);

// The server-wide body budget is spent: RESOURCE_EXHAUSTED, answered 503
// (the server is busy, not the request too large; retry later).
absl::Status Busy(const std::string& message);

// A body whose Content-Type is not its route's: INVALID_ARGUMENT, answered
// 415.
absl::Status UnsupportedMediaType(const std::string& message);

// A gRPC call's status as the gateway answers it: gRPC's own message-size
// refusal ("Sent/Received message larger than max") is a size, not a rate
// limit, so it is answered 413 and names the limit (429 would be retried).
absl::Status CallStatus(const grpc::Status& status, int64_t max_message_bytes);

// The HTTP status the gateway answers `s` with when it is one of its own
// (TooLarge, Busy, UnsupportedMediaType); 0 for the code's own.
unsigned int HttpCodeFor(const absl::Status& s);

// Reports an API request answered with `code` before its gRPC call
// (Hooks::on_refusal); once the call was made, gRPC counts the request.
void NoteRefusal(State* state, const Call& call, absl::StatusCode code);

// An API request's error answer.
MHD_Result Fail(State* state, MHD_Connection* c, const Call& call, const absl::Status& status);

}  // namespace adapterd::http::gateway_internal

#endif  // ADAPTERD_SERVER_HTTP_REPLIES_H_
