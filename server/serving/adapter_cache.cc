#include "server/serving/adapter_cache.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <utility>

#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "server/model/bert_encoder.h"
#include "server/serving/adapter_loading.h"

namespace adapterd::serving {
namespace {
constexpr int64_t kMinVersion = std::numeric_limits<int64_t>::min();
}  // namespace

struct AdapterCache::Flight {
  absl::Notification done;
  // Written once by the loading thread before `done` is notified.
  Result result = absl::UnknownError("adapter load did not finish");
  // Set by Invalidate: the load's result is handed to its waiters only.
  // Read and written under the owning cache's mu_ (Load's insert, Finish,
  // Invalidate). Not annotated: the analysis can name a mutex of this
  // object or a global one, not a member of the cache that owns it.
  bool stale = false;
};

// One LRU tier under a byte budget. Not thread-safe: AdapterCache::mu_ guards it.
template <typename V>
class AdapterCache::LruTier {
 public:
  using PinnedFn = std::function<bool(const Key&)>;

  LruTier(CacheTier tier, int64_t budget, ServingObserver* observer)
      : tier_(tier), budget_(budget), observer_(observer) {}

  // The entry, marked most recently used; null when absent. Counts a hit or miss.
  const V* Find(const Key& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (observer_ != nullptr) observer_->OnCacheMiss(tier_);
      return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    if (observer_ != nullptr) observer_->OnCacheHit(tier_);
    return &it->second.value;
  }

  // Caches `value` unless it cannot fit (see the header's budget rules). An
  // existing entry of the same key is kept.
  void Insert(const Key& key, V value, int64_t bytes, const PinnedFn& pinned) {
    if (entries_.contains(key)) return;
    const bool pin = pinned(key);
    if (!pin && bytes > budget_) return;
    EvictUntil(budget_ - bytes, pinned);
    if (!pin && bytes_ + bytes > budget_) return;
    lru_.push_front(key);
    entries_.emplace(key, Entry{std::move(value), bytes, lru_.begin()});
    bytes_ += bytes;
  }

  // Evicts unpinned entries, least recently used first, until at most
  // `target` bytes remain or only pinned entries are left.
  void EvictUntil(int64_t target, const PinnedFn& pinned) {
    for (auto it = lru_.end(); bytes_ > target && it != lru_.begin();) {
      --it;
      if (pinned(*it)) continue;
      auto e = entries_.find(*it);
      bytes_ -= e->second.bytes;
      entries_.erase(e);
      it = lru_.erase(it);
      if (observer_ != nullptr) observer_->OnCacheEviction(tier_);
    }
  }
  void Shrink(const PinnedFn& pinned) { EvictUntil(budget_, pinned); }

  void EraseTask(const TaskKey& task) {
    auto it = entries_.lower_bound(Key{task.first, task.second, kMinVersion});
    while (it != entries_.end() && std::get<0>(it->first) == task.first && std::get<1>(it->first) == task.second) {
      bytes_ -= it->second.bytes;
      lru_.erase(it->second.lru);
      it = entries_.erase(it);
    }
  }

  CacheTierStats Stats(const PinnedFn& pinned) const {
    CacheTierStats s{bytes_, static_cast<int64_t>(entries_.size()), 0};
    for (const auto& [key, e] : entries_) {
      if (pinned(key)) s.pinned_bytes += e.bytes;
    }
    return s;
  }

  void Report() const {
    if (observer_ != nullptr) observer_->OnCacheBytes(tier_, bytes_, static_cast<int64_t>(entries_.size()));
  }

 private:
  struct Entry {
    V value;
    int64_t bytes = 0;
    std::list<Key>::iterator lru;
  };

