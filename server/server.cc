#include "server/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
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
#include "server/api/backend.h"
#include "server/api/grpc_frontend.h"
#include "server/api/grpc_service.h"
#include "server/api/tenants.h"
#include "server/backup_scheduler.h"
#include "server/http/http_gateway.h"
#include "server/metrics_bridge.h"
#include "server/model/cpu_kernels.h"
#include "server/model/dtype_calibration.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"
#include "server/serving/inference_engine.h"
#include "server/training/job_manager.h"
#include "server/training/job_runner.h"
#include "storage/database.h"

namespace adapterd {

// Declaration order is destruction order in reverse: parts that use others
// are declared after them.
struct Server::Parts {
  std::unique_ptr<storage::Database> db;
  std::unique_ptr<api::TenantRegistry> tenants;
  std::unique_ptr<MetricsBridge> metrics;
  model::LoadedModel model;           // serving encoder (the resolved --dtype)
  model::LoadedModel training_model;  // fp32 copy when serving is not fp32
  std::unique_ptr<serving::InferenceEngine> engine;
  std::unique_ptr<training::JobManager> jobs;
  std::unique_ptr<training::JobRunner> runner;
  std::unique_ptr<api::Backend> backend;
  std::unique_ptr<api::GrpcFrontend> grpc;
  std::unique_ptr<http::HttpGateway> http;  // calls into grpc: stops first
  std::atomic<bool> serving{false};         // the HTTP gateway's /healthz
  // Health (gRPC's, /healthz, adapterd_serving) is SERVING while the server
  // is up (started, not draining) and inference can run (PublishHealth).
  absl::Mutex health_mu;
  bool up ABSL_GUARDED_BY(health_mu) = false;
  bool inference_ok ABSL_GUARDED_BY(health_mu) = true;
  std::unique_ptr<BackupScheduler> backups;
  std::unique_ptr<PeriodicThread> heap_releaser;  // last: stops before the metrics it reports to
};

namespace {

// Updates what is given of the server's health and publishes the result to
// gRPC's health service, /healthz and the adapterd_serving gauge.
void PublishHealth(Server::Parts& p, std::optional<bool> up, std::optional<bool> inference_ok) {
  absl::MutexLock lock(&p.health_mu);
  if (up.has_value()) p.up = *up;
  if (inference_ok.has_value()) p.inference_ok = *inference_ok;
  const bool serving = p.up && p.inference_ok;
  if (p.grpc) p.grpc->SetServing(serving);
  if (p.metrics) p.metrics->SetServing(serving);
  p.serving.store(serving);
}

absl::StatusOr<c10::ScalarType> ParseDtype(const std::string& s) {
  if (s == "fp32") return c10::kFloat;
  if (s == "bf16") return c10::kBFloat16;
  if (s == "fp16") return c10::kHalf;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", s, "'"));
}

// Loads the serving encoder at the resolved --dtype and --residual_stream
// (both logged with their reason) and, when it is not fp32 and
// --training_dtype is fp32, the fp32 copy training then needs into
// p.training_model. Returns what the model-info metric
// reports. --dtype auto on a CPU with native bf16 loads the fp32 encoder
// first and times fp32 against bf16 on its first layer (dtype_calibration.h);
// that encoder then serves (fp32 chosen) or trains (bf16), so measuring costs
// no extra load. Call after ConfigureCompute, while nothing else computes:
// the calibration times one thread and sets the pool back to --threads.
absl::StatusOr<ModelInfo> LoadModels(const ServerOptions& o, Server::Parts& p) {
  // "cuda" is cuda:0 (c10::Device("cuda") has no index).
  ASSIGN_OR_RETURN(c10::Device device, model::ParseDevice(o.model.device));
  model::LoadOptions lo;
  lo.device = device;
  lo.max_seq_len = o.model.max_seq_len;
  model::LoadedModel fp32;  // loaded by the calibration
  DtypeCalibration calibrate;
  if (o.model.dtype_calibration) {
    calibrate = [&]() -> absl::StatusOr<model::DtypeTimings> {
      lo.dtype = c10::kFloat;
      ASSIGN_OR_RETURN(fp32, model::LoadBertModel(o.model.model_dir, lo));
      model::DtypeCalibrationOptions co;
      co.tokens = std::min<int64_t>({co.tokens, o.model.max_seq_len, fp32.config.max_position_embeddings});
      return model::CalibrateDtypes(fp32.config, fp32.encoder->weights(), co);
    };
  }
  ASSIGN_OR_RETURN(const ServingDtype serving_dtype,
                   ResolveServingDtype(o.model.dtype, o.model.device, CurrentFastBf16Feature(), calibrate));
  LOG(INFO) << "serving dtype " << serving_dtype.dtype << " (" << serving_dtype.reason << ")";
  ASSIGN_OR_RETURN(c10::ScalarType dtype, ParseDtype(serving_dtype.dtype));
  const ResidualStream stream = ResolveResidualStream(o.model.residual_stream, o.model.device, serving_dtype.dtype);
  LOG(INFO) << "residual stream " << (stream.reduced ? serving_dtype.dtype : "fp32") << " (" << stream.reason << ")";
  lo.dtype = dtype;
  lo.reduced_residual_stream = stream.reduced;
  if (dtype == c10::kFloat && fp32.encoder) {
    p.model = std::move(fp32);
  } else {
    ASSIGN_OR_RETURN(p.model, model::LoadBertModel(o.model.model_dir, lo));
  }
  ModelInfo info;
  info.fingerprint = p.model.fingerprint;
  info.device = o.model.device;
  info.dtype = serving_dtype.dtype;
  info.layers = p.model.config.num_hidden_layers;
  info.hidden = p.model.config.hidden_size;
  info.encoder_bytes = p.model.encoder->NumParameters() * static_cast<int64_t>(c10::elementSize(dtype));
  if (serving_dtype.calibration) {
    info.dtype_calibration_seconds = {{"fp32", serving_dtype.calibration->fp32_seconds_per_row},
                                      {"bf16", serving_dtype.calibration->bf16_seconds_per_row}};
  }
  // An fp32 copy for training (--training_dtype fp32); with
  // --training_dtype serving the serving encoder trains (p.training_model
  // stays empty).
  if (dtype != c10::kFloat && o.training.dtype == "fp32") {
    if (fp32.encoder) {
      p.training_model = std::move(fp32);
    } else {
      lo.dtype = c10::kFloat;
      lo.reduced_residual_stream = false;
      ASSIGN_OR_RETURN(p.training_model, model::LoadBertModel(o.model.model_dir, lo));
    }
    info.encoder_bytes += p.training_model.encoder->NumParameters() * 4;
  }
  LOG(INFO) << "training dtype "
            << (dtype == c10::kFloat || o.training.dtype == "fp32"
                    ? "fp32"
                    : absl::StrCat(serving_dtype.dtype, " products, fp32 parameters (mixed precision)"))
            << " (--training_dtype " << o.training.dtype << ")";
  return info;
}

// --threads, the CPU kernels and the wait policy, logged.
void ConfigureCompute(const ServerOptions& o) {
  // --threads 0: what this process may use, which in a container is its CPU
  // quota rather than the host's cores.
  const CpuBudget cpus = CurrentCpuBudget();
  const int threads = model::SetComputeThreads(o.model.threads > 0 ? o.model.threads : cpus.usable());
  LOG(INFO) << "intra-op threads: " << threads << " ("
            << (o.model.threads > 0 ? std::string("--threads") : absl::StrCat("--threads 0: ", cpus.Describe())) << ")";
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
  defaults.max_seq_len = o.model.max_seq_len;
  defaults.micro_batch_size = o.training.micro_batch;
  return defaults;
}

}  // namespace

Server::Server(ServerOptions options) : options_(std::move(options)), parts_(std::make_unique<Parts>()) {}

Server::~Server() { Shutdown(); }

int Server::grpc_port() const { return parts_->grpc ? parts_->grpc->port() : 0; }
int Server::http_port() const { return parts_->http ? parts_->http->port() : 0; }
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
  // gRPC answers health checks (NOT_SERVING) while the encoder loads, and
  // HTTP /healthz 503.
  RETURN_IF_ERROR(StartGrpc());
  RETURN_IF_ERROR(StartHttp());
  ASSIGN_OR_RETURN(const ModelInfo info, LoadModels(o, p));
  p.metrics->SetModelInfo(info);
  p.metrics->SetCacheBudgets(o.serving.host_cache_bytes, o.serving.device_cache_bytes);
  RETURN_IF_ERROR(StartServingEngine());
  RETURN_IF_ERROR(StartTraining());
  RETURN_IF_ERROR(CreateBackend());
  StartBackgroundWork();
  p.runner->Start();
  p.grpc->SetBackend(p.backend.get());
  PublishHealth(p, /*up=*/true, std::nullopt);
  LOG(INFO) << "SERVING on port " << p.grpc->port() << " (model " << o.model.model_dir << ", " << o.model.device << ", "
            << info.dtype << ")";
  return absl::OkStatus();
}

