// A loopback HTTP client for tests and benchmarks, on libcurl's easy
// interface: a request to a port of 127.0.0.1 (the /metrics endpoint, the
// REST gateway) and the value of one series in a Prometheus text exposition.
// The end-to-end tests, the gateway's tests and adapterd-soak (bench/) use it
// to watch a running adapterd; no product binary links it (nor libcurl).
//
// Requests go to 127.0.0.1 only, never through a proxy (an http_proxy in the
// environment is ignored), as HTTP/1.0: the server closes the connection
// after its answer, so an event stream is read to its end. The path is sent
// as given (no dot-segment removal). Redirects are not followed.
//
// Thread safety: safe to call from several threads; each request has its own
// connection and curl handle. libcurl's global state is set up once, on the
// first request.
#ifndef ADAPTERD_COMMON_TESTING_HTTP_CLIENT_H_
#define ADAPTERD_COMMON_TESTING_HTTP_CLIENT_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace adapterd::testing {

struct HttpResponse {
  int status = 0;
  std::string content_type;  // empty when the response has none
  std::string body;
};

// GET http://127.0.0.1:<port><path>: the status code, content type and body.
// UNAVAILABLE when nothing listens (or the connection breaks),
// DEADLINE_EXCEEDED after `timeout` (the whole exchange, connecting
// included), DATA_LOSS for a malformed or truncated response,
// INVALID_ARGUMENT for a port outside 1-65535 or a path that does not start
// with '/' or that no URL can carry.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout);

// Any method, with `headers` and a `body` (sent with its Content-Length,
// also when empty for a method other than GET); otherwise as HttpGet. No
// header is added beyond Host and Content-Length (no Content-Type, Accept
// or Expect): a request says what `headers` say. The end-to-end tests'
// client of the REST gateway.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method, const std::string& path,
                                         const std::string& body, const HttpHeaders& headers, absl::Duration timeout);

// The value of one series in a Prometheus text exposition: `series` is the
// name with its labels exactly as written (`adapterd_serving`,
// `adapterd_process_heap_bytes{state="in_use"}`). nullopt when absent or not
// a number. A pure function.
std::optional<double> SampleValue(const std::string& exposition, const std::string& series);

}  // namespace adapterd::testing

#endif  // ADAPTERD_COMMON_TESTING_HTTP_CLIENT_H_
