// HttpGateway: adapterd's REST/JSON API and web console on --http_listen
// (docs/API.md, "REST/JSON"; the mapping is transcoding.h's).
//
// Every API request becomes one call of adapterd.v1.Adapterd on a gRPC
// channel, the in-process channel of this server's gRPC frontend, or, on a
// task-sharded replica, the router's address (--http_grpc_target), so that a
// task's calls reach its replica however they arrive. HTTP therefore has
// gRPC's core unchanged: authentication (`Authorization: Bearer` goes on as
// metadata), tenancy and quotas, validation, the x-task-id routing check,
// size limits, drain behaviour, and the calls' metrics, labelled
// protocol="http" (common/api_util.h, kProtocolMetadata). A request the
// gateway refuses itself, before its gRPC call (no route, a wrong method, a
// malformed body or parameter, a body over the limit, no client
// certificate), is reported through Hooks::on_refusal instead, so that
// every API request is counted once. The call's task
// (the path's task id, the task part of a minted job or dataset id, a
// CreateTrainingJob body's task_id, or the X-Task-Id header, which wins) is
// sent as x-task-id; a `Grpc-Timeout` header (gRPC's format, "30S") sets the
// call's deadline.
//
// Streams:
// - POST /v1/datasets streams the body's bytes (chunked transfer encoding
//   or not) into UploadDataset as they arrive, as a file of the format its
//   Content-Type names: CSV (text/csv), JSON Lines (application/x-ndjson,
//   application/jsonl) or a SQuAD document (application/json). The server
//   reads it (api::DatasetUpload, the one reader of dataset files); the
//   dataset is stored only when the whole body arrived and read; a client
//   that disconnects, a read error, or a refusal from the server cancels
//   the gRPC stream, and nothing is stored (GrpcService's client-stream
//   contract).
// - POST /v1/tasks/{task_id}:import streams the body's bytes likewise.
// - GET /v1/trainingJobs/{job_id}:watch is Server-Sent Events: `event:
//   update`, `id:` the last event's seq, `data:` a WatchTrainingJobResponse
//   as JSON on one line; `: keepalive` comments while nothing happens; and
//   at the end `event: end` with the google.rpc.Status of the watch (code 0
//   when the job finished). `Last-Event-ID` (or after_seq) resumes.
// - GET /v1/tasks/{task_id}:export sends the adapter file as a download.
//
// Other paths: GET / and GET /console/<file> serve the console (embedded
// in the binary; console_dir overrides for development), GET /healthz
// answers 200 while the server is SERVING and 503 otherwise.
//
// Cross-site requests (docs/SECURITY.md): an API request's Host must be one
// of allowed_hosts; a state-changing one (POST, DELETE) that carries an
// Origin must come from the same origin as its Host (403 otherwise: a page
// of another site, opened in the operator's browser, cannot cancel, train or
// import); and a body must have its route's content type (415 otherwise):
// JSON routes application/json, imports application/octet-stream, datasets
// their formats.
//
// Admission (docs/API.md, "Limits"; docs/SECURITY.md): before a body is
// read, the caller is authenticated from its headers (Hooks::authenticate:
// 401 without reading the body), a JSON body's or SQuAD document's size is
// reserved against max_buffered_bytes, the bytes every connection together
// may hold in memory (503 RESOURCE_EXHAUSTED past it; chunked bodies
// reserve as they arrive), and a request whose body is still arriving
// body_timeout after its headers is closed. At max_connections open, a new
// connection evicts the one idle longest among those not being answered
// (keep-alive, headers or a body still arriving), as /metrics does, so
// idle and trickling connections cannot lock clients out; a connection
// whose call runs or whose event stream is open is never evicted.
//
// Threads: libmicrohttpd with a thread per connection (calls block),
// at most max_connections. TLS: the gRPC port's certificate and key; with a
// client CA every request must present a certificate it signed (else 401).
//
// Thread safety: Start and Stop from the owning thread.
#ifndef ADAPTERD_SERVER_HTTP_HTTP_GATEWAY_H_
#define ADAPTERD_SERVER_HTTP_HTTP_GATEWAY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "common/usage_ledger.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace adapterd::http {

