// MetricsServer: serves a Registry at GET /metrics over HTTP (libmicrohttpd), in
// the Prometheus text format 0.0.4
// (Content-Type: text/plain; version=0.0.4; charset=utf-8).
//
// Contract:
//   - Start("host:port") binds exactly that address; port 0 picks a free port
//     (port() reports it); host is an IPv4 address, 0.0.0.0 or localhost. A
//     taken port is UNAVAILABLE, a malformed address INVALID_ARGUMENT; the
//     message carries the HTTP library's reason.
//   - GET and HEAD of /metrics answer 200; other methods 405; other paths 404.
//   - Idle clients cannot starve the scraper: at most kMetricsMaxConnections
//     connections are open at once (more are refused at accept), and a
//     connection with no traffic for kMetricsIdleTimeoutSeconds is closed,
//     so a burst of idle connections is shed within that time.
//   - The destructor stops serving (in-flight scrapes finish first).
//
// Why not civetweb (DESIGN.md names it): Debian's libcivetweb creates its
// threads with a fixed 100 KiB stack, and in a process that also loads
// LibTorch and OpenBLAS the static TLS alone is larger, so pthread_create
// fails with EINVAL. libmicrohttpd threads use the default stack.
//
// Thread safety: one internal libmicrohttpd thread serves scrapes; the
// registry is thread-safe. Ownership: the registry is borrowed and must
// outlive the server.
#ifndef ADAPTERD_SERVER_METRICS_METRICS_SERVER_H_
#define ADAPTERD_SERVER_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"

struct MHD_Daemon;

namespace adapterd::metrics {

inline constexpr int kMetricsMaxConnections = 256;
inline constexpr int kMetricsIdleTimeoutSeconds = 3;

class MetricsServer {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, Registry* registry);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  MetricsServer() = default;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace adapterd::metrics

#endif  // ADAPTERD_SERVER_METRICS_METRICS_SERVER_H_