  const CacheTier tier_;
  const int64_t budget_;
  ServingObserver* const observer_;
  std::map<Key, Entry> entries_;
  std::list<Key> lru_;  // most recently used first
  int64_t bytes_ = 0;
};

absl::StatusOr<std::unique_ptr<AdapterCache>> AdapterCache::Create(Options options) {
  if (options.encoder == nullptr) return absl::InvalidArgumentError("AdapterCache needs an encoder");
  if (options.db == nullptr) return absl::InvalidArgumentError("AdapterCache needs a database");
  if (options.host_budget_bytes < 0 || options.device_budget_bytes < 0) {
    return absl::InvalidArgumentError("AdapterCache budgets must be >= 0");
  }
  if (options.slab_bottleneck < 0 || options.slab_max_slots < 0) {
    return absl::InvalidArgumentError("AdapterCache slab_bottleneck and slab_max_slots must be >= 0");
  }
  std::shared_ptr<model::AdapterSlab> slab;
  const model::BertEncoder& encoder = *options.encoder;
  if (options.slab_bottleneck > 0) {
    const int64_t slot_bytes =
        model::AdapterSlab::SlotBytes(encoder.config(), options.slab_bottleneck, encoder.dtype());
    const int64_t capacity = std::min(options.slab_max_slots, options.device_budget_bytes / slot_bytes);
    if (capacity > 0) {
      ASSIGN_OR_RETURN(slab, model::AdapterSlab::Create(encoder.config(), {.capacity = capacity,
                                                                           .bottleneck = options.slab_bottleneck,
                                                                           .device = encoder.device(),
                                                                           .dtype = encoder.dtype()}));
    }
  }
  return std::unique_ptr<AdapterCache>(new AdapterCache(std::move(options), std::move(slab)));
}

AdapterCache::AdapterCache(Options options, std::shared_ptr<model::AdapterSlab> slab)
    : options_(std::move(options)),
      slab_(std::move(slab)),
      host_(std::make_unique<LruTier<std::shared_ptr<const std::string>>>(CacheTier::kHost, options_.host_budget_bytes,
                                                                          options_.observer)),
      device_(std::make_unique<LruTier<std::shared_ptr<const LoadedAdapter>>>(
          CacheTier::kDevice, options_.device_budget_bytes, options_.observer)) {}

AdapterCache::~AdapterCache() = default;

std::function<bool(const AdapterCache::Key&)> AdapterCache::PinnedCheck() const {
  // Called by the tiers with mu_ held.
  return [this](const Key& k) ABSL_NO_THREAD_SAFETY_ANALYSIS { return IsPinned(k); };
}

bool AdapterCache::IsPinned(const Key& key) const {
  return pinned_.contains(TaskKey(std::get<0>(key), std::get<1>(key)));
}

void AdapterCache::Report() {
  host_->Report();
  device_->Report();
}

absl::StatusOr<std::shared_ptr<const LoadedAdapter>> AdapterCache::Get(const std::string& tenant,
                                                                       const std::string& task_id, int64_t version) {
  if (version < 0) return absl::InvalidArgumentError("adapter version must be >= 0");
  Key key(tenant, task_id, version);
  std::shared_ptr<Flight> flight;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    if (version == 0) {
      auto it = current_.find(TaskKey(tenant, task_id));
      if (it != current_.end()) std::get<2>(key) = it->second;
    }
    if (const auto* hit = device_->Find(key)) return *hit;
    auto it = flights_.find(key);
    if (it != flights_.end()) {
      flight = it->second;
    } else {
      flight = std::make_shared<Flight>();
      flights_.emplace(key, flight);
      leader = true;
    }
  }
  if (!leader) {
    flight->done.WaitForNotification();
    return flight->result;
  }
  Result result = Load(key, flight);
  {
    absl::MutexLock lock(&mu_);
    Finish(key, flight, result);
  }
  flight->done.Notify();
  return result;
}