// The flags (ServerOptions::http; docs/API.md, "Configuration reference").
struct HttpGatewayOptions {
  std::string listen_address;  // host:port (port 0 = any free); IPv4, 0.0.0.0 or localhost
  // TLS: the gRPC port's certificate, key and client CA, as the gRPC
  // frontend loaded and checked them. No cert_chain = plaintext; ca_certs
  // set = clients must present a certificate one of them signed.
  TlsPem tls;
  int max_connections = 256;
  // Connections from one IP address (0: no limit; keep 0 behind a proxy,
  // where every client has the proxy's address).
  int max_connections_per_ip = 0;
  // Bytes of request bodies all connections together hold in memory.
  int64_t max_buffered_bytes = 256 << 20;
  // A request's body must have arrived this long after its headers.
  absl::Duration body_timeout = absl::Seconds(60);
  // A connection with nothing received for this long is closed.
  absl::Duration idle_timeout = absl::Seconds(120);
  // The largest JSON body.
  int64_t max_body_bytes = 16 << 20;
  // The largest adapter file an import takes (the server's own bound,
  // api::Backend::Options::max_adapter_bytes): a larger Content-Length is
  // 413 from the headers, before any byte is read.
  int64_t max_import_bytes = 512ll << 20;
  // The size of the gRPC messages uploads and imports are sent in.
  int64_t chunk_bytes = 1 << 20;
  // How often an idle event stream sends a keep-alive comment.
  absl::Duration keepalive = absl::Seconds(15);
  // Host names (without port) an API request's Host header may name; empty
  // = any. DNS rebinding: a page of another site whose name resolves to
  // 127.0.0.1 sends its own name as Host, and is refused (403).
  std::vector<std::string> allowed_hosts;
  // Serve the console from this directory instead of the embedded copy
  // (development: edit and reload).
  std::string console_dir;
};

class HttpGateway {
 public:
  struct Hooks {
    std::function<bool()> serving;  // GET /healthz; null = always serving
    // The request's Authorization header (null when absent) checked before
    // its body is read: UNAUTHENTICATED refuses it. Null = every request
    // goes on (gRPC still authenticates each call). Any thread.
    std::function<absl::Status(const std::string* authorization)> authenticate;
    // An API request answered with `code` without a gRPC call: `rpc` is its
    // route's method name ("Predict"), or "none" when no route matched;
    // both static strings. The console and /healthz are not API requests.
    // Called on the request's connection thread.
    std::function<void(const char* rpc, absl::StatusCode code, absl::Duration elapsed)> on_refusal;
  };

  // Errors: INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it
  // cannot be bound, FAILED_PRECONDITION for TLS without libmicrohttpd TLS.
  static absl::StatusOr<std::unique_ptr<HttpGateway>> Start(const HttpGatewayOptions& options,
                                                            std::shared_ptr<grpc::Channel> channel, Hooks hooks);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  int port() const { return port_; }
  // The request bodies held in memory, against max_buffered_bytes (the
  // server exports it as adapterd_admission_* metrics).
  const UsageLedger& buffered_bodies() const;

  // Stops accepting connections, ends open event streams (their `end`
  // event says UNAVAILABLE), and returns when every connection is closed.
  // Calls in flight end as the gRPC side ends them (drain). Idempotent.
  void Stop();

  struct State;  // what the daemon's callbacks share (http_gateway.cc)

 private:
  HttpGateway() = default;
  std::unique_ptr<State> state_;
  int port_ = 0;
};

}  // namespace adapterd::http

#endif  // ADAPTERD_SERVER_HTTP_HTTP_GATEWAY_H_
