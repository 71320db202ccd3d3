#include "server/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cpu_features.h"
#include "common/cpu_quota.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "common/periodic_thread.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "server/api/backend.h"
#include "server/api/grpc_service.h"
#include "server/api/shard_fanout.h"
#include "server/backup_scheduler.h"
#include "server/api/tenants.h"
#include "server/metrics_bridge.h"
#include "server/model/cpu_kernels.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"
#include "server/serving/inference_engine.h"
#include "server/training/job_queue.h"
#include "server/training/job_runner.h"
#include "storage/database.h"

namespace adapterd {

// Declaration order is destruction order in reverse: parts that use others
// are declared after them.
struct Server::Parts {
  std::unique_ptr<storage::Database> db;
  std::unique_ptr<api::TenantRegistry> tenants;
  std::unique_ptr<MetricsBridge> metrics;
  model::LoadedModel model;          // serving encoder (the resolved --dtype)
  model::LoadedModel training_model; // fp32 copy when serving is not fp32
  std::unique_ptr<serving::InferenceEngine> engine;
  std::unique_ptr<training::JobQueue> queue;
  std::unique_ptr<training::JobRunner> runner;
  std::unique_ptr<api::Backend> backend;
  std::unique_ptr<api::ShardFanout> fanout;
  std::unique_ptr<api::GrpcService> service;
  std::unique_ptr<BackupScheduler> backups;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = 0;
  std::unique_ptr<PeriodicThread> heap_releaser;  // last: stops before the metrics it reports to
};

namespace {

absl::StatusOr<c10::ScalarType> ParseDtype(const std::string& s) {
  if (s == "fp32") return c10::kFloat;
  if (s == "bf16") return c10::kBFloat16;
  if (s == "fp16") return c10::kHalf;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", s, "'"));
}

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

// Loads the serving encoder at the resolved --dtype and --residual_stream
// (both logged with their reason) and, when it is not fp32, the fp32 copy
// training needs into p.training_model. Returns what the model-info metric
// reports.
absl::StatusOr<ModelInfo> LoadModels(const ServerOptions& o, Server::Parts& p) {
  const ServingDtype serving_dtype = ResolveServingDtype(o.dtype, o.device, CurrentFastBf16Feature());
  LOG(INFO) << "serving dtype " << serving_dtype.dtype << " (" << serving_dtype.reason << ")";
  ASSIGN_OR_RETURN(c10::ScalarType dtype, ParseDtype(serving_dtype.dtype));
  // "cuda" is cuda:0 (c10::Device("cuda") has no index: issue 33).
  ASSIGN_OR_RETURN(c10::Device device, model::ParseDevice(o.device));
  const ResidualStream stream = ResolveResidualStream(o.residual_stream, o.device, serving_dtype.dtype);
  LOG(INFO) << "residual stream " << (stream.reduced ? serving_dtype.dtype : "fp32") << " (" << stream.reason << ")";
  model::LoadOptions lo;
  lo.device = device;
  lo.dtype = dtype;
  lo.max_seq_len = o.max_seq_len;
  lo.reduced_residual_stream = stream.reduced;
  ASSIGN_OR_RETURN(p.model, model::LoadBertModel(o.model_dir, lo));
  ModelInfo info;
  info.fingerprint = p.model.fingerprint;
  info.device = o.device;
  info.dtype = serving_dtype.dtype;
  info.layers = p.model.config.num_hidden_layers;
  info.hidden = p.model.config.hidden_size;
  info.encoder_bytes = p.model.encoder->NumParameters() * static_cast<int64_t>(c10::elementSize(dtype));
  if (dtype != c10::kFloat) {
    lo.dtype = c10::kFloat;
    lo.reduced_residual_stream = false;
    ASSIGN_OR_RETURN(p.training_model, model::LoadBertModel(o.model_dir, lo));
    info.encoder_bytes += p.training_model.encoder->NumParameters() * 4;
  }
  return info;
}

// --threads, the CPU kernels and the wait policy, logged.
void ConfigureCompute(const ServerOptions& o) {
  // --threads 0: what this process may use, which in a container is its CPU
  // quota rather than the host's cores.
  const CpuBudget cpus = CurrentCpuBudget();
  const int threads = model::SetComputeThreads(o.threads > 0 ? o.threads : cpus.usable());
  LOG(INFO) << "intra-op threads: " << threads << " ("
            << (o.threads > 0 ? std::string("--threads") : absl::StrCat("--threads 0: ", cpus.Describe())) << ")";
  LOG(INFO) << model::DescribeCpuKernels();
  const bool onednn = model::OneBlasThreadUnderOneDnn();
  if (onednn) LOG(INFO) << "OpenBLAS threads: 1 (matrix products run in oneDNN)";
  if (threads > 1 && std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    // libgomp reads its wait policy only at load, so it cannot be set here.
    LOG(INFO) << "note: neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is set; scripts/run.sh and the image set "
              << (onednn ? "GOMP_SPINCOUNT=3000000" : "OMP_WAIT_POLICY=PASSIVE")
              << " (docs/PERFORMANCE.md, \"Wait policy\")";
  }

}

// The job defaults the flags set (the rest are Hyperparameters' own).
training::Hyperparameters TrainingDefaults(const ServerOptions& o) {
  training::Hyperparameters defaults;
  defaults.max_seq_len = o.max_seq_len;
  defaults.micro_batch_size = o.training_micro_batch;
  return defaults;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)), parts_(std::make_unique<Parts>()) {}

Server::~Server() { Shutdown(); }

int Server::grpc_port() const { return parts_->grpc_port; }
int Server::metrics_port() const { return parts_->metrics ? parts_->metrics->port() : 0; }

absl::StatusOr<std::unique_ptr<Server>> Server::Start(ServerOptions options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Server> server(new Server(std::move(options)));
  absl::Status s = server->StartAll();
  if (!s.ok()) {
    server->Shutdown();
    return s;
  }
  return server;
}

absl::Status Server::StartAll() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  ConfigureCompute(o);
  RETURN_IF_ERROR(OpenStorage());
  // gRPC answers health checks (NOT_SERVING) while the encoder loads.
  RETURN_IF_ERROR(StartGrpc());
  ASSIGN_OR_RETURN(const ModelInfo info, LoadModels(o, p));
  p.metrics->SetModelInfo(info);
  p.metrics->SetCacheBudgets(o.host_cache_bytes, o.device_cache_bytes);
  RETURN_IF_ERROR(StartServingEngine());
  RETURN_IF_ERROR(StartTraining());
  RETURN_IF_ERROR(CreateBackend());
  StartBackgroundWork();
  p.runner->Start();
  p.service->SetBackend(p.backend.get());
  p.grpc_server->GetHealthCheckService()->SetServingStatus(true);
  p.metrics->SetServing(true);
  LOG(INFO) << "SERVING on port " << p.grpc_port << " (model " << o.model_dir << ", " << o.device << ", "
            << info.dtype << ")";
  return absl::OkStatus();
}