namespace {

// The Host names the gateway answers API requests for (--http_allowed_hosts;
// by default from --http_listen's host).
std::vector<std::string> AllowedHttpHosts(const ServerOptions::Http& http) {
  std::vector<std::string> hosts = http.allowed_hosts;
  if (std::find(hosts.begin(), hosts.end(), "*") != hosts.end()) return {};
  if (hosts.empty()) {
    const std::string& listen = http.gateway.listen_address;
    const std::string host = listen.substr(0, listen.rfind(':'));
    if (host.empty() || host == "0.0.0.0") return {};  // every interface: any name
    hosts = {"localhost", "127.0.0.1", "[::1]"};
    if (host != "localhost" && host != "127.0.0.1") hosts.push_back(host);
  }
  for (std::string& h : hosts) h = absl::AsciiStrToLower(h);
  return hosts;
}

}  // namespace

absl::Status Server::StartHttp() {
  Parts& p = *parts_;
  if (options_.http.gateway.listen_address.empty()) return absl::OkStatus();
  http::HttpGatewayOptions go = options_.http.gateway;
  go.tls = p.grpc->tls();
  go.max_body_bytes = options_.grpc.max_message_bytes;
  go.max_import_bytes = api::Backend::Options().max_adapter_bytes;  // the backend's bound
  go.body_timeout = absl::Seconds(options_.http.body_timeout_seconds);
  go.idle_timeout = absl::Seconds(options_.http.idle_timeout_seconds);
  go.allowed_hosts = AllowedHttpHosts(options_.http);
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, p.grpc->GatewayChannel(options_.http.grpc_target));
  http::HttpGateway::Hooks hooks;
  std::atomic<bool>* serving = &p.serving;
  hooks.serving = [serving] { return serving->load(); };
  // The caller's key checked from the headers, before a body is read.
  const api::TenantRegistry* tenants = p.tenants.get();
  hooks.authenticate = [tenants](const std::string* authorization) {
    return tenants->Authenticate(authorization).status();
  };
  // A request the gateway refuses before its gRPC call is counted as a call
  // of its route's RPC: never authenticated, so without a tenant.
  MetricsBridge* metrics = p.metrics.get();
  hooks.on_refusal = [metrics](const char* rpc, absl::StatusCode code, absl::Duration elapsed) {
    api::RpcRecord record;
    record.method = rpc;
    record.protocol = "http";  // RpcRecord::protocol's value for the gateway's calls
    record.code = code;
    record.seconds = absl::ToDoubleSeconds(elapsed);
    metrics->OnRpc(record);
  };
  ASSIGN_OR_RETURN(p.http, http::HttpGateway::Start(go, std::move(channel), std::move(hooks)));
  p.metrics->WatchLedger("http_request_bodies", &p.http->buffered_bodies());
  return absl::OkStatus();
}

