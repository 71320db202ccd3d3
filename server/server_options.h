// ServerOptions: everything the adapterd process is configured with, and its
// command line (CLI11). `adapterd --help` documents every flag; the same
// options can come from a config file (`--config FILE`, INI/TOML `key = value`
// lines using the flag names without dashes) and from the environment: flag
// `--name` is also read from `ADAPTERD_NAME` (upper case; list flags take
// commas), which is how containers configure it. Precedence: command line,
// then the config file, then the environment, then the default.
#ifndef ADAPTERD_SERVER_SERVER_OPTIONS_H_
#define ADAPTERD_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/grpc_frontend.h"
#include "server/api/tenants.h"
#include "server/http/http_gateway.h"
#include "server/model/dtype_calibration.h"

namespace adapterd {

// The flags, grouped by the part of the process they configure; a group is
// handed to its part whole (Server::StartAll copies no field one by one
// where a part takes a group).
struct ServerOptions {
  // --- gRPC: --listen, --max_message_bytes, TLS, scale-out (docs/DEPLOYMENT.md) ---
  api::GrpcFrontendOptions grpc;
  // --- HTTP: the REST/JSON gateway and the console (docs/API.md, "REST/JSON") ---
  struct Http {
    // listen_address "" = off. Its TLS files and body limit are the gRPC
    // port's (--tls_*, --max_message_bytes): Server::StartHttp copies them.
    http::HttpGatewayOptions gateway;
    // The gRPC address the gateway calls: "" = this process (in-process
    // channel). On a task-sharded replica (--peers), the router's address,
    // so that an HTTP call reaches its task's replica.
    std::string grpc_target;
    // The gateway's durations, in whole seconds (flags); StartHttp sets them.
    int body_timeout_seconds = 60;
    int idle_timeout_seconds = 120;
    // --http_allowed_hosts: empty = derived from --http_listen (a loopback
    // address: the loopback names; 0.0.0.0: any; another: it and the
    // loopback names); "*" = any. StartHttp sets gateway.allowed_hosts.
    std::vector<std::string> allowed_hosts;
  } http;

  struct Storage {
    std::string data_dir = "./data";  // RocksDB lives in <data_dir>/db
    int keep_versions = 2;            // adapter versions kept per task
    // Writes fail RESOURCE_EXHAUSTED ("disk full") while the data directory's
    // file system has less free (storage/database.h, min_free_bytes).
    int64_t min_free_disk_bytes = 256ll << 20;
  } storage;

  struct Model {
    std::string model_dir;       // HuggingFace BERT directory (required)
    std::string device = "cpu";  // cpu | cuda | cuda:N
    std::string dtype = "auto";  // auto | fp32 | bf16 | fp16 (serving; training: Training::dtype)
    // auto on a CPU with native bf16: measure fp32 against bf16 at start-up
    // (ResolveServingDtype); false = bf16 there without measuring.
    bool dtype_calibration = true;
    std::string residual_stream = "auto";  // auto | fp32 | serving (a bf16/fp16 encoder's residual stream)
    int max_seq_len = 128;                 // tokens per input, truncation beyond
    // Intra-op threads; 0 = the CPUs this process may use (affinity and
    // cgroup quota, common/cpu_quota.h).
    int threads = 0;
  } model;

  struct Serving {
    int64_t device_cache_bytes = 1ll << 30;  // device-tier adapter budget
    int64_t host_cache_bytes = 4ll << 30;    // host-tier adapter budget
    int64_t slab_bottleneck =
        -1;                   // widest bottleneck the resident slab holds; 0 = no slab, -1 = 64 on CUDA, none on CPU
    int max_batch_size = 32;  // rows per forward pass
    int64_t max_queue_delay_us = 2000;  // longest wait to fill a batch
    int max_windows_per_text = 64;      // token tagging and QA windows of one Predict text
    int max_rows_per_predict = 2048;    // rows one Predict plans, all texts together
    double training_share = 0.2;        // minimum device share of training while jobs wait
    // Tasks whose device-tier adapters are never evicted, as
    // "tenant/task_id" ("default/<task>" on a single-tenant server). Pinned
    // bytes count against --device_cache_bytes.
    std::vector<std::string> pinned_tasks;
  } serving;

  struct Training {
    int micro_batch = 8;  // rows per training micro-batch (latency bound for Predict)
    // fp32: an fp32 encoder trains (the serving one, or an fp32 copy when
    // serving is bf16 or fp16). serving: the serving encoder trains in its
    // dtype, mixed precision when that is bf16 or fp16 (fp32 adapters,
    // LayerNorms, head and optimiser state; server/training/trainer.h), and
    // no copy is loaded.
    std::string dtype = "fp32";
    int max_queued_jobs_total = 1024;
    int64_t max_dataset_examples = 1000000;
  } training;