absl::Status Server::OpenStorage() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create --data_dir ", o.data_dir, ": ", ec.message()));
  storage::Database::Options dbo;
  dbo.path = (std::filesystem::path(o.data_dir) / "db").string();
  dbo.min_free_bytes = o.min_free_disk_bytes;
  ASSIGN_OR_RETURN(p.db, storage::Database::Open(dbo));

  api::TenantRegistry::Options to;
  to.tenants_file = o.tenants_file;
  to.defaults.max_tasks = o.max_tasks;
  to.defaults.max_queued_jobs = o.max_queued_jobs;
  to.defaults.max_texts_per_predict = o.max_texts_per_predict;
  to.defaults.max_dataset_bytes = o.max_dataset_bytes;
  to.defaults.predict_rate_per_second = o.predict_rate;
  to.defaults.predict_burst = o.predict_burst;
  ASSIGN_OR_RETURN(p.tenants, api::TenantRegistry::Create(to));

  ASSIGN_OR_RETURN(p.metrics, MetricsBridge::Create(o.metrics_address));
  if (p.metrics->port() != 0) LOG(INFO) << "/metrics on port " << p.metrics->port();
  p.metrics->WatchDataDir(o.data_dir);
  return absl::OkStatus();
}

absl::Status Server::StartGrpc() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  api::GrpcService::Options so;
  so.tenants = p.tenants.get();
  MetricsBridge* metrics = p.metrics.get();
  so.on_rpc = [metrics](const api::RpcRecord& r) { metrics->OnRpc(r); };
  // TLS files are checked before anything listens (common/tls.h).
  TlsFiles tls_files;
  tls_files.cert_file = o.tls_cert_file;
  tls_files.key_file = o.tls_key_file;
  tls_files.ca_file = o.tls_client_ca_file;
  tls_files.cert_flag = "--tls_cert_file";
  tls_files.key_flag = "--tls_key_file";
  tls_files.ca_flag = "--tls_client_ca_file";
  ASSIGN_OR_RETURN(const TlsPem tls, LoadTlsPem(tls_files));
  const bool use_tls = !tls.cert_chain.empty();
  if (use_tls) {
    for (const std::string& w : TlsValidityWarnings(tls, o.tls_cert_file, absl::Now())) {
      LOG(WARNING) << w;
    }
    p.metrics->SetTlsCertificate(tls.not_before_seconds, tls.not_after_seconds);
  }
  std::shared_ptr<grpc::ServerCredentials> server_credentials = grpc::InsecureServerCredentials();
  if (use_tls) {
    grpc::SslServerCredentialsOptions ssl(tls.ca_certs.empty()
                                              ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = tls.ca_certs;
    ssl.pem_key_cert_pairs.push_back({tls.private_key, tls.cert_chain});
    server_credentials = grpc::SslServerCredentials(ssl);
  }
  if (!o.peers.empty()) {
    api::ShardFanout::Options fo;
    fo.peers = o.peers;
    ASSIGN_OR_RETURN(fo.secret, ReadPeerSecret(o.peer_secret_file));
    if (use_tls) {
      // Replicas call each other as clients: this certificate identifies
      // this replica to peers that require client certificates.
      TlsFiles peer_files;
      peer_files.ca_file = o.tls_peer_ca_file;
      peer_files.ca_flag = "--tls_peer_ca_file";
      ASSIGN_OR_RETURN(const TlsPem peer_ca, LoadTlsPem(peer_files));
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = peer_ca.ca_certs;  // "" = gRPC's default roots
      ssl.pem_private_key = tls.private_key;
      ssl.pem_cert_chain = tls.cert_chain;
      fo.credentials = grpc::SslCredentials(ssl);
    }
    p.fanout = std::make_unique<api::ShardFanout>(std::move(fo));
    so.fanout = p.fanout.get();
    LOG(INFO) << "one of " << o.peers.size() << " task-sharded replicas: list calls answer for all of them";
  }
  p.service = std::make_unique<api::GrpcService>(std::move(so));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen_address, server_credentials, &p.grpc_port);
  builder.RegisterService(p.service.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_bytes));
  p.grpc_server = builder.BuildAndStart();
  if (p.grpc_server == nullptr || p.grpc_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.listen_address,
                                               " (address in use, or not a valid host:port?)"));
  }
  p.grpc_server->GetHealthCheckService()->SetServingStatus(false);
  LOG(INFO) << "gRPC listening on port " << p.grpc_port << ", "
            << (!use_tls                ? "plaintext"
                : tls.ca_certs.empty() ? "TLS"
                                       : "mutual TLS (client certificates required)")
            << " (NOT_SERVING while the encoder loads)";
  return absl::OkStatus();
}

