// Reading a server's metrics back: a GET of a loopback HTTP port (the
// /metrics endpoint, or any other path it serves) and the value of one series
// in a Prometheus text exposition. What the load and soak tools in bench/
// and the end-to-end tests use to watch a running adapterd; the server itself
// never scrapes.
//
// Thread safety: pure functions; HttpGet opens its own connection.
#ifndef ADAPTERD_SERVER_METRICS_SCRAPE_H_
#define ADAPTERD_SERVER_METRICS_SCRAPE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace adapterd::metrics {

struct HttpResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

// GET http://127.0.0.1:<port><path> (HTTP/1.0, the connection closed by the
// server): the status code, content type and body. UNAVAILABLE when nothing
// listens, DEADLINE_EXCEEDED after `timeout`, DATA_LOSS for a malformed
// response.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout);

// Any method, with `headers` and a `body` (sent with its Content-Length);
// otherwise as HttpGet. The end-to-end tests' client of the REST gateway.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;
absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method, const std::string& path,
                                         const std::string& body, const HttpHeaders& headers, absl::Duration timeout);

// The value of one series in a Prometheus text exposition: `series` is the
// name with its labels exactly as written (`adapterd_serving`,
// `adapterd_process_heap_bytes{state="in_use"}`). nullopt when absent or not
// a number.
std::optional<double> SampleValue(const std::string& exposition, const std::string& series);

}  // namespace adapterd::metrics

#endif  // ADAPTERD_SERVER_METRICS_SCRAPE_H_
