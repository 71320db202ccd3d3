#include "server/metrics_bridge.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/malloc_tuning.h"
#include "server/api/grpc_status.h"
#include "storage/database.h"
#include "storage/job_store.h"

namespace adapterd {
namespace {

using metrics::Labels;

std::string Str(std::string_view s) { return std::string(s); }

}  // namespace

// Serving hooks -> metrics. Every call is a few map lookups + atomic adds.
class MetricsBridge::Observer final : public serving::ServingObserver {
 public:
  Observer(const metrics::ServerMetrics* m, const std::string* device) : m_(*m), device_(*device) {}

  void OnBatch(const serving::BatchStats& s) override {
    m_.batch_size.Add({}).Observe(static_cast<double>(s.rows));
    m_.batch_tasks.Add({}).Observe(static_cast<double>(s.distinct_tasks));
    m_.batch_padding_ratio.Add({}).Observe(s.padding_ratio);
    m_.batch_queue_wait_seconds.Add({}).Observe(s.max_queue_wait_seconds);
  }
  void OnDropped(serving::DropReason reason, int64_t rows) override {
    m_.batch_dropped_total.Add({{"reason", Str(serving::DropReasonName(reason))}}).Increment(static_cast<double>(rows));
  }
  void OnCacheHit(serving::CacheTier tier) override { m_.adapter_cache_hits_total.Add(TierLabel(tier)).Increment(); }
  void OnCacheMiss(serving::CacheTier tier) override { m_.adapter_cache_misses_total.Add(TierLabel(tier)).Increment(); }
  void OnCacheEviction(serving::CacheTier tier) override {
    m_.adapter_cache_evictions_total.Add(TierLabel(tier)).Increment();
  }
  void OnCacheBytes(serving::CacheTier tier, int64_t bytes, int64_t entries) override {
    m_.adapter_cache_bytes.Add(TierLabel(tier)).Set(static_cast<double>(bytes));
    m_.adapter_cache_entries.Add(TierLabel(tier)).Set(static_cast<double>(entries));
    if (tier == serving::CacheTier::kDevice) {
      m_.device_memory_bytes.Add({{"device", device_}, {"kind", "adapters"}}).Set(static_cast<double>(bytes));
    }
  }
  void OnLoad(serving::CacheTier tier, double seconds) override {
    m_.adapter_load_seconds.Add(TierLabel(tier)).Observe(seconds);
  }
  void OnExecutorBusy(serving::WorkKind kind, double seconds) override {
    m_.executor_busy_seconds_total.Add({{"kind", Str(serving::WorkKindName(kind))}}).Increment(seconds);
  }

 private:
  static Labels TierLabel(serving::CacheTier tier) { return {{"tier", Str(serving::CacheTierName(tier))}}; }

