// ServingObserver: the serving layer's metrics hook. Every method has a no-op
// default, so an observer overrides only what it records. The server wires
// one to its Prometheus metrics; tests use one to count events.
//
// Thread safety: methods are called concurrently from request threads, the
// batcher thread and the device executor thread, sometimes with a serving
// lock held (AdapterCache calls its hooks under its own mutex). An
// implementation must be thread-safe, fast, and must never call back into the
// serving classes.
//
// Ownership: the observer is borrowed; it must outlive every object it is
// given to.
#ifndef ADAPTERD_SERVER_SERVING_SERVING_OBSERVER_H_
#define ADAPTERD_SERVER_SERVING_SERVING_OBSERVER_H_

#include <cstdint>
#include <string_view>

namespace adapterd::serving {

// The two tiers of AdapterCache.
enum class CacheTier {
  kHost,    // serving-form bytes read from RocksDB (or made from the adapter file)
  kDevice,  // deserialised AdapterSets on the encoder's device and dtype
};
std::string_view CacheTierName(CacheTier tier);

// What a load from RocksDB did with a version's serving form.
enum class ServingFormEvent {
  kRead,         // read and decoded (no canonical file parsed)
  kStale,        // one was stored but made for another encoder, dtype or layout
  kCorrupt,      // its digest did not match: the load failed with DATA_LOSS
  kWritten,      // made from the canonical file and stored
  kWriteFailed,  // made, but storing it failed (the load went on)
};
std::string_view ServingFormEventName(ServingFormEvent event);

// The two kinds of work DeviceExecutor runs.
enum class WorkKind { kInference, kTraining };
std::string_view WorkKindName(WorkKind work);

// Why rows were dropped before reaching the device.
enum class DropReason {
  kDeadline,  // the request's deadline passed while it waited
  kShutdown,  // the executor stopped before the batch ran
};
std::string_view DropReasonName(DropReason reason);

// One mixed-task forward pass, as it runs (after dropped rows are removed).
struct BatchStats {
  int64_t rows = 0;
  int64_t distinct_tasks = 0;
  // The forwards the batch runs as: one per group of similar-length rows
  // (length_groups.h).
  int64_t forwards = 1;
  // Padding positions / all positions of the batch's padded forwards.
  double padding_ratio = 0;
  // Longest time a row of the batch waited between enqueue and the forward.
  double max_queue_wait_seconds = 0;
};

class ServingObserver {
 public:
  virtual ~ServingObserver() = default;

  // A batch is about to run (as stats.forwards forward passes).
  virtual void OnBatch(const BatchStats& stats) {}
  // `rows` rows are failed without being computed; called before their
  // callers are woken with the error.
  virtual void OnDropped(DropReason reason, int64_t rows) {}

  // Lookups of one tier: a hit, a miss, an entry evicted by the LRU.
  virtual void OnCacheHit(CacheTier tier) {}
  virtual void OnCacheMiss(CacheTier tier) {}
  virtual void OnCacheEviction(CacheTier tier) {}
  // A tier's size after every change (bytes as counted against its budget).
  virtual void OnCacheBytes(CacheTier tier, int64_t bytes, int64_t entries) {}
  // One load into `tier` took `seconds`: kHost = a RocksDB read, kDevice =
  // decoding the serving form (or deserialising and converting the adapter
  // file) to the encoder's device and dtype.
  virtual void OnLoad(CacheTier tier, double seconds) {}
  // What a load from RocksDB did with the version's serving form
  // (server/serving/adapter_loading.h).
  virtual void OnServingForm(ServingFormEvent event) {}

  // The device executor ran one item of `kind` for `seconds`.
  virtual void OnExecutorBusy(WorkKind kind, double seconds) {}
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_SERVING_OBSERVER_H_