absl::Status Server::OpenStorage() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  std::error_code ec;
  std::filesystem::create_directories(o.storage.data_dir, ec);
  if (ec)
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create --data_dir ", o.storage.data_dir, ": ", ec.message()));
  storage::Database::Options dbo;
  dbo.path = (std::filesystem::path(o.storage.data_dir) / "db").string();
  dbo.min_free_bytes = o.storage.min_free_disk_bytes;
  ASSIGN_OR_RETURN(p.db, storage::Database::Open(dbo));

  api::TenantRegistry::Options to;
  to.tenants_file = o.tenancy.tenants_file;
  to.defaults = o.tenancy.defaults;
  ASSIGN_OR_RETURN(p.tenants, api::TenantRegistry::Create(to));

  ASSIGN_OR_RETURN(p.metrics, MetricsBridge::Create(o.process.metrics_address));
  if (p.metrics->port() != 0) LOG(INFO) << "/metrics on port " << p.metrics->port();
  p.metrics->WatchDataDir(o.storage.data_dir);
  return absl::OkStatus();
}

absl::Status Server::StartGrpc() {
  Parts& p = *parts_;
  MetricsBridge* metrics = p.metrics.get();
  api::GrpcFrontend::Hooks hooks;
  hooks.tenants = p.tenants.get();
  hooks.on_rpc = [metrics](const api::RpcRecord& r) { metrics->OnRpc(r); };
  hooks.on_certificate = [metrics](int64_t not_before, int64_t not_after) {
    metrics->SetTlsCertificate(not_before, not_after);
  };
  ASSIGN_OR_RETURN(p.grpc, api::GrpcFrontend::Start(options_.grpc, std::move(hooks)));
  return absl::OkStatus();
}

