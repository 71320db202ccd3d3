// MetricsBridge: connects the server's modules to its Prometheus metrics.
//
// It owns the metrics Registry, the ServerMetrics families and the /metrics
// HTTP endpoint, and turns each module's hooks into metric updates:
//   - api::RpcRecord (one per finished RPC)   -> requests, latency, texts;
//   - serving::ServingObserver                -> batches, cache, executor;
//   - training (steps, examples) and, at scrape time, the jobs table and the
//     queue depth, read from the job store/queue (so the gauges are always
//     exactly what is stored, whichever code path changed a job);
//   - model and build info, whether the server is serving, backups;
//   - at scrape time: the process (memory, CPU, file descriptors), its
//     memory by owner (glibc's heap in use and free; RocksDB's memtables,
//     table readers and block caches) and the free space of the file system
//     holding --data_dir.
// Nothing here is labelled by task, job or request id (docs/METRICS.md).
//
// Thread safety: every method is thread-safe and cheap, except that the
// scrape-time callback scans the jobs table (O(jobs), small records).
// Ownership: WatchJobs' database is borrowed; it must stay alive until Stop()
// (the server stops metrics before closing it).
#ifndef ADAPTERD_SERVER_METRICS_BRIDGE_H_
#define ADAPTERD_SERVER_METRICS_BRIDGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/usage_ledger.h"
#include "server/api/rpc_record.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/serving_observer.h"

namespace adapterd {
namespace storage {
class Database;
}

// What /metrics reports about the loaded encoder.
// No path: /metrics is readable by anyone who can reach the port, and the
// model directory says nothing an operator needs that the fingerprint does
// not.
struct ModelInfo {
  std::string fingerprint;
  std::string device;  // "cpu", "cuda:0"
  std::string dtype;   // "fp32", "bf16", "fp16"
  int64_t layers = 0;
  int64_t hidden = 0;
  // Bytes of encoder weights resident on `device` (all copies: the serving
  // encoder and, when its dtype is not float32, the float32 training copy).
  int64_t encoder_bytes = 0;
  // Seconds per row the start-up dtype calibration measured, by dtype
  // ("fp32", "bf16"; server/model/dtype_calibration.h); empty when it did
  // not run (an explicit --dtype, CUDA, a CPU without native bf16,
  // --dtype_calibration=false).
  std::map<std::string, double> dtype_calibration_seconds;
};

class MetricsBridge {
 public:
  // Starts /metrics on `address` ("host:port", port 0 = any free port).
  // An empty address registers the metrics but serves no endpoint (port 0).
  static absl::StatusOr<std::unique_ptr<MetricsBridge>> Create(const std::string& address);
  ~MetricsBridge();

  int port() const;
  metrics::Registry& registry() { return registry_; }
  const metrics::ServerMetrics& server_metrics() const { return *metrics_; }

  // One finished RPC.
  void OnRpc(const api::RpcRecord& record);
  // Model info, encoder memory and the dtype calibration; call once the
  // encoder is loaded.
  void SetModelInfo(const ModelInfo& info);
  // The cache tiers' budgets (adapterd_adapter_cache_budget_bytes).
  void SetCacheBudgets(int64_t host_bytes, int64_t device_bytes);
  // Serving hooks; valid for the bridge's lifetime.
  serving::ServingObserver* serving_observer();
  // From now on each scrape refreshes adapterd_training_jobs{state} and
  // adapterd_training_queue_depth{tenant} from the jobs stored in `db`
  // (QUEUED jobs are the queue): every tenant in `tenants` (and any other
  // with queued jobs) has a series, 0 when idle.
  void WatchJobs(storage::Database* db, std::vector<std::string> tenants);
  // From now on each scrape reports the free and total bytes of the file
  // system holding `path`.
  void WatchDataDir(std::string path);
  // From now on each scrape reports `ledger` as adapterd_admission_used,
  // _limit and _refusals_total{budget}. The ledger must outlive Stop().
  void WatchLedger(std::string budget, const UsageLedger* ledger);
  // adapterd_serving: true once the server answers calls, false when it
  // starts draining.
  void SetServing(bool serving);
  // The gRPC server's TLS certificate is valid from `not_before` to
  // `not_after` (Unix seconds).
  void SetTlsCertificate(int64_t not_before, int64_t not_after);
  // One backup finished (`ok` or not) after `seconds`, at Unix time `now`.
  void OnBackup(bool ok, double seconds, double now);
  // One optimiser step over `examples` examples.
  void OnTrainingStep(int64_t examples);
  // A scheduled heap release (ReleaseFreeHeap) gave `bytes` back in `took`.
  void OnHeapRelease(int64_t bytes, absl::Duration took);
  // Stops the endpoint and detaches the queue; idempotent.
  void Stop();

 private:
  class Observer;
  MetricsBridge();
  void Collect();
  void CollectProcess() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  metrics::Registry registry_;
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<metrics::MetricsServer> server_;
  std::string device_;  // for device_memory_bytes{device}

  mutable absl::Mutex mu_;
  storage::Database* db_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::set<std::string> queue_tenants_ ABSL_GUARDED_BY(mu_);  // every tenant given a depth series
  std::string data_dir_ ABSL_GUARDED_BY(mu_);
  struct WatchedLedger {
    std::string budget;
    const UsageLedger* ledger;
    int64_t refusals_reported = 0;
  };
  std::vector<WatchedLedger> ledgers_ ABSL_GUARDED_BY(mu_);
  void CollectLedgers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double cpu_seconds_reported_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_METRICS_BRIDGE_H_
