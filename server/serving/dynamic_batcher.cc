#include "server/serving/dynamic_batcher.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/time/clock.h"

namespace adapterd::serving {

void FailExpiredRows(const std::vector<BatchRow*>& expired, ServingObserver* observer) {
  if (expired.empty()) return;
  if (observer != nullptr) observer->OnDropped(DropReason::kDeadline, static_cast<int64_t>(expired.size()));
  for (BatchRow* row : expired) {
    row->request->Fail(row->index, absl::DeadlineExceededError("deadline passed before the row was computed"));
  }
}

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(Options options, RunBatchFn run_batch) {
  if (options.max_batch_size < 1) return absl::InvalidArgumentError("max_batch_size must be >= 1");
  if (options.max_queue_delay_us < 0) return absl::InvalidArgumentError("max_queue_delay_us must be >= 0");
  if (options.max_inflight_batches < 1) {
    return absl::InvalidArgumentError("max_inflight_batches must be >= 1");
  }
  if (!run_batch) return absl::InvalidArgumentError("DynamicBatcher needs a RunBatchFn");
  return std::unique_ptr<DynamicBatcher>(new DynamicBatcher(std::move(options), std::move(run_batch)));
}

DynamicBatcher::DynamicBatcher(Options options, RunBatchFn run_batch)
    : options_(std::move(options)), run_batch_(std::move(run_batch)) {
  thread_ = std::thread([this] { Loop(); });
}

DynamicBatcher::~DynamicBatcher() { Shutdown(); }

absl::Status DynamicBatcher::Enqueue(std::vector<BatchRow> rows) {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the batcher is shutting down");
  for (BatchRow& row : rows) {
    row.enqueue_time = now;
    queue_.push_back(std::move(row));
  }
  cv_.Signal();
  return absl::OkStatus();
}

void DynamicBatcher::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cv_.Signal();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t DynamicBatcher::queued_rows() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

void DynamicBatcher::BatchDone() {
  absl::MutexLock lock(&mu_);
  --inflight_;
  cv_.Signal();
}

void DynamicBatcher::Loop() {
  const absl::Duration delay = absl::Microseconds(options_.max_queue_delay_us);
  absl::MutexLock lock(&mu_);
  while (!stopping_ || !queue_.empty()) {
    absl::Time wake = absl::InfiniteFuture();
    if (!queue_.empty() && inflight_ < options_.max_inflight_batches) {
      const absl::Time now = absl::Now();
      const absl::Time due = queue_.front().enqueue_time + delay;
      if (stopping_ || static_cast<int64_t>(queue_.size()) >= options_.max_batch_size || now >= due) {
        DropExpiredLocked(now);
        if (queue_.empty()) continue;
        std::vector<BatchRow> batch = TakeBatchLocked();
        ++inflight_;
        mu_.Unlock();
        run_batch_(std::move(batch), [this] { BatchDone(); });
        mu_.Lock();
        continue;
      }
      wake = due;
    }
    cv_.WaitWithDeadline(&mu_, wake);
  }
  while (inflight_ > 0) cv_.Wait(&mu_);
}

void DynamicBatcher::DropExpiredLocked(absl::Time now) {
  const auto expired = [now](const BatchRow& row) { return row.deadline < now; };
  std::vector<BatchRow*> rows;
  for (BatchRow& row : queue_) {
    if (expired(row)) rows.push_back(&row);
  }
  if (rows.empty()) return;
  FailExpiredRows(rows, options_.observer);
  std::erase_if(queue_, expired);
}

std::vector<BatchRow> DynamicBatcher::TakeBatchLocked() {
  const size_t n = queue_.size();
  const size_t b = static_cast<size_t>(options_.max_batch_size);
  std::vector<BatchRow> batch;
  if (n <= b) {
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    return batch;
  }
  // Queue positions sorted by length (ties in arrival order); the oldest row
  // is queue position 0.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t c) { return queue_[a].length() < queue_[c].length(); });
  const size_t oldest = static_cast<size_t>(std::find(order.begin(), order.end(), 0) - order.begin());
  const size_t first = oldest >= b - 1 ? oldest - (b - 1) : 0;
  const size_t last = std::min(oldest, n - b);
  size_t best = first;
  for (size_t s = first; s <= last; ++s) {
    const int64_t spread = queue_[order[s + b - 1]].length() - queue_[order[s]].length();
    const int64_t best_spread = queue_[order[best + b - 1]].length() - queue_[order[best]].length();
    if (spread < best_spread) best = s;
  }
  std::vector<bool> taken(n, false);
  for (size_t i = best; i < best + b; ++i) taken[order[i]] = true;
  std::deque<BatchRow> kept;
  for (size_t i = 0; i < n; ++i) {
    if (taken[i]) {
      batch.push_back(std::move(queue_[i]));
    } else {
      kept.push_back(std::move(queue_[i]));
    }
  }
  queue_ = std::move(kept);
  return batch;
}

}  // namespace adapterd::serving
