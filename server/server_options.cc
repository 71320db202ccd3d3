#include "server/server_options.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <functional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace adapterd {

absl::Status ServerOptions::Validate() const {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError(m); };
  if (model.model_dir.empty()) return bad("--model_dir is required");
  if (grpc.listen_address.empty()) return bad("--listen must not be empty");
  if (storage.data_dir.empty()) return bad("--data_dir must not be empty");
  if (model.device != "cpu" && model.device != "cuda" && !absl::StartsWith(model.device, "cuda:")) {
    return bad(absl::StrCat("--device must be cpu, cuda or cuda:N, not '", model.device, "'"));
  }
  if (model.dtype != "auto" && model.dtype != "fp32" && model.dtype != "bf16" && model.dtype != "fp16") {
    return bad(absl::StrCat("--dtype must be auto, fp32, bf16 or fp16, not '", model.dtype, "'"));
  }
  if (model.residual_stream != "auto" && model.residual_stream != "fp32" && model.residual_stream != "serving") {
    return bad(absl::StrCat("--residual_stream must be auto, fp32 or serving, not '", model.residual_stream, "'"));
  }
  if (model.max_seq_len < 8 || model.max_seq_len > 4096) return bad("--max_seq_len must be in [8, 4096]");
  if (serving.max_batch_size < 1 || serving.max_batch_size > 4096) return bad("--max_batch_size must be in [1, 4096]");
  if (serving.max_queue_delay_us < 0) return bad("--max_queue_delay_us must be >= 0");
  if (serving.max_windows_per_text < 1) return bad("--max_windows_per_text must be at least 1");
  if (serving.max_rows_per_predict < 1) return bad("--max_rows_per_predict must be at least 1");
  if (serving.training_share < 0 || serving.training_share > 1) return bad("--training_share must be in [0, 1]");
  if (training.micro_batch < 1) return bad("--training_micro_batch must be >= 1");
  if (training.dtype != "fp32" && training.dtype != "serving") {
    return bad(absl::StrCat("--training_dtype must be fp32 or serving, not '", training.dtype, "'"));
  }
  if (training.dtype == "serving" && model.dtype == "fp16") {
    return bad(
        "--training_dtype serving needs an fp32 or bf16 serving dtype: fp16 training needs loss scaling, which "
        "adapterd does not do");
  }
  for (const std::string& p : serving.pinned_tasks) {
    const size_t slash = p.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == p.size() ||
        p.find('/', slash + 1) != std::string::npos) {
      return bad(absl::StrCat("--pin takes tenant/task_id, not '", p, "'"));
    }
  }
  if (storage.keep_versions < 1) return bad("--keep_versions must be >= 1");
  if (storage.min_free_disk_bytes < 0) return bad("--min_free_disk_bytes must be >= 0");
  if (grpc.max_message_bytes < (1 << 16)) return bad("--max_message_bytes must be at least 65536");
  if (serving.device_cache_bytes < 0 || serving.host_cache_bytes < 0) return bad("cache budgets must be >= 0");
  if (serving.slab_bottleneck < -1 || serving.slab_bottleneck > 4096) {
    return bad("--adapter_slab_bottleneck must be in [0, 4096], or -1 (the device's default)");
  }
  if (tenancy.defaults.max_tasks < 1 || tenancy.defaults.max_queued_jobs < 1 ||
      tenancy.defaults.max_texts_per_predict < 1 || tenancy.defaults.max_dataset_bytes < 1) {
    return bad("tenant limits must be >= 1");
  }
  if (tenancy.defaults.predict_rate_per_second < 0 || tenancy.defaults.predict_burst < 0)
    return bad("--predict_rate and --predict_burst must be >= 0");
  if (tenancy.max_client_streams < 1 || tenancy.max_client_streams_per_tenant < 1 ||
      tenancy.max_import_bytes_in_flight < 1) {
    return bad("--max_client_streams, --max_client_streams_per_tenant and --max_import_bytes_in_flight must be >= 1");
  }
  if (!grpc.peers.empty() && grpc.peer_secret_file.empty()) {
    return bad("--peers needs --peer_secret_file: the replicas mark their own fan-out calls with that shared secret");
  }
  if (model.threads < 0) return bad("--threads must be >= 0");
  for (const std::string& peer : grpc.peers) {
    const size_t colon = peer.rfind(':');
    if (peer.empty() || colon == std::string::npos || colon == 0 || colon + 1 == peer.size()) {
      return bad(absl::StrCat("--peers takes host:port entries, not '", peer, "'"));
    }
  }
  if (!http.gateway.listen_address.empty() && !grpc.peers.empty() && http.grpc_target.empty()) {
    return bad(
        "--http_listen on a --peers replica needs --http_grpc_target (the router's gRPC address): this replica "
        "does not own every task, and the router sends each call to the replica that does");
  }
  if (http.gateway.max_connections < 1) return bad("--http_max_connections must be at least 1");
  if (http.gateway.max_connections_per_ip < 0) return bad("--http_max_connections_per_ip must be >= 0");
  if (http.gateway.max_buffered_bytes < 1) return bad("--http_max_buffered_bytes must be at least 1");
  if (http.body_timeout_seconds < 1) return bad("--http_body_timeout_seconds must be at least 1");
  if (http.idle_timeout_seconds < 1) return bad("--http_idle_timeout_seconds must be at least 1");
  if (grpc.tls_cert_file.empty() != grpc.tls_key_file.empty()) {
    return bad("--tls_cert_file and --tls_key_file go together: give both or neither");
  }
  if (grpc.tls_cert_file.empty() && (!grpc.tls_client_ca_file.empty() || !grpc.tls_peer_ca_file.empty())) {
    return bad("--tls_client_ca_file and --tls_peer_ca_file need --tls_cert_file and --tls_key_file");
  }
  if (backups.interval_seconds < 1) return bad("--backup_interval_seconds must be >= 1");
  if (!ParseLogFormat(process.log_format).ok())
    return bad(absl::StrCat("--log_format must be text or json, not '", process.log_format, "'"));
  if (process.heap_release_interval_seconds < 0) return bad("--heap_release_interval_seconds must be >= 0");
  if (backups.keep < 1) return bad("--backups_to_keep must be >= 1");
  if (!backups.dir.empty() &&
      (PathIsWithin(backups.dir, storage.data_dir) || PathIsWithin(storage.data_dir, backups.dir))) {
    // A backup on the data directory's volume is lost with it, and RocksDB's
    // files under <storage.data_dir>/db belong to the live database.
    return bad(absl::StrCat("--backup_dir '", backups.dir, "' must be outside --data_dir '", storage.data_dir,
                            "' (and not contain it): put backups on another volume"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServingDtype> ResolveServingDtype(const std::string& requested, const std::string& device,
                                                 const std::string& cpu_bf16_feature,
                                                 const DtypeCalibration& calibrate) {
  if (requested != "auto") return ServingDtype{requested, "--dtype " + requested, std::nullopt};
  if (device.starts_with("cuda")) return ServingDtype{"bf16", "--dtype auto: a CUDA device", std::nullopt};
  if (cpu_bf16_feature.empty()) {
    return ServingDtype{
        "fp32", "--dtype auto: the CPU has no native bf16 (neither amx_bf16 nor avx512_bf16), where bf16 is slower",
        std::nullopt};
  }
  if (!calibrate) {
    return ServingDtype{"bf16",
                        absl::StrCat("--dtype auto, --dtype_calibration=false: the CPU has native bf16 dot products (",
                                     cpu_bf16_feature, "), not measured"),
                        std::nullopt};
  }
  ASSIGN_OR_RETURN(const model::DtypeTimings t, calibrate());
  const std::string dtype = model::ChooseFasterDtype(t);
  std::string reason = absl::StrFormat(
      "--dtype auto: bf16 measured %.2fx fp32 on this CPU (%s): %.3f ms per row in bf16, %.3f in fp32 (%d x %d "
      "tokens through %d layer(s) on %d thread(s), median of %d; calibration took %.2f s)",
      t.Bf16Speedup(), cpu_bf16_feature, 1e3 * t.bf16_seconds_per_row, 1e3 * t.fp32_seconds_per_row, t.rows, t.tokens,
      t.layers, t.threads, t.reps, t.total_seconds);
  if (dtype == "fp32") absl::StrAppendFormat(&reason, "; bf16 serves only from %.2fx", model::kMinBf16Speedup);
  return ServingDtype{dtype, std::move(reason), t};
}

ResidualStream ResolveResidualStream(const std::string& requested, const std::string& device,
                                     const std::string& serving_dtype) {
  if (serving_dtype == "fp32") return {false, "fp32 serving"};
  if (requested == "serving") return {true, "--residual_stream serving"};
  if (requested == "fp32") return {false, "--residual_stream fp32"};
  if (device.starts_with("cuda")) {
    return {true, "--residual_stream auto: a CUDA device, where it is faster and keeps fp32's labels"};
  }
  return {false, "--residual_stream auto: a CPU, where summing residuals in " + serving_dtype + " flips labels"};
}

std::string EnvName(const std::string& flag) {
  std::string name = "ADAPTERD_";
  for (char c : flag) name.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return name;
}

namespace {

// Adds the flags `add` defines to `app` under the help heading `heading`.
void FlagGroup(CLI::App& app, const std::string& heading, const std::function<void()>& add) {
  const size_t before = app.get_options().size();
  add();
  std::vector<CLI::Option*> options = app.get_options();
  for (size_t i = before; i < options.size(); ++i) options[i]->group(heading);
}

void AddHttpFlags(CLI::App& app, ServerOptions::Http& h) {
  FlagGroup(app, "HTTP: REST/JSON API and console", [&] {
    app.add_option("--http_listen", h.gateway.listen_address,
                   "REST/JSON API and web console address host:port (port 0 picks a free port); empty = off. "
                   "TLS and body limits are the gRPC port's");
    app.add_option("--http_grpc_target", h.grpc_target,
                   "gRPC address the HTTP gateway calls; empty = this process. With --peers: the router's address");
    app.add_option("--http_max_connections", h.gateway.max_connections,
                   "HTTP connections served at once (a thread each); at the limit a new one evicts the connection "
                   "idle longest that is not being answered");
    app.add_option("--http_max_connections_per_ip", h.gateway.max_connections_per_ip,
                   "HTTP connections from one IP address; 0 = no limit (keep 0 behind a proxy)");
    app.add_option("--http_max_buffered_bytes", h.gateway.max_buffered_bytes,
                   "Bytes of request bodies (JSON, SQuAD documents) all HTTP connections hold in memory together; "
                   "past it requests get 503");
    app.add_option("--http_allowed_hosts", h.allowed_hosts,
                   "Host names API requests may send as Host (comma-separated; * = any). Default: from --http_listen "
                   "(127.0.0.1 or localhost: the loopback names; 0.0.0.0: any; another address: it and the loopback "
                   "names)")
        ->delimiter(',');
    app.add_option("--http_body_timeout_seconds", h.body_timeout_seconds,
                   "Seconds a request's body may take to arrive after its headers; later, the connection is closed");
    app.add_option("--http_idle_timeout_seconds", h.idle_timeout_seconds,
                   "Seconds an HTTP connection may stay silent before it is closed");
    app.add_option("--http_console_dir", h.gateway.console_dir,
                   "Serve the console's files from this directory instead of the built-in copy (development)");
  });
}

void AddGrpcFlags(CLI::App& app, api::GrpcFrontendOptions& g) {
  FlagGroup(app, "gRPC, TLS and replicas", [&] {
    app.add_option("--listen", g.listen_address, "gRPC listen address host:port (port 0 picks a free port)");
    app.add_option("--max_message_bytes", g.max_message_bytes, "Largest gRPC message accepted or sent");
    app.add_option("--tls_cert_file", g.tls_cert_file,
                   "PEM certificate chain (leaf first) for gRPC over TLS; with --tls_key_file. Empty = plaintext");
    app.add_option("--tls_key_file", g.tls_key_file, "PEM private key of --tls_cert_file");
    app.add_option("--tls_client_ca_file", g.tls_client_ca_file,
                   "PEM CA certificate(s): callers must present a certificate signed by one (mutual TLS)");
    app.add_option("--tls_peer_ca_file", g.tls_peer_ca_file,
                   "PEM CA certificate(s) that sign the --peers replicas' certificates (default: system roots)");
    app.add_option("--peers", g.peers,
                   "Every replica's gRPC host:port, this one's included (comma-separated): list calls then answer "
                   "for all replicas, and calls about a task must carry it in x-task-id (docs/DEPLOYMENT.md)")
        ->delimiter(',');
    app.add_option("--peer_secret_file", g.peer_secret_file,
                   "File with the secret all --peers replicas share (>= 16 bytes): marks their fan-out calls");
  });
}

void AddStorageAndModelFlags(CLI::App& app, ServerOptions::Storage& s, ServerOptions::Model& m) {
  FlagGroup(app, "Storage", [&] {
    app.add_option("--data_dir", s.data_dir, "Directory for durable state (RocksDB in <data_dir>/db)");
    app.add_option("--keep_versions", s.keep_versions, "Adapter versions kept per task (the newest N)");
    app.add_option("--min_free_disk_bytes", s.min_free_disk_bytes,
                   "Writes fail RESOURCE_EXHAUSTED (disk full) while --data_dir's file system has less free; "
                   "0 = no reserve");
  });
  FlagGroup(app, "Model", [&] {
    app.add_option("--model_dir", m.model_dir,
                   "HuggingFace BERT directory: config.json, model.safetensors, vocab.txt [, tokenizer_config.json]")
        ->required();
    app.add_option("--device", m.device, "cpu, cuda or cuda:N");
    app.add_option("--dtype", m.dtype,
                   "Serving dtype: auto (bf16 on CUDA; on CPUs with AMX or AVX512-BF16 the faster of fp32 and bf16, "
                   "measured at start-up; fp32 elsewhere), fp32, bf16 or fp16; training always runs in fp32");
    app.add_option("--dtype_calibration", m.dtype_calibration,
                   "With --dtype auto on a CPU with AMX or AVX512-BF16: time fp32 against bf16 at start-up and serve "
                   "the faster (true), or serve bf16 unmeasured (false)");
    app.add_option("--residual_stream", m.residual_stream,
                   "Where a bf16/fp16 encoder sums its residuals: auto (the serving dtype on CUDA, fp32 on CPUs), "
                   "fp32, or serving");
    app.add_option("--max_seq_len", m.max_seq_len, "Tokens per input; longer inputs are truncated");
    app.add_option("--threads", m.threads,
                   "Intra-op CPU threads for LibTorch; 0 = the CPUs this process may use (affinity and cgroup quota)");
  });
}

void AddServingAndTrainingFlags(CLI::App& app, ServerOptions::Serving& s, ServerOptions::Training& t) {
  FlagGroup(app, "Serving", [&] {
    app.add_option("--device_cache_bytes", s.device_cache_bytes, "Byte budget of the device adapter tier");
    app.add_option("--host_cache_bytes", s.host_cache_bytes, "Byte budget of the host adapter tier");
    app.add_option("--adapter_slab_bottleneck", s.slab_bottleneck,
                   "Widest adapter bottleneck the device tier's resident slab holds (0 = no slab; -1 = 64 on "
                   "CUDA, no slab on a CPU)");
    app.add_option("--pin", s.pinned_tasks,
                   "tenant/task_id whose device-tier adapter is never evicted (repeat or comma-separate)")
        ->delimiter(',');
    app.add_option("--max_batch_size", s.max_batch_size, "Most rows in one forward pass (across tasks)");
    app.add_option("--max_queue_delay_us", s.max_queue_delay_us, "Longest a row waits for its batch to fill");
    app.add_option("--max_windows_per_text", s.max_windows_per_text,
                   "Most windows (rows) one Predict text of a token tagging or extractive QA task may need; a "
                   "longer text is refused (INVALID_ARGUMENT)");
    app.add_option("--max_rows_per_predict", s.max_rows_per_predict,
                   "Most rows one Predict may plan, all its texts and windows together (INVALID_ARGUMENT past it)");
    app.add_option("--training_share", s.training_share,
                   "Minimum fraction of device time training gets while jobs are pending (0..1)");
  });
  FlagGroup(app, "Training", [&] {
    app.add_option("--training_micro_batch", t.micro_batch,
                   "Rows per training micro-batch: Predict batches run between micro-batches");
    app.add_option("--training_dtype", t.dtype,
                   "fp32: train on an fp32 encoder (a copy when serving is bf16 or fp16); serving: train on the "
                   "serving encoder in its dtype (mixed precision, no copy)");
    app.add_option("--max_queued_jobs_total", t.max_queued_jobs_total, "Jobs waiting across all tenants");
    app.add_option("--max_dataset_examples", t.max_dataset_examples, "Most examples a training job may use");
  });
}

void AddTenancyFlags(CLI::App& app, ServerOptions::Tenancy& t) {
  FlagGroup(app, "Tenants and their quotas", [&] {
    app.add_option("--tenants_file", t.tenants_file,
                   "JSON tenants file (API key SHA-256 hashes and quotas); empty = single tenant, no key");
    app.add_option("--max_tasks", t.defaults.max_tasks, "Tasks per tenant (default quota)");
    app.add_option("--max_queued_jobs", t.defaults.max_queued_jobs, "Jobs waiting per tenant (default quota)");
    app.add_option("--max_texts_per_predict", t.defaults.max_texts_per_predict, "Texts in one Predict (default quota)");
    app.add_option("--max_dataset_bytes", t.defaults.max_dataset_bytes,
                   "Bytes of text in all of a tenant's datasets, stored and being uploaded (default quota)");
    app.add_option("--predict_rate", t.defaults.predict_rate_per_second,
                   "Predict requests/s per tenant; 0 = unlimited (default quota)");
    app.add_option("--predict_burst", t.defaults.predict_burst,
                   "Token-bucket size for --predict_rate; 0 = max(1, rate)");
    app.add_option("--max_client_streams", t.max_client_streams,
                   "UploadDataset and ImportAdapter streams open at once, all tenants together");
    app.add_option("--max_client_streams_per_tenant", t.max_client_streams_per_tenant,
                   "UploadDataset and ImportAdapter streams one tenant may have open at once");
    app.add_option("--max_import_bytes_in_flight", t.max_import_bytes_in_flight,
                   "Adapter file bytes all ImportAdapter calls in progress may hold in memory at once");
  });
}

void AddBackupAndProcessFlags(CLI::App& app, ServerOptions::Backups& b, ServerOptions::Process& p) {
  FlagGroup(app, "Backups", [&] {
    app.add_option(
        "--backup_dir", b.dir,
        "Directory for online RocksDB backups (BackupEngine); empty = none. Restore with `adapterd restore`");
    app.add_option("--backup_interval_seconds", b.interval_seconds,
                   "Seconds between scheduled backups (with --backup_dir); SIGUSR1 takes one at once");
    app.add_option("--backups_to_keep", b.keep, "Backups kept in --backup_dir; older ones are purged");
  });
  FlagGroup(app, "Process", [&] {
    app.add_option("--metrics_listen", p.metrics_address, "Prometheus /metrics address host:port; empty disables it");
    app.add_option("--heap_release_interval_seconds", p.heap_release_interval_seconds,
                   "Seconds between returns of the C heap's freed memory to the kernel (malloc_trim); 0 = never");
    app.add_option("--drain_seconds", p.drain_seconds,
                   "Bound on the whole shutdown after SIGTERM/SIGINT: calls in flight may finish within it")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--log_format", p.log_format,
                   "text (glog's lines on stderr) or json (one JSON object per line, for log collectors)");
  });
}

}  // namespace

absl::StatusOr<ServerOptions> ParseServerFlags(int argc, char** argv, int* exit_code) {
  ServerOptions o;
  CLI::App app{
      "adapterd: one frozen BERT encoder serving many text-classification tasks as Houlsby adapters.\n"
      "Serves the adapterd.v1.Adapterd gRPC API, trains submitted jobs, and exposes Prometheus metrics."};
  app.set_config("--config", "", "Read options from an INI/TOML file (key = value, flag names without dashes)");
  app.option_defaults()->always_capture_default();
  AddGrpcFlags(app, o.grpc);
  AddHttpFlags(app, o.http);
  AddStorageAndModelFlags(app, o.storage, o.model);
  AddServingAndTrainingFlags(app, o.serving, o.training);
  AddTenancyFlags(app, o.tenancy);
  AddBackupAndProcessFlags(app, o.backups, o.process);
  app.set_version_flag("--version", "adapterd 0.1.0");
  // Every option also reads ADAPTERD_<NAME> from the environment.
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help" || opt->get_lnames()[0] == "version") continue;
    opt->envname(EnvName(opt->get_lnames()[0]));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return absl::CancelledError("exit");
  }
  *exit_code = 0;
  // An empty list variable (ADAPTERD_PEERS="") means none.
  std::erase(o.grpc.peers, std::string());
  if (absl::Status s = o.Validate(); !s.ok()) {
    *exit_code = 2;
    return s;
  }
  return o;
}

}  // namespace adapterd