  const metrics::ServerMetrics& m_;
  const std::string& device_;
};

MetricsBridge::MetricsBridge()
    : metrics_(std::make_unique<metrics::ServerMetrics>(registry_)),
      observer_(std::make_unique<Observer>(metrics_.get(), &device_)),
      device_("cpu") {}

MetricsBridge::~MetricsBridge() { Stop(); }

absl::StatusOr<std::unique_ptr<MetricsBridge>> MetricsBridge::Create(const std::string& address) {
  std::unique_ptr<MetricsBridge> bridge(new MetricsBridge());
  MetricsBridge* raw = bridge.get();
  bridge->registry_.AddCollectCallback([raw] { raw->Collect(); });
  // The bridge is made in the first start-up step, so its birth is the
  // process's start to well within a scrape interval.
  bridge->metrics_->process_start_time_seconds.Add({}).Set(absl::ToUnixMicros(absl::Now()) / 1e6);
  bridge->metrics_->serving.Add({}).Set(0);
  if (!address.empty()) {
    auto server = metrics::MetricsServer::Start(address, &bridge->registry_);
    if (!server.ok()) {
      return absl::Status(server.status().code(),
                          absl::StrCat("--metrics_listen ", address, ": ", server.status().message()));
    }
    bridge->server_ = *std::move(server);
  }
  return bridge;
}

int MetricsBridge::port() const { return server_ ? server_->port() : 0; }

void MetricsBridge::OnRpc(const api::RpcRecord& r) {
  std::string code = absl::StatusCodeToString(r.code);
  if (code.empty()) code = "UNKNOWN";  // a code outside google.rpc.Code
  // Failed authentication has no tenant; label it so, rather than "".
  const std::string tenant = r.tenant.empty() ? "unauthenticated" : r.tenant;
  metrics_->requests_total.Add({{"method", r.method}, {"code", code}, {"tenant", tenant}, {"protocol", r.protocol}})
      .Increment();
  metrics_->request_duration_seconds.Add({{"method", r.method}, {"tenant", tenant}, {"protocol", r.protocol}})
      .Observe(r.seconds);
  if (r.texts > 0) {
    metrics_->predict_texts_total.Add({{"tenant", tenant}}).Increment(static_cast<double>(r.texts));
  }
}

void MetricsBridge::SetModelInfo(const ModelInfo& info) {
  device_ = info.device;
  metrics_->model_info
      .Add({{"fingerprint", info.fingerprint},
            {"device", info.device},
            {"dtype", info.dtype},
            {"layers", absl::StrCat(info.layers)},
            {"hidden", absl::StrCat(info.hidden)}})
      .Set(1);
  metrics_->device_memory_bytes.Add({{"device", info.device}, {"kind", "encoder"}})
      .Set(static_cast<double>(info.encoder_bytes));
  for (const auto& [dtype, seconds] : info.dtype_calibration_seconds) {
    metrics_->dtype_calibration_seconds.Add({{"dtype", dtype}}).Set(seconds);
  }
}

void MetricsBridge::SetCacheBudgets(int64_t host_bytes, int64_t device_bytes) {
  metrics_->adapter_cache_budget_bytes.Add({{"tier", "host"}}).Set(static_cast<double>(host_bytes));
  metrics_->adapter_cache_budget_bytes.Add({{"tier", "device"}}).Set(static_cast<double>(device_bytes));
}

serving::ServingObserver* MetricsBridge::serving_observer() { return observer_.get(); }

void MetricsBridge::WatchJobs(storage::Database* db, std::vector<std::string> tenants) {
  absl::MutexLock lock(&mu_);
  db_ = db;
  queue_tenants_.insert(tenants.begin(), tenants.end());
}

void MetricsBridge::WatchDataDir(std::string path) {
  absl::MutexLock lock(&mu_);
  data_dir_ = std::move(path);
}

void MetricsBridge::SetServing(bool serving) { metrics_->serving.Add({}).Set(serving ? 1 : 0); }

void MetricsBridge::SetTlsCertificate(int64_t not_before, int64_t not_after) {
  metrics_->tls_certificate_not_before_timestamp_seconds.Add({}).Set(static_cast<double>(not_before));
  metrics_->tls_certificate_expiry_timestamp_seconds.Add({}).Set(static_cast<double>(not_after));
}

void MetricsBridge::OnBackup(bool ok, double seconds, double now) {
  metrics_->backups_total.Add({{"result", ok ? "ok" : "error"}}).Increment();
  metrics_->backup_last_duration_seconds.Add({}).Set(seconds);
  if (ok) metrics_->backup_last_success_timestamp_seconds.Add({}).Set(now);
}

void MetricsBridge::CollectProcess() {
  if (const std::optional<ProcessMemory> mem = ReadProcessMemory()) {
    metrics_->process_virtual_memory_bytes.Add({}).Set(static_cast<double>(mem->virtual_bytes));
    metrics_->process_resident_memory_bytes.Add({}).Set(static_cast<double>(mem->resident_bytes));
  }
  std::error_code ec;
  int64_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    ++fds;
  }
  if (!ec)
    metrics_->process_open_fds.Add({}).Set(static_cast<double>(fds > 0 ? fds - 1 : 0));  // less the iterator's own
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    metrics_->process_max_fds.Add({}).Set(static_cast<double>(lim.rlim_cur));
  }
  const HeapStats heap = ReadHeapStats();
  metrics_->process_heap_bytes.Add({{"state", "in_use"}}).Set(static_cast<double>(heap.in_use));
  metrics_->process_heap_bytes.Add({{"state", "free"}}).Set(static_cast<double>(heap.free));
  if (rusage ru{}; getrusage(RUSAGE_SELF, &ru) == 0) {
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    if (cpu > cpu_seconds_reported_) {
      metrics_->process_cpu_seconds_total.Add({}).Increment(cpu - cpu_seconds_reported_);
      cpu_seconds_reported_ = cpu;
    }
  }
  if (!data_dir_.empty()) {
    struct statvfs fs {};
    if (statvfs(data_dir_.c_str(), &fs) == 0) {
      const double unit = static_cast<double>(fs.f_frsize);
      metrics_->data_dir_available_bytes.Add({}).Set(static_cast<double>(fs.f_bavail) * unit);
      metrics_->data_dir_capacity_bytes.Add({}).Set(static_cast<double>(fs.f_blocks) * unit);
    }
  }
}

