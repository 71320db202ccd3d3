// GrpcFrontend: the process's gRPC side, built from its flags. It loads the
// TLS files (common/tls.h: checked before anything listens), sets up the
// replicas' fan-out when --peers is given (shard_fanout.h), and starts a
// grpc::Server on --listen with GrpcService, the standard health service and
// reflection. It starts NOT_SERVING with no backend: every call is
// UNAVAILABLE ("starting") until the owner sets the backend and flips the
// health status, so orchestrators can probe it while the encoder loads.
//
// Shutdown is the owner's to sequence (server/server.h): StartDraining,
// WaitForIdle and HoldRefusalsUntil go to the service; Shutdown stops gRPC
// with a deadline after which calls still running are cancelled; Wait
// returns when gRPC has stopped.
//
// Thread safety: Start and the shutdown steps from the owning thread;
// SetServing and SetBackend from any thread.
#ifndef ADAPTERD_SERVER_API_GRPC_FRONTEND_H_
#define ADAPTERD_SERVER_API_GRPC_FRONTEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "server/api/rpc_record.h"

namespace grpc {
class Channel;
class Server;
}  // namespace grpc

namespace adapterd::api {

class Backend;
class GrpcService;
class ShardFanout;
class TenantRegistry;

// The flags (ServerOptions::grpc; docs/API.md, "Configuration reference").
struct GrpcFrontendOptions {
  std::string listen_address = "127.0.0.1:8500";  // host:port (port 0 = any free)
  int64_t max_message_bytes = 16 << 20;           // largest gRPC message either way
  // TLS: both empty = plaintext. With tls_client_ca_file, every caller must
  // present a certificate that CA signed (mutual TLS). Replicas (--peers)
  // call each other over TLS too, presenting this certificate and trusting
  // tls_peer_ca_file (default: the system's roots).
  std::string tls_cert_file;       // PEM chain, leaf first
  std::string tls_key_file;        // PEM private key of the leaf
  std::string tls_client_ca_file;  // PEM CA(s) that sign client certificates
  std::string tls_peer_ca_file;    // PEM CA(s) that sign the replicas' certificates
  // Every replica's gRPC address, this one's included. When set, list calls
  // answer for all replicas, and calls about a task must carry it in
  // x-task-id.
  std::vector<std::string> peers;
  // A file holding the secret every replica shares (at least 16 bytes;
  // surrounding whitespace ignored): it marks the replicas' own fan-out
  // calls. Required with --peers.
  std::string peer_secret_file;
};

class GrpcFrontend {
 public:
  // What the frontend reports to and reads from the rest of the process.
  struct Hooks {
    const TenantRegistry* tenants = nullptr;  // not owned; outlives the frontend
    std::function<void(const RpcRecord&)> on_rpc;
    // The serving certificate's validity (Unix seconds), when TLS is on.
    std::function<void(int64_t not_before, int64_t not_after)> on_certificate;
  };

  // Errors: the TLS or peer-secret files' (INVALID_ARGUMENT,
  // FAILED_PRECONDITION, NOT_FOUND, naming the flag), and UNAVAILABLE when
  // --listen cannot be bound.
  static absl::StatusOr<std::unique_ptr<GrpcFrontend>> Start(const GrpcFrontendOptions& options, Hooks hooks);
  ~GrpcFrontend();
  GrpcFrontend(const GrpcFrontend&) = delete;
  GrpcFrontend& operator=(const GrpcFrontend&) = delete;

  int port() const { return port_; }
  // The serving certificate, key and client CA, loaded and checked (no
  // cert_chain: plaintext). The HTTP gateway serves with the same.
  const TlsPem& tls() const { return tls_; }
  GrpcService& service() { return *service_; }

  // A channel to this server's API for the HTTP gateway: in-process when
  // `target` is empty, else to `target` (a router) with the credentials
  // replicas present to each other (plaintext without TLS).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> GatewayChannel(const std::string& target) const;

  void SetBackend(Backend* backend);
  // The health service's status for every service name.
  void SetServing(bool serving);
  // Stops taking calls; calls still running at `deadline` are cancelled.
  void Shutdown(absl::Time deadline);
  void Wait();

 private:
  GrpcFrontend() = default;

  GrpcFrontendOptions options_;
  TlsPem tls_;
  std::unique_ptr<ShardFanout> fanout_;
  std::unique_ptr<GrpcService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool stopped_ = false;  // Wait() returned
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_GRPC_FRONTEND_H_
