// DynamicBatcher: queues rows (tokenized inputs of any task) and forms
// batches for the device (docs/ARCHITECTURE.md, "server/serving"; Triton's and TF Serving's
// knobs).
//
// Batch formation. A batch is formed when fewer than max_inflight_batches
// batches are outstanding and either max_batch_size rows are waiting or the
// oldest waiting row has waited max_queue_delay_us. Batches mix tasks and
// tenants. A request's rows may be split across batches.
//
// Fair sharing, when more rows wait than fit (max_batch_size = b):
//   1. Tenants (BatchRow::adapter->tenant) share the b rows max-min fairly
//      in proportion to their weights (BatchRow::tenant_weight, the tenants
//      file's batch_weight; water filling): a tenant waiting for fewer rows
//      than its share gets them all, the others split the rest by weight;
//      rows that do not divide evenly go to the tenants whose oldest row
//      waited longest.
//   2. Within a tenant, its requests share its rows the same way; rows that
//      do not divide evenly go to the requests whose first rows are nearest
//      in length around the oldest such request's (the window below).
//   3. Within a request, its rows nearest in length around its oldest:
//      sorted by length, the window containing the oldest with the smallest
//      length spread. This cuts padding and never passes over the oldest.
// So a request's rows never wait behind another request's beyond its fair
// share: with R requests and T tenants waiting, every tenant of weight w
// gets at least min(its rows, floor(b * w / W)) rows of each batch (W: the
// weights of the tenants waiting; all 1 by default), and while T <= b a
// request that arrives behind a large one (a 16-question QA request is
// thousands of rows) has a row in the next batch formed, once fewer than
// its tenant's share of other requests wait: the wait it sees is the
// batches already in flight (max_inflight_batches), not the large request's
// length. With more than b tenants waiting, tenants are served one row each,
// the longest-waiting first. With one request waiting this is the length
// grouping alone.
//
// Backpressure: while max_inflight_batches batches are outstanding (handed
// to RunBatchFn and not yet `done`), rows accumulate, so a busy device gets
// bigger batches.
//
// Deadlines: rows whose deadline has passed are failed with
// DEADLINE_EXCEEDED (and reported as dropped) when the next batch is formed,
// before they reach RunBatchFn. RunBatchFn should check again just before
// computing (the batch may wait for the device).
//
// Shutdown(): new Enqueue calls fail with UNAVAILABLE; the rows already
// queued are batched at once (without waiting for the delay) and handed on;
// it returns when every batch is `done`. The destructor calls it.
//
// Thread safety: thread-safe. One internal thread forms batches and calls
// RunBatchFn (which must not block for long: hand the batch to the device
// executor).
#ifndef ADAPTERD_SERVER_SERVING_DYNAMIC_BATCHER_H_
#define ADAPTERD_SERVER_SERVING_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/serving/adapter_cache.h"
#include "server/serving/pending_request.h"
#include "server/serving/serving_observer.h"

namespace adapterd::serving {

// One row: one text (or text pair) of one request.
struct BatchRow {
  // Unpadded, specials included.
  std::vector<int64_t> input_ids;
  std::vector<int64_t> token_type_ids;
  // The task that adapts this row (kept alive while the row is queued).
  std::shared_ptr<const LoadedAdapter> adapter;
  absl::Time deadline = absl::InfiniteFuture();
  // Set by Enqueue.
  absl::Time enqueue_time;
  // Where the row's result goes, and its index in the request.
  std::shared_ptr<PendingRequest> request;
  int64_t index = 0;
  // The tenant's weight in the share of each batch (>= 1; the tenants
  // file's batch_weight). Rows of one tenant carry the same weight.
  int64_t tenant_weight = 1;

  int64_t length() const { return static_cast<int64_t>(input_ids.size()); }
};

// Fails `expired` rows with DEADLINE_EXCEEDED, having first reported them to
// `observer` (OnDropped; may be null), so that a caller woken by the error
// finds its rows counted. Used by the batcher before a batch is formed and
// by RunBatchFn just before computing.
void FailExpiredRows(const std::vector<BatchRow*>& expired, ServingObserver* observer);

class DynamicBatcher {
 public:
  struct Options {
    // Most rows per batch (>= 1).
    int64_t max_batch_size = 32;
    // How long the oldest row may wait for more rows (>= 0).
    int64_t max_queue_delay_us = 2000;
    // Batches handed on and not yet done before the batcher holds rows back
    // (>= 1). 2 keeps the device fed: one running, one ready.
    int max_inflight_batches = 2;
    // Optional: OnDropped for expired rows.
    ServingObserver* observer = nullptr;
  };
  // Receives a formed batch (1..max_batch_size rows). `done` must be called
  // exactly once, from any thread, when the batch no longer occupies an
  // in-flight slot (usually after it ran). Every row must be completed or
  // failed on its request.
  using RunBatchFn = std::function<void(std::vector<BatchRow> rows, std::function<void()> done)>;

  // INVALID_ARGUMENT for out-of-range options or a null run_batch.
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(Options options, RunBatchFn run_batch);
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues rows (each with a request and deadline). UNAVAILABLE after
  // Shutdown() began; the rows are then not queued.
  absl::Status Enqueue(std::vector<BatchRow> rows);

  void Shutdown();

  // Rows waiting to be batched.
  int64_t queued_rows() const;

 private:
  DynamicBatcher(Options options, RunBatchFn run_batch);
  void Loop();
  // Fails (FailExpiredRows) and removes the rows whose deadline is before
  // `now`.
  void DropExpiredLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes and returns the next batch (see the header comment).
  std::vector<BatchRow> TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BatchDone();

  const Options options_;
  const RunBatchFn run_batch_;

  // Protects the queue, the in-flight count and the stopping flag.
  mutable absl::Mutex mu_;
  absl::CondVar cv_;                                 // signalled on every change the loop waits for
  std::deque<BatchRow> queue_ ABSL_GUARDED_BY(mu_);  // arrival order
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_DYNAMIC_BATCHER_H_