  struct Tenancy {
    std::string tenants_file;  // "" = single tenant, no API key
    // The single tenant's quotas, and the defaults of the tenants file.
    api::TenantQuotas defaults;
    // Client streams (UploadDataset, ImportAdapter) open at once, in total
    // and per tenant, and the adapter bytes imports may hold in memory at
    // once.
    int64_t max_client_streams = 64;
    int64_t max_client_streams_per_tenant = 8;
    int64_t max_import_bytes_in_flight = 1ll << 30;
  } tenancy;

  struct Backups {                    // storage/backup.h
    std::string dir;                  // "" = no scheduled backups
    int64_t interval_seconds = 3600;  // between scheduled backups (SIGUSR1: one now)
    int keep = 7;                     // older backups are purged
  } backups;

  struct Process {
    std::string metrics_address = "127.0.0.1:9500";  // Prometheus /metrics; "" = off
    // Seconds between returns of the C heap's freed pages to the kernel
    // (ReleaseFreeHeap, common/malloc_tuning.h); 0 = never.
    int64_t heap_release_interval_seconds = 30;
    int drain_seconds = 10;           // bound on the whole shutdown (server.h)
    std::string log_format = "text";  // "text" (glog's lines) or "json" (common/logging.h)
  } process;

  absl::Status Validate() const;
};

// The serving dtype `--dtype requested` means on `device`, and why (for the
// start-up log). Any value but "auto" is used as given. "auto" is:
//   - bf16 on CUDA, without measuring (docs/PERFORMANCE.md, "GPU");
//   - fp32 on CPUs without native bf16 dot products (`cpu_bf16_feature` "",
//     common/cpu_features.h), where bf16 is emulated and far slower, without
//     measuring;
//   - on CPUs with them ("amx_bf16" or "avx512_bf16"), the dtype `calibrate`
//     measures faster (model::ChooseFasterDtype: bf16 only when at least
//     model::kMinBf16Speedup times fp32's speed), since the flag alone does
//     not say: bf16 ran 2.1x fp32 on one such CPU and 0.61x on another
//     (server/model/dtype_calibration.h). An empty `calibrate`
//     (--dtype_calibration=false) keeps the rule before measurement: bf16.
// bf16 nearly always keeps fp32's label (docs/PERFORMANCE.md has the
// agreement on the real datasets; the bf16 encoder keeps its residual stream
// in fp32, server/model/bert_encoder.h).
//
// Errors: whatever `calibrate` returns (it is called at most once, and only
// in the last case). Thread safety: calls `calibrate` on the calling thread.
struct ServingDtype {
  std::string dtype;  // fp32 | bf16 | fp16
  std::string reason;
  // What `calibrate` measured, when it ran (the start-up log and
  // adapterd_dtype_calibration_seconds).
  std::optional<model::DtypeTimings> calibration;
};
using DtypeCalibration = std::function<absl::StatusOr<model::DtypeTimings>()>;
absl::StatusOr<ServingDtype> ResolveServingDtype(const std::string& requested, const std::string& device,
                                                 const std::string& cpu_bf16_feature,
                                                 const DtypeCalibration& calibrate);

// Where a bf16/fp16 serving encoder keeps its residual stream, LayerNorms
// and head (BertEncoder::Options::reduced_residual_stream), and why (for the
// start-up log). "auto" is the serving dtype on CUDA: on the H100 that ran
// the encoder 16-19% faster and kept fp32's label on 99.9% and 99.8% of the
// two real datasets' test texts; fp32 on CPUs, where a bf16 stream kept only
// 99.3% and 99.4% (docs/PERFORMANCE.md, "GPU" and "bf16 serving"). "fp32"
// and "serving" are used as given; an fp32 encoder has one stream.
struct ResidualStream {
  bool reduced = false;  // true: in the serving dtype
  std::string reason;
};
ResidualStream ResolveResidualStream(const std::string& requested, const std::string& device,
                                     const std::string& serving_dtype);

// The environment variable of flag `name` (without dashes): "metrics_listen"
// -> "ADAPTERD_METRICS_LISTEN".
std::string EnvName(const std::string& name);

// Parses argv, the --config file and the environment into options. An error
// means the process should exit at once with `*exit_code`: CANCELLED when
// CLI11 has already printed what to say (--help and --version with 0, a
// malformed flag with its nonzero code), or the reason a parsed value is
// invalid (exit code 2) for the caller to print.
absl::StatusOr<ServerOptions> ParseServerFlags(int argc, char** argv, int* exit_code);

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_SERVER_OPTIONS_H_