AdapterCache::Result AdapterCache::Load(const Key& key, const std::shared_ptr<Flight>& flight) {
  const auto& [tenant, task_id, asked] = key;
  int64_t version = asked;
  std::shared_ptr<const std::string> bytes;
  if (asked != 0) {
    absl::MutexLock lock(&mu_);
    if (const auto* hit = host_->Find(key)) bytes = *hit;
  }
  const AdapterSource source{options_.encoder, options_.db, options_.observer};
  std::unique_ptr<model::AdapterSet> set;
  if (bytes != nullptr) {
    ASSIGN_OR_RETURN(set, LoadFromServingForm(source, tenant, task_id, asked, *bytes));
  } else {
    if (asked == 0 && options_.observer != nullptr) options_.observer->OnCacheMiss(CacheTier::kHost);
    ASSIGN_OR_RETURN(LoadedAdapterSet read, LoadFromStorage(source, tenant, task_id, asked));
    version = read.version;
    set = std::move(read.set);
    absl::MutexLock lock(&mu_);
    if (!flight->stale && read.serving_form != nullptr) {
      host_->Insert(Key(tenant, task_id, version), read.serving_form, static_cast<int64_t>(read.serving_form->size()),
                    [](const Key&) { return false; });
      host_->Report();
    }
  }

  auto loaded = std::make_shared<LoadedAdapter>();
  loaded->tenant = tenant;
  loaded->task_id = task_id;
  loaded->version = version;
  loaded->labels = set->config().labels;
  loaded->set = Resident(std::move(set));
  loaded->bytes = loaded->set->slab() != nullptr ? slab_->slot_bytes() : loaded->set->ByteSize();
  return std::shared_ptr<const LoadedAdapter>(std::move(loaded));
}

std::shared_ptr<const model::AdapterSet> AdapterCache::Resident(std::unique_ptr<model::AdapterSet> set) {
  if (slab_ == nullptr) return set;
  absl::StatusOr<std::shared_ptr<const model::AdapterSet>> stored = slab_->Store(*set);
  if (absl::IsResourceExhausted(stored.status())) {
    // Every slot is held. Evict now what inserting this entry would evict
    // (Finish): the slots of evicted adapters that no batch still runs come
    // free.
    {
      absl::MutexLock lock(&mu_);
      device_->EvictUntil(options_.device_budget_bytes - slab_->slot_bytes(), PinnedCheck());
      device_->Report();
    }
    stored = slab_->Store(*set);
  }
  // Still no free slot (pinned entries, or adapters in flight, hold them
  // all) or a bottleneck wider than the slab's: the set serves from its own
  // tensors.
  if (!stored.ok()) return set;
  return *std::move(stored);
}

void AdapterCache::Finish(const Key& key, const std::shared_ptr<Flight>& flight, const Result& result) {
  auto it = flights_.find(key);
  if (it != flights_.end() && it->second == flight) flights_.erase(it);
  flight->result = result;
  if (flight->stale || !result.ok()) return;
  const LoadedAdapter& a = **result;
  device_->Insert(Key(a.tenant, a.task_id, a.version), *result, a.bytes, PinnedCheck());
  if (std::get<2>(key) == 0) current_[TaskKey(a.tenant, a.task_id)] = a.version;
  device_->Report();
}

void AdapterCache::Pin(const std::string& tenant, const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  pinned_.insert(TaskKey(tenant, task_id));
}

void AdapterCache::Unpin(const std::string& tenant, const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  if (pinned_.erase(TaskKey(tenant, task_id)) == 0) return;
  device_->Shrink(PinnedCheck());
  device_->Report();
}

void AdapterCache::Invalidate(const std::string& tenant, const std::string& task_id) {
  absl::MutexLock lock(&mu_);
  const TaskKey task(tenant, task_id);
  current_.erase(task);
  host_->EraseTask(task);
  device_->EraseTask(task);
  for (auto it = flights_.lower_bound(Key(tenant, task_id, kMinVersion));
       it != flights_.end() && std::get<0>(it->first) == tenant && std::get<1>(it->first) == task_id;) {
    it->second->stale = true;
    it = flights_.erase(it);
  }
  Report();
}

CacheTierStats AdapterCache::host_stats() const {
  absl::MutexLock lock(&mu_);
  return host_->Stats([](const Key&) { return false; });
}

CacheTierStats AdapterCache::device_stats() const {
  absl::MutexLock lock(&mu_);
  return device_->Stats(PinnedCheck());
}

}  // namespace adapterd::serving
