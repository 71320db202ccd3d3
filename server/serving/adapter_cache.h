// AdapterCache: the task adapters, in two LRU tiers above RocksDB
// (docs/ARCHITECTURE.md, "server/serving").
//
//   device tier   std::shared_ptr<const LoadedAdapter>: the AdapterSet
//                 deserialised and converted to the encoder's device and
//                 dtype, ready to run. Its adapters live in a slot of the
//                 cache's resident AdapterSlab (model/adapter_slab.h), where
//                 mixed batches gather them by slot with no per-batch copy;
//                 bytes = the slot's bytes. A set that cannot have a slot
//                 (its bottleneck is wider than the slab's, or every slot is
//                 held, by entries and by evicted adapters that batches
//                 still run) keeps tensors of its own; bytes = those.
//   host tier     the version's serving form (server/model/serving_form.h:
//                 the set's tensors in the encoder's dtype, one blob), as
//                 read from RocksDB or made from the adapter file. Bytes =
//                 the form's size (about half the fp32 file's when serving
//                 bf16). A device-tier miss that hits here costs one memcpy
//                 per tensor: no RocksDB read, no digest (the bytes were
//                 verified when read), no parsing, no dtype conversion.
//   RocksDB       AdapterStore / TaskStore: the serving form when one is
//                 stored and current, else the adapter file, from which a
//                 serving form is then made and stored for the next cold
//                 load (server/serving/adapter_loading.h; a failed store is
//                 logged once and does not fail the Get).
//
// Each tier is an LRU under its own byte budget (bytes, not entries).
//
// Get(tenant, task_id, version):
//   - version > 0 names a stored version; version 0 means the task's current
//     version. The current version is read with the task record (one RocksDB
//     snapshot, AdapterStore::GetCurrent) on the first Get and remembered
//     until Invalidate(tenant, task_id): the server must call Invalidate after
//     every promotion and delete of a task, or Gets keep resolving 0 to the
//     version they saw first.
//   - Errors: NOT_FOUND for an unknown task or a version that is not stored;
//     FAILED_PRECONDITION when the task has no ready version (PENDING), or
//     the adapter was trained on another encoder (fingerprint, layer count
//     or hidden size differ); INVALID_ARGUMENT for malformed adapter bytes;
//     DATA_LOSS when the stored serving form is corrupt (its digest does not
//     match: the form is deleted, and the next Get rebuilds it from the
//     adapter file).
//     Failures are not cached: the next Get tries again.
//   - Single flight: concurrent Gets of one cold key run exactly one load;
//     the others wait for it and share its result or its error.
//   - The labels returned are the adapter file's own (logit order of that
//     version), which for the current version equal the task record's.
//
// Budgets:
//   - An entry larger than a tier's whole budget is served but not cached in
//     that tier (each Get of it loads it again). Pinned device entries are the
//     exception: they are always cached.
//   - Pin(tenant, task_id) marks a task: its device-tier entries are never
//     evicted by the LRU, whatever version (the mark survives Invalidate, so
//     the next promoted version is pinned too). Pinned bytes count against the
//     budget; unpinned entries are evicted first. When pinned bytes alone
//     exceed the budget, the tier stays over budget by the pinned excess, holds
//     no unpinned entry, and serves new unpinned adapters without caching them.
//     Unpin(tenant, task_id) makes the entries ordinary LRU entries again (and
//     evicts down to the budget). The host tier ignores pins.
//   - Invalidate(tenant, task_id) drops the task's entries from both tiers and
//     its remembered current version; loads of that task in flight finish for
//     their waiters but are not cached. Adapters held by in-flight batches stay
//     alive through their shared_ptr.
//
// Thread safety: all methods are thread-safe. Loads (RocksDB reads and
// deserialisation) run on the calling thread without the cache's lock held.
// Observer hooks are called with the lock held (see serving_observer.h).
//
// Ownership: the encoder, database and observer are borrowed and must outlive
// the cache. Returned adapters are immutable and shared.
#ifndef ADAPTERD_SERVER_SERVING_ADAPTER_CACHE_H_
#define ADAPTERD_SERVER_SERVING_ADAPTER_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/model/adapter_set.h"
#include "server/model/adapter_slab.h"
#include "server/serving/serving_observer.h"

namespace adapterd::model {
class BertEncoder;
}
namespace adapterd::storage {
class Database;
}