absl::Status Server::StartServingEngine() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  serving::InferenceEngine::Options eo;
  eo.encoder = p.model.encoder.get();
  eo.tokenizer = p.model.tokenizer.get();
  eo.db = p.db.get();
  eo.device_cache_bytes = o.serving.device_cache_bytes;
  eo.host_cache_bytes = o.serving.host_cache_bytes;
  eo.slab_bottleneck = o.serving.slab_bottleneck;
  eo.max_batch_size = o.serving.max_batch_size;
  eo.max_queue_delay_us = o.serving.max_queue_delay_us;
  eo.max_windows_per_text = o.serving.max_windows_per_text;
  eo.max_rows_per_request = o.serving.max_rows_per_predict;
  eo.max_seq_len = o.model.max_seq_len;
  eo.min_training_share = o.serving.training_share;
  eo.observer = p.metrics->serving_observer();
  // Batches failing for lack of memory make the server NOT_SERVING (an
  // orchestrator stops sending it traffic or restarts it) until one succeeds.
  eo.on_health = [&p](bool healthy) { PublishHealth(p, std::nullopt, healthy); };
  ASSIGN_OR_RETURN(p.engine, serving::InferenceEngine::Create(std::move(eo)));
  for (const std::string& pin : o.serving.pinned_tasks) {
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
  limits.max_examples = o.training.max_dataset_examples;
  training::JobManager::Options qo;
  qo.db = p.db.get();
  qo.limits.max_queued_total = o.training.max_queued_jobs_total;
  qo.validator = training::MakeJobValidator(p.db.get(), train_model->tokenizer.get(), limits, defaults);
  // Serving drops a task's cached adapters whenever storage's change.
  qo.on_task_changed = [engine](const std::string& tenant, const std::string& task_id) {
    engine->cache().Invalidate(tenant, task_id);
  };
  ASSIGN_OR_RETURN(p.jobs, training::JobManager::Create(std::move(qo)));
  p.metrics->WatchJobs(p.db.get(), p.tenants->TenantIds());

  training::JobRunner::Options ro;
  ro.jobs = p.jobs.get();
  ro.db = p.db.get();
  ro.encoder = train_model->encoder.get();
  ro.tokenizer = train_model->tokenizer.get();
  ro.defaults = defaults;
  ro.keep_versions = o.storage.keep_versions;
  ro.run_on_device = [engine](const std::function<absl::Status()>& fn) { return engine->executor().RunTraining(fn); };
  ro.on_step = [metrics](int64_t examples) { metrics->OnTrainingStep(examples); };
  ASSIGN_OR_RETURN(p.runner, training::JobRunner::Create(std::move(ro)));
  return absl::OkStatus();
}