absl::Status Server::StartServingEngine() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  serving::InferenceEngine::Options eo;
  eo.encoder = p.model.encoder.get();
  eo.tokenizer = p.model.tokenizer.get();
  eo.db = p.db.get();
  eo.device_cache_bytes = o.device_cache_bytes;
  eo.host_cache_bytes = o.host_cache_bytes;
  eo.max_batch_size = o.max_batch_size;
  eo.max_queue_delay_us = o.max_queue_delay_us;
  eo.max_seq_len = o.max_seq_len;
  eo.min_training_share = o.training_share;
  eo.observer = p.metrics->serving_observer();
  ASSIGN_OR_RETURN(p.engine, serving::InferenceEngine::Create(std::move(eo)));
  for (const std::string& pin : o.pinned_tasks) {
    const size_t slash = pin.find('/');
    p.engine->cache().Pin(pin.substr(0, slash), pin.substr(slash + 1));
  }
  return absl::OkStatus();
}

absl::Status Server::StartTraining() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  MetricsBridge* metrics = p.metrics.get();
  const model::LoadedModel* train_model = p.training_model.encoder != nullptr ? &p.training_model : &p.model;
  serving::InferenceEngine* engine = p.engine.get();
  const training::Hyperparameters defaults = TrainingDefaults(o);
  training::DatasetLimits limits;
  limits.max_examples = o.max_dataset_examples;
  training::JobQueue::Options qo;
  qo.db = p.db.get();
  qo.limits.max_queued_total = o.max_queued_jobs_total;
  qo.validator = training::MakeJobValidator(p.db.get(), train_model->tokenizer.get(), limits, defaults);
  ASSIGN_OR_RETURN(p.queue, training::JobQueue::Create(std::move(qo)));
  p.metrics->WatchJobs(p.db.get(), p.tenants->TenantIds());

  training::JobRunner::Options ro;
  ro.queue = p.queue.get();
  ro.db = p.db.get();
  ro.encoder = train_model->encoder.get();
  ro.tokenizer = train_model->tokenizer.get();
  ro.defaults = defaults;
  ro.keep_versions = o.keep_versions;
  ro.run_on_device = [engine, metrics](const std::function<absl::Status()>& fn) {
    return engine->executor().RunTraining(fn);
  };
  ro.on_promoted = [engine](const storage::PromotionResult& r) { engine->cache().Invalidate(r.tenant, r.task_id); };
  ro.on_step = [metrics](int64_t examples) { metrics->OnTrainingStep(examples); };
  ASSIGN_OR_RETURN(p.runner, training::JobRunner::Create(std::move(ro)));
  return absl::OkStatus();
}