namespace adapterd::serving {

// One task version, ready to run on the encoder's device.
struct LoadedAdapter {
  std::string tenant;
  std::string task_id;
  int64_t version = 0;
  // Class labels in logit order (the set's config().labels).
  std::vector<std::string> labels;
  // On the encoder's device, in its dtype; never requires grad.
  std::shared_ptr<const model::AdapterSet> set;
  // What the device tier counts: the slab slot's bytes, or the set's
  // tensor bytes when it has none.
  int64_t bytes = 0;
};

// A tier's current size.
struct CacheTierStats {
  int64_t bytes = 0;
  int64_t entries = 0;
  int64_t pinned_bytes = 0;  // device tier only
};

class AdapterCache {
 public:
  struct Options {
    // Required. Adapters are checked against its config and fingerprint and
    // converted to its device and dtype.
    const model::BertEncoder* encoder = nullptr;
    // Required. Where adapters and task records are read from.
    storage::Database* db = nullptr;
    // Byte budgets of the tiers (>= 0; 0 caches nothing but pinned entries).
    int64_t host_budget_bytes = int64_t{256} << 20;
    int64_t device_budget_bytes = int64_t{256} << 20;
    // The resident slab: the widest bottleneck a slot holds (0: no slab,
    // every adapter keeps tensors of its own), and its most slots. The slab
    // has min(slab_max_slots, device_budget_bytes / slot bytes) slots,
    // allocated at Create (a slot at m = 64 is 4.8 MB at BERT-base in bf16).
    int64_t slab_bottleneck = 64;
    int64_t slab_max_slots = 1024;
    // Optional metrics hook.
    ServingObserver* observer = nullptr;
  };

  // INVALID_ARGUMENT when encoder or db is null or a budget is negative.
  static absl::StatusOr<std::unique_ptr<AdapterCache>> Create(Options options);
  ~AdapterCache();
  AdapterCache(const AdapterCache&) = delete;
  AdapterCache& operator=(const AdapterCache&) = delete;

  // See the header comment. Blocks while the adapter loads.
  absl::StatusOr<std::shared_ptr<const LoadedAdapter>> Get(const std::string& tenant, const std::string& task_id,
                                                           int64_t version = 0);

  void Pin(const std::string& tenant, const std::string& task_id);
  void Unpin(const std::string& tenant, const std::string& task_id);
  void Invalidate(const std::string& tenant, const std::string& task_id);

  CacheTierStats host_stats() const;
  CacheTierStats device_stats() const;
  // The resident slab; null when there is none (slab_bottleneck 0, or a
  // device budget smaller than one slot).
  const model::AdapterSlab* slab() const { return slab_.get(); }

 private:
  // (tenant, task_id, version); ordered so that a task's versions are adjacent.
  using Key = std::tuple<std::string, std::string, int64_t>;
  using TaskKey = std::pair<std::string, std::string>;
  struct Flight;
  template <typename V>
  class LruTier;
  using Result = absl::StatusOr<std::shared_ptr<const LoadedAdapter>>;

  AdapterCache(Options options, std::shared_ptr<model::AdapterSlab> slab);
  // The set as the device tier holds it: in a slab slot when it fits and a
  // slot is free, or can be freed by evicting what inserting a slot-sized
  // entry would evict anyway; else `set` itself.
  std::shared_ptr<const model::AdapterSet> Resident(std::unique_ptr<model::AdapterSet> set);

  // The load behind one flight (no lock held except briefly for the host
  // tier). Resolves version 0 through the task record.
  Result Load(const Key& key, const std::shared_ptr<Flight>& flight);
  // Inserts a finished load, unless the flight was invalidated meanwhile.
  void Finish(const Key& key, const std::shared_ptr<Flight>& flight, const Result& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsPinned(const Key& key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // IsPinned as the tiers take it (they call it with mu_ held).
  std::function<bool(const Key&)> PinnedCheck() const;
  void Report() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const std::shared_ptr<model::AdapterSlab> slab_;

  // Protects the tiers, the flights, the remembered current versions and the
  // pinned tasks.
  mutable absl::Mutex mu_;
  std::unique_ptr<LruTier<std::shared_ptr<const std::string>>> host_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<LruTier<std::shared_ptr<const LoadedAdapter>>> device_ ABSL_GUARDED_BY(mu_);
  // Loads in progress, by the key they were asked for (version 0 included).
  std::map<Key, std::shared_ptr<Flight>> flights_ ABSL_GUARDED_BY(mu_);
  // The current version that version 0 resolved to, per task (one small entry
  // per task served since its last Invalidate).
  std::map<TaskKey, int64_t> current_ ABSL_GUARDED_BY(mu_);
  std::set<TaskKey> pinned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_ADAPTER_CACHE_H_
