#include "server/metrics_bridge.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/api/grpc_status.h"
#include "server/training/job_queue.h"
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
    m_.batch_dropped_total.Add({{"reason", Str(serving::DropReasonName(reason))}})
        .Increment(static_cast<double>(rows));
  }
  void OnCacheHit(serving::CacheTier tier) override {
    m_.adapter_cache_hits_total.Add(TierLabel(tier)).Increment();
  }
  void OnCacheMiss(serving::CacheTier tier) override {
    m_.adapter_cache_misses_total.Add(TierLabel(tier)).Increment();
  }
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
  const std::string code = Str(api::CodeName(r.code));
  // Failed authentication has no tenant; label it so, rather than "".
  const std::string tenant = r.tenant.empty() ? "unauthenticated" : r.tenant;
  metrics_->requests_total.Add({{"method", r.method}, {"code", code}, {"tenant", tenant}}).Increment();
  metrics_->request_duration_seconds.Add({{"method", r.method}}).Observe(r.seconds);
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
}

void MetricsBridge::SetCacheBudgets(int64_t host_bytes, int64_t device_bytes) {
  metrics_->adapter_cache_budget_bytes.Add({{"tier", "host"}}).Set(static_cast<double>(host_bytes));
  metrics_->adapter_cache_budget_bytes.Add({{"tier", "device"}}).Set(static_cast<double>(device_bytes));
}

serving::ServingObserver* MetricsBridge::serving_observer() { return observer_.get(); }

void MetricsBridge::WatchQueue(const training::JobQueue* queue, storage::Database* db) {
  absl::MutexLock lock(&mu_);
  queue_ = queue;
  db_ = db;
}

void MetricsBridge::OnTrainingStep(int64_t examples) {
  metrics_->training_steps_total.Add({}).Increment();
  metrics_->training_examples_total.Add({}).Increment(static_cast<double>(examples));
}

void MetricsBridge::Collect() {
  absl::MutexLock lock(&mu_);
  if (queue_ == nullptr || db_ == nullptr) return;
  metrics_->training_queue_depth.Add({}).Set(queue_->queued());
  // Count every job by state, across tenants, paging through the job table.
  std::map<v1::JobState, int64_t> counts;
  storage::JobStore::ListOptions lo;
  lo.page_size = 1 << 30;  // capped by the store at its maximum page size
  while (true) {
    absl::StatusOr<storage::JobStore::Page> page = db_->jobs().List(lo);
    if (!page.ok()) return;  // keep the previous values rather than report a partial count
    for (const v1::JobRecord& job : page->jobs) ++counts[job.state()];
    if (page->next_page_token.empty()) break;
    lo.page_token = page->next_page_token;
  }
  for (int s = v1::JobState_MIN; s <= v1::JobState_MAX; ++s) {
    if (!v1::JobState_IsValid(s) || s == 0) continue;  // 0 = JOB_STATE_UNSPECIFIED
    const auto state = static_cast<v1::JobState>(s);
    std::string name = v1::JobState_Name(state);
    if (name.rfind("JOB_STATE_", 0) == 0) name = name.substr(10);
    metrics_->training_jobs.Add({{"state", name}}).Set(static_cast<double>(counts[state]));
  }
}

void MetricsBridge::Stop() {
  server_.reset();
  absl::MutexLock lock(&mu_);
  queue_ = nullptr;
  db_ = nullptr;
}

}  // namespace adapterd
