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
//   - Idle clients cannot starve the scraper: a new connection is never left
//     waiting. At most kMetricsMaxConnections are kept; when a new one
//     arrives at that limit, the connection whose last request (or accept)
//     is oldest is closed to make room, so however many connections idle
//     clients hold or keep opening, a scrape is served at once. A connection
//     with no traffic for the idle timeout (kMetricsIdleTimeoutSeconds) is
//     closed too.
//   - The destructor stops serving (in-flight scrapes finish first).
//
// Why not civetweb (the library the project prefers for HTTP): Debian's libcivetweb creates its
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
  struct Options {
    int max_connections = kMetricsMaxConnections;
    int idle_timeout_seconds = kMetricsIdleTimeoutSeconds;
  };
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, Registry* registry) {
    return Start(address, registry, Options());
  }
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& address, Registry* registry,
                                                              const Options& options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

  // What the daemon's callbacks share: the registry and the open
  // connections (defined in metrics_server.cc).
  struct State;

 private:
  explicit MetricsServer(size_t max_connections);
  std::unique_ptr<State> state_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace adapterd::metrics

#endif  // ADAPTERD_SERVER_METRICS_METRICS_SERVER_H_
