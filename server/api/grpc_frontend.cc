#include "server/api/grpc_frontend.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/channel_arguments.h>

#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "server/api/grpc_service.h"
#include "server/api/shard_fanout.h"

namespace adapterd::api {
namespace {

// The replicas' shared secret (--peer_secret_file): private like the tenants
// file, at least 16 bytes once surrounding whitespace is trimmed.
absl::StatusOr<std::string> ReadPeerSecret(const std::string& file) {
  std::vector<std::string> warnings;
  RETURN_IF_ERROR(CheckSecretFileAccess(file, "--peer_secret_file", &warnings));
  for (const std::string& w : warnings) LOG(WARNING) << w;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  const std::string secret(absl::StripAsciiWhitespace(text));
  if (secret.size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat("--peer_secret_file ", file, " holds ", secret.size(),
                                                   " bytes; the replicas' shared secret needs at least 16"));
  }
  return secret;
}

// The serving certificate and key (and the client CA for mutual TLS) from
// the flags; an empty chain means plaintext.
absl::StatusOr<TlsPem> LoadServingTls(const GrpcFrontendOptions& o) {
  TlsFiles files;
  files.cert_file = o.tls_cert_file;
  files.key_file = o.tls_key_file;
  files.ca_file = o.tls_client_ca_file;
  files.cert_flag = "--tls_cert_file";
  files.key_flag = "--tls_key_file";
  files.ca_flag = "--tls_client_ca_file";
  return LoadTlsPem(files);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsPem& tls) {
  if (tls.cert_chain.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(tls.ca_certs.empty()
                                            ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                            : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = tls.ca_certs;
  ssl.pem_key_cert_pairs.push_back({tls.private_key, tls.cert_chain});
  return grpc::SslServerCredentials(ssl);
}

// What this replica presents when it calls other replicas (or the router):
// over TLS its own certificate, trusting --tls_peer_ca_file; null when the
// server is plaintext.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ReplicaCredentials(const GrpcFrontendOptions& o,
                                                                             const TlsPem& tls) {
  if (tls.cert_chain.empty()) return nullptr;
  TlsFiles peer_files;
  peer_files.ca_file = o.tls_peer_ca_file;
  peer_files.ca_flag = "--tls_peer_ca_file";
  ASSIGN_OR_RETURN(const TlsPem peer_ca, LoadTlsPem(peer_files));
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = peer_ca.ca_certs;  // "" = gRPC's default roots
  ssl.pem_private_key = tls.private_key;
  ssl.pem_cert_chain = tls.cert_chain;
  return grpc::SslCredentials(ssl);
}

// The fan-out to the other replicas; over TLS they see this replica's
// certificate as a client certificate.
absl::StatusOr<std::unique_ptr<ShardFanout>> MakeFanout(const GrpcFrontendOptions& o, const TlsPem& tls) {
  ShardFanout::Options fo;
  fo.peers = o.peers;
  ASSIGN_OR_RETURN(fo.secret, ReadPeerSecret(o.peer_secret_file));
  ASSIGN_OR_RETURN(fo.credentials, ReplicaCredentials(o, tls));
  return std::make_unique<ShardFanout>(std::move(fo));
}

const char* Describe(const TlsPem& tls) {
  if (tls.cert_chain.empty()) return "plaintext";
  return tls.ca_certs.empty() ? "TLS" : "mutual TLS (client certificates required)";
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrpcFrontend>> GrpcFrontend::Start(const GrpcFrontendOptions& o, Hooks hooks) {
  std::unique_ptr<GrpcFrontend> f(new GrpcFrontend());
  f->options_ = o;
  ASSIGN_OR_RETURN(const TlsPem tls, LoadServingTls(o));
  f->tls_ = tls;
  if (!tls.cert_chain.empty()) {
    for (const std::string& w : TlsValidityWarnings(tls, o.tls_cert_file, absl::Now())) LOG(WARNING) << w;
    if (hooks.on_certificate) hooks.on_certificate(tls.not_before_seconds, tls.not_after_seconds);
  }
  GrpcService::Options so;
  so.tenants = hooks.tenants;
  so.on_rpc = std::move(hooks.on_rpc);
  if (!o.peers.empty()) {
    ASSIGN_OR_RETURN(f->fanout_, MakeFanout(o, tls));
    so.fanout = f->fanout_.get();
    LOG(INFO) << "one of " << o.peers.size() << " task-sharded replicas: list calls answer for all of them";
  }
  f->service_ = std::make_unique<GrpcService>(std::move(so));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen_address, ServerCredentials(tls), &f->port_);
  builder.RegisterService(f->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  f->server_ = builder.BuildAndStart();
  if (f->server_ == nullptr || f->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", o.listen_address, " (address in use, or not a valid host:port?)"));
  }
  f->SetServing(false);
  LOG(INFO) << "gRPC listening on port " << f->port_ << ", " << Describe(tls)
            << " (NOT_SERVING while the encoder loads)";
  return f;
}

GrpcFrontend::~GrpcFrontend() {
  if (server_ != nullptr && !stopped_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> GrpcFrontend::GatewayChannel(const std::string& target) const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(static_cast<int>(options_.max_message_bytes));
  args.SetMaxSendMessageSize(static_cast<int>(options_.max_message_bytes));
  if (target.empty()) return server_->InProcessChannel(args);
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, ReplicaCredentials(options_, tls_));
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(target, credentials, args);
}

void GrpcFrontend::SetBackend(Backend* backend) { service_->SetBackend(backend); }

void GrpcFrontend::SetServing(bool serving) {
  if (server_ != nullptr) server_->GetHealthCheckService()->SetServingStatus(serving);
}

void GrpcFrontend::Shutdown(absl::Time deadline) {
  if (server_ != nullptr) server_->Shutdown(absl::ToChronoTime(deadline));
}

void GrpcFrontend::Wait() {
  if (server_ == nullptr || stopped_) return;
  server_->Wait();
  stopped_ = true;
}

}  // namespace adapterd::api