void MetricsBridge::OnTrainingStep(int64_t examples) {
  metrics_->training_steps_total.Add({}).Increment();
  metrics_->training_examples_total.Add({}).Increment(static_cast<double>(examples));
}

void MetricsBridge::OnHeapRelease(int64_t bytes, absl::Duration took) {
  metrics_->process_heap_released_bytes_total.Add({}).Increment(static_cast<double>(bytes));
  metrics_->process_heap_release_seconds_total.Add({}).Increment(absl::ToDoubleSeconds(took));
}

void MetricsBridge::WatchLedger(std::string budget, const UsageLedger* ledger) {
  absl::MutexLock lock(&mu_);
  metrics_->admission_used.Add({{"budget", budget}});
  metrics_->admission_refusals_total.Add({{"budget", budget}});
  ledgers_.push_back({std::move(budget), ledger, 0});
}

void MetricsBridge::CollectLedgers() {
  for (WatchedLedger& w : ledgers_) {
    const metrics::Labels labels = {{"budget", w.budget}};
    metrics_->admission_used.Add(labels).Set(static_cast<double>(w.ledger->total()));
    if (w.ledger->total_limit() != UsageLedger::kUnlimited) {
      metrics_->admission_limit.Add(labels).Set(static_cast<double>(w.ledger->total_limit()));
    }
    const int64_t refusals = w.ledger->refusals();
    metrics_->admission_refusals_total.Add(labels).Increment(static_cast<double>(refusals - w.refusals_reported));
    w.refusals_reported = refusals;
  }
}

void MetricsBridge::Collect() {
  absl::MutexLock lock(&mu_);
  CollectProcess();
  CollectLedgers();
  if (db_ == nullptr) return;
  if (absl::StatusOr<storage::Database::MemoryUsage> mem = db_->Memory(); mem.ok()) {
    metrics_->storage_memory_bytes.Add({{"kind", "memtables"}}).Set(static_cast<double>(mem->memtables));
    metrics_->storage_memory_bytes.Add({{"kind", "table_readers"}}).Set(static_cast<double>(mem->table_readers));
    metrics_->storage_memory_bytes.Add({{"kind", "block_cache"}}).Set(static_cast<double>(mem->block_cache));
  }
  // Count every job by state, and queued jobs by tenant, across tenants,
  // paging through the job table.
  std::map<storage::v1::JobState, int64_t> counts;
  std::map<std::string, int64_t> queued;
  storage::JobStore::ListOptions lo;
  lo.page_size = 1 << 30;  // capped by the store at its maximum page size
  while (true) {
    absl::StatusOr<storage::JobStore::Page> page = db_->jobs().List(lo);
    if (!page.ok()) return;  // keep the previous values rather than report a partial count
    for (const storage::v1::JobRecord& job : page->jobs) {
      ++counts[job.state()];
      if (job.state() == storage::v1::JOB_STATE_QUEUED) ++queued[job.tenant()];
    }
    if (page->next_page_token.empty()) break;
    lo.page_token = page->next_page_token;
  }
  for (const auto& [tenant, n] : queued) queue_tenants_.insert(tenant);
  for (const std::string& tenant : queue_tenants_) {
    const auto it = queued.find(tenant);
    metrics_->training_queue_depth.Add({{"tenant", tenant}})
        .Set(it == queued.end() ? 0.0 : static_cast<double>(it->second));
  }
  for (int s = storage::v1::JobState_MIN; s <= storage::v1::JobState_MAX; ++s) {
    if (!storage::v1::JobState_IsValid(s) || s == 0) continue;  // 0 = JOB_STATE_UNSPECIFIED
    const auto state = static_cast<storage::v1::JobState>(s);
    std::string name = storage::v1::JobState_Name(state);
    if (name.rfind("JOB_STATE_", 0) == 0) name = name.substr(10);
    metrics_->training_jobs.Add({{"state", name}}).Set(static_cast<double>(counts[state]));
  }
}

void MetricsBridge::Stop() {
  server_.reset();
  absl::MutexLock lock(&mu_);
  db_ = nullptr;
  ledgers_.clear();
}

}  // namespace adapterd