absl::Status Server::CreateBackend() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  const training::Hyperparameters defaults = TrainingDefaults(o);
  api::Backend::Options bo;
  bo.db = p.db.get();
  bo.queue = p.queue.get();
  bo.engine = p.engine.get();
  bo.encoder = p.model.encoder.get();
  bo.training_defaults = defaults;
  bo.max_client_streams = o.max_client_streams;
  bo.max_client_streams_per_tenant = o.max_client_streams_per_tenant;
  bo.max_import_bytes_in_flight = o.max_import_bytes_in_flight;
  ASSIGN_OR_RETURN(p.backend, api::Backend::Create(std::move(bo)));
  return absl::OkStatus();
}

void Server::StartBackgroundWork() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  MetricsBridge* metrics = p.metrics.get();
  if (!o.backup_dir.empty()) {
    BackupScheduler::Options bso;
    bso.db = p.db.get();
    bso.backup_dir = o.backup_dir;
    bso.interval = absl::Seconds(o.backup_interval_seconds);
    bso.keep = o.backups_to_keep;
    bso.on_backup = [metrics](const absl::StatusOr<storage::BackupInfo>& info, absl::Duration took) {
      metrics->OnBackup(info.ok(), absl::ToDoubleSeconds(took), absl::ToUnixMicros(absl::Now()) / 1e6);
    };
    p.backups = std::make_unique<BackupScheduler>(std::move(bso));
  }

  if (o.heap_release_interval_seconds > 0) {
    // Freed memory that each malloc arena keeps would otherwise add up
    // (ReleaseFreeHeap, common/malloc_tuning.h, says how much).
    p.heap_releaser = std::make_unique<PeriodicThread>(absl::Seconds(o.heap_release_interval_seconds), [metrics] {
      const absl::Time start = absl::Now();
      const int64_t bytes = ReleaseFreeHeap();
      metrics->OnHeapRelease(bytes, absl::Now() - start);
    });
    LOG(INFO) << "freed heap memory goes back to the kernel every " << o.heap_release_interval_seconds << " s";
  }

}

