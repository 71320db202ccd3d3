#include "server/metrics/metrics_server.h"

#include <microhttpd.h>
#include <netinet/in.h>

#include <sys/socket.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/connection_table.h"
#include "common/listen_address.h"
#include "common/status_macros.h"

namespace adapterd::metrics {

// What the daemon's callbacks share. They all run on libmicrohttpd's one
// polling thread; the lock is for the destructor's benefit only.
struct MetricsServer::State {
  explicit State(size_t max_connections) : connections(max_connections) {}
  const Registry* registry = nullptr;
  ConnectionTable connections;  // a scrape is answered at once: never `answering`
};

namespace {

using State = MetricsServer::State;

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

MHD_Result Reply(MHD_Connection* connection, unsigned int code, const std::string& body, const char* content_type) {
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  const MHD_Result r = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return r;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*, const char*,
                  size_t* upload_data_size, void** con_cls) {
  // A request with a body arrives in several calls; answer on the first and
  // ignore any body.
  if (*upload_data_size != 0) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  (void)con_cls;
  State* state = static_cast<State*>(cls);
  state->connections.Touch(connection, /*answering=*/false);
  if (std::strcmp(url, "/metrics") != 0) return Reply(connection, MHD_HTTP_NOT_FOUND, "not found\n", "text/plain");
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "", "text/plain");
  }
  // HEAD: libmicrohttpd sends the headers only.
  return Reply(connection, MHD_HTTP_OK, state->registry->Serialize(), kContentType);
}

// Keeps the table of open connections.
void Notify(void* cls, MHD_Connection* connection, void**, MHD_ConnectionNotificationCode code) {
  ConnectionTable& table = static_cast<State*>(cls)->connections;
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) return table.Closed(connection);
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  table.Opened(connection, info != nullptr ? info->connect_fd : -1);
}

// A connection was accepted: at the limit, the one idle longest makes room
// (ConnectionTable::Admit; libmicrohttpd closes it on its next poll).
MHD_Result Admit(void* cls, const sockaddr*, socklen_t) {
  return static_cast<State*>(cls)->connections.Admit() ? MHD_YES : MHD_NO;
}

void Log(void* cls, const char* format, va_list args) {
  char buf[512];
  std::vsnprintf(buf, sizeof(buf), format, args);
  auto* error = static_cast<std::string*>(cls);
  if (error != nullptr && error->empty()) *error = buf;
}

}  // namespace

MetricsServer::MetricsServer(size_t max_connections) : state_(std::make_unique<State>(max_connections)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& address, Registry* registry,
                                                                    const Options& options) {
  ASSIGN_OR_RETURN(sockaddr_in addr, ParseIpv4ListenAddress(address, "metrics"));

  const auto max_connections = static_cast<size_t>(std::max(1, options.max_connections));
  std::unique_ptr<MetricsServer> server(new MetricsServer(max_connections));
  State* state = server->state_.get();
  state->registry = registry;

  std::string error;
  // One internal thread polls every connection: scrapes are rare and cheap.
  // Admit() evicts the connection idle longest once max_connections are
  // open (see the header); libmicrohttpd's own limit sits a little above,
  // so that it always accepts the connection that triggers an eviction.
  // A scrape is one small request, so a short idle budget costs a
  // keep-alive scraper only a reconnect.
  server->daemon_ =
      MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG, 0, &Admit, state, &Handle,
                       state, MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr), MHD_OPTION_EXTERNAL_LOGGER,
                       &Log, &error, MHD_OPTION_NOTIFY_CONNECTION, &Notify, state, MHD_OPTION_CONNECTION_TIMEOUT,
                       static_cast<unsigned int>(options.idle_timeout_seconds), MHD_OPTION_CONNECTION_LIMIT,
                       static_cast<unsigned int>(max_connections + 16), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                       static_cast<size_t>(16 * 1024), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve /metrics on ", address, ": ",
                                               error.empty() ? "the HTTP daemon failed to start" : error));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  if (info == nullptr || info->port == 0) return absl::InternalError("the /metrics daemon reports no port");
  server->port_ = info->port;
  return server;
}

MetricsServer::~MetricsServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
}

}  // namespace adapterd::metrics