absl::Status Server::CreateBackend() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  api::Backend::Options bo;
  bo.db = p.db.get();
  bo.jobs = p.jobs.get();
  bo.engine = p.engine.get();
  bo.encoder = p.model.encoder.get();
  bo.max_client_streams = o.tenancy.max_client_streams;
  bo.max_client_streams_per_tenant = o.tenancy.max_client_streams_per_tenant;
  bo.max_import_bytes_in_flight = o.tenancy.max_import_bytes_in_flight;
  ASSIGN_OR_RETURN(p.backend, api::Backend::Create(std::move(bo)));
  for (const auto& [budget, ledger] : p.backend->ledgers()) p.metrics->WatchLedger(budget, ledger);
  return absl::OkStatus();
}

void Server::StartBackgroundWork() {
  Parts& p = *parts_;
  const ServerOptions& o = options_;
  MetricsBridge* metrics = p.metrics.get();
  if (!o.backups.dir.empty()) {
    BackupScheduler::Options bso;
    bso.db = p.db.get();
    bso.backup_dir = o.backups.dir;
    bso.interval = absl::Seconds(o.backups.interval_seconds);
    bso.keep = o.backups.keep;
    bso.on_backup = [metrics](const absl::StatusOr<storage::BackupInfo>& info, absl::Duration took) {
      metrics->OnBackup(info.ok(), absl::ToDoubleSeconds(took), absl::ToUnixMicros(absl::Now()) / 1e6);
    };
    p.backups = std::make_unique<BackupScheduler>(std::move(bso));
  }

  if (o.process.heap_release_interval_seconds > 0) {
    // Freed memory that each malloc arena keeps would otherwise add up
    // (ReleaseFreeHeap, common/malloc_tuning.h, says how much).
    p.heap_releaser =
        std::make_unique<PeriodicThread>(absl::Seconds(o.process.heap_release_interval_seconds), [metrics] {
          const absl::Time start = absl::Now();
          const int64_t bytes = ReleaseFreeHeap();
          metrics->OnHeapRelease(bytes, absl::Now() - start);
        });
    LOG(INFO) << "freed heap memory goes back to the kernel every " << o.process.heap_release_interval_seconds << " s";
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
  const ShutdownPlan plan = PlanShutdown(absl::Now(), options_.process.drain_seconds);
  PublishHealth(p, /*up=*/false, std::nullopt);
  api::GrpcService* service = p.grpc ? &p.grpc->service() : nullptr;
  if (service) service->StartDraining(plan.streams_deadline);
  // Preempt the running job at its next step while calls drain; it is
  // checkpointed and left RUNNING, so the next start resumes it.
  if (p.runner) p.runner->RequestStop();
  if (service && !service->WaitForIdle(plan.calls_deadline)) {
    LOG(WARNING) << "calls still in flight after the drain; cancelling them";
  }
  // Refusals from here on are answered after gRPC has stopped (ShutdownPlan).
  const absl::Time answer_at = absl::Now() + 2 * plan.hold;
  if (service) service->HoldRefusalsUntil(answer_at);
  absl::SleepFor(plan.hold);
  // Refuse more Predicts; one still in flight (only if the drain ran out)
  // finishes first, or the watchdog in main.cc ends the wait.
  if (p.engine) p.engine->Drain();
  // gRPC stops taking calls at once, and lets the held refusals finish; a
  // call admitted before the drain that is still running (the drain ran
  // out) is cancelled once they are answered, within the last step.
  if (p.grpc) p.grpc->Shutdown(std::max(plan.calls_deadline, answer_at + plan.hold));
  // HTTP after gRPC: its calls were gRPC calls, drained and refused alike;
  // its event streams end now, and its connections close.
  if (p.http) p.http->Stop();
  if (p.runner) p.runner->Stop();
  if (p.engine) p.engine->Shutdown();
  if (p.metrics) p.metrics->Stop();
  if (p.grpc) p.grpc->Wait();
  p.backups.reset();  // waits for a backup in progress
  p.heap_releaser.reset();
  p.backend.reset();
  p.runner.reset();
  p.jobs.reset();
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