void Server::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  Parts& p = *parts_;
  // The whole shutdown fits in drain_seconds: calls get the budget less a
  // reserve for stopping gRPC, the trainer and the database; client streams
  // stop taking messages a little earlier, so they can still answer
  // UNAVAILABLE before gRPC cancels what remains. main.cc enforces the bound
  // with a watchdog in case a training step outlasts it.
  const ShutdownPlan plan = PlanShutdown(absl::Now(), options_.drain_seconds);
  if (p.grpc_server) p.grpc_server->GetHealthCheckService()->SetServingStatus(false);
  if (p.metrics) p.metrics->SetServing(false);
  if (p.service) p.service->StartDraining(plan.streams_deadline);
  // Preempt the running job at its next step while calls drain; it is
  // checkpointed and left RUNNING, so the next start resumes it.
  if (p.runner) p.runner->RequestStop();
  if (p.service && !p.service->WaitForIdle(plan.calls_deadline)) {
    LOG(WARNING) << "calls still in flight after the drain; cancelling them";
  }
  // Refusals from here on are answered after gRPC has stopped (ShutdownPlan).
  const absl::Time answer_at = absl::Now() + 2 * plan.hold;
  if (p.service) p.service->HoldRefusalsUntil(answer_at);
  absl::SleepFor(plan.hold);
  // Refuse more Predicts; one still in flight (only if the drain ran out)
  // finishes first, or the watchdog in main.cc ends the wait.
  if (p.engine) p.engine->Drain();
  // gRPC stops taking calls at once, and lets the held refusals finish; a
  // call admitted before the drain that is still running (the drain ran
  // out) is cancelled once they are answered, within the last step.
  if (p.grpc_server) {
    p.grpc_server->Shutdown(absl::ToChronoTime(std::max(plan.calls_deadline, answer_at + plan.hold)));
  }
  if (p.runner) p.runner->Stop();
  if (p.engine) p.engine->Shutdown();
  if (p.metrics) p.metrics->Stop();
  if (p.grpc_server) p.grpc_server->Wait();
  p.backups.reset();  // waits for a backup in progress
  p.heap_releaser.reset();
  p.backend.reset();
  p.runner.reset();
  p.queue.reset();
  p.engine.reset();
  if (p.db) {
    absl::Status s = p.db->Close();
    if (!s.ok()) LOG(ERROR) << "closing the database: " << s;
  }
  stopped_.Notify();
}

ShutdownPlan PlanShutdown(absl::Time start, int drain_seconds) {
  const absl::Duration budget = absl::Seconds(std::max(0, drain_seconds));
  const absl::Duration slice = std::min(absl::Seconds(1), budget / 4);
  ShutdownPlan plan;
  plan.deadline = start + budget;
  plan.calls_deadline = plan.deadline - slice;
  plan.streams_deadline = plan.calls_deadline - slice;
  plan.hold = std::min(absl::Milliseconds(100), slice / 4);
  return plan;
}

void Server::Wait() { stopped_.WaitForNotification(); }

absl::Status Server::ReloadTenants() {
  RETURN_IF_ERROR(parts_->tenants->Reload());
  // New tenants get queue-depth series from the next scrape.
  parts_->metrics->WatchJobs(parts_->db.get(), parts_->tenants->TenantIds());
  return absl::OkStatus();
}

bool Server::TriggerBackup() {
  if (!parts_->backups) return false;
  parts_->backups->TriggerNow();
  return true;
}

}  // namespace adapterd
