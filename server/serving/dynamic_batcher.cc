#include "server/serving/dynamic_batcher.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
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

namespace {

// Of `lengths`, the `k` positions whose lengths lie closest together among
// those that include position `oldest`: sorted by length (ties in position
// order), the window of k consecutive entries containing `oldest` with the
// smallest spread. Cuts padding without ever passing over the oldest.
std::vector<size_t> PickWindow(const std::vector<int64_t>& lengths, size_t k, size_t oldest) {
  const size_t n = lengths.size();
  if (k == 0) return {};
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (k >= n) return order;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t c) { return lengths[a] < lengths[c]; });
  const size_t at = static_cast<size_t>(std::find(order.begin(), order.end(), oldest) - order.begin());
  const size_t first = at >= k - 1 ? at - (k - 1) : 0;
  const size_t last = std::min(at, n - k);
  size_t best = first;
  const auto spread = [&](size_t s) { return lengths[order[s + k - 1]] - lengths[order[s]]; };
  for (size_t s = first; s <= last; ++s) {
    if (spread(s) < spread(best)) best = s;
  }
  return std::vector<size_t>(order.begin() + static_cast<std::ptrdiff_t>(best),
                             order.begin() + static_cast<std::ptrdiff_t>(best + k));
}

// Weighted max-min fair shares of `capacity` among `demands` (water
// filling): demand i gets min(demand_i, floor(weight_i * L)) for the highest
// level L at which the shares fit; the slots left, fewer than the demands
// not met, go one each to the candidates `extra` picks among those (their
// positions, in order). Weights are >= 1; equal weights give plain max-min
// fairness.
std::vector<size_t> FairShares(const std::vector<size_t>& demands, const std::vector<int64_t>& weights, size_t capacity,
                               const std::function<std::vector<size_t>(const std::vector<size_t>&, size_t)>& extra) {
  // Demands in the order their level (demand / weight) is reached.
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), 0);
  const auto level_of = [&](size_t i) { return static_cast<double>(demands[i]) / static_cast<double>(weights[i]); };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return level_of(a) < level_of(b); });
  double met = 0, weight_left = 0;  // demands met in full; the weight of the rest
  for (int64_t w : weights) weight_left += static_cast<double>(w);
  double level = std::numeric_limits<double>::infinity();
  for (size_t i : order) {
    if (met + weight_left * level_of(i) > static_cast<double>(capacity)) {
      level = (static_cast<double>(capacity) - met) / weight_left;
      break;
    }
    met += static_cast<double>(demands[i]);
    weight_left -= static_cast<double>(weights[i]);
  }
  std::vector<size_t> shares(demands.size());
  size_t given = 0;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < demands.size(); ++i) {
    const double fair = std::floor(static_cast<double>(weights[i]) * level);
    shares[i] = fair >= static_cast<double>(demands[i]) ? demands[i] : static_cast<size_t>(fair);
    given += shares[i];
    if (demands[i] > shares[i]) candidates.push_back(i);
  }
  if (given < capacity && !candidates.empty()) {
    for (size_t c : extra(candidates, std::min(capacity - given, candidates.size()))) ++shares[candidates[c]];
  }
  return shares;
}

}  // namespace

std::vector<BatchRow> DynamicBatcher::TakeBatchLocked() {
  const size_t n = queue_.size();
  const size_t b = static_cast<size_t>(options_.max_batch_size);
  std::vector<BatchRow> batch;
  if (n <= b) {
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
    queue_.clear();
    return batch;
  }
  // Queue positions by tenant, then by request, each in order of its oldest
  // row (the queue is in arrival order).
  struct Request {
    std::vector<size_t> rows;
  };
  struct Tenant {
    std::vector<Request> requests;
    std::map<const PendingRequest*, size_t> index;
    size_t rows = 0;
    int64_t weight = 1;
  };
  std::vector<Tenant> tenants;
  std::map<std::string_view, size_t> tenant_index;
  for (size_t i = 0; i < n; ++i) {
    const BatchRow& row = queue_[i];
    const std::string_view tenant = row.adapter != nullptr ? std::string_view(row.adapter->tenant) : "";
    auto [t, new_tenant] = tenant_index.emplace(tenant, tenants.size());
    if (new_tenant) tenants.emplace_back();
    Tenant& te = tenants[t->second];
    te.weight = std::max<int64_t>(1, row.tenant_weight);  // the newest row's: a reload applies at once
    auto [r, new_request] = te.index.emplace(row.request.get(), te.requests.size());
    if (new_request) te.requests.emplace_back();
    te.requests[r->second].rows.push_back(i);
    ++te.rows;
  }
  // Tenants share the batch max-min fairly, in proportion to their weights;
  // slots that do not divide evenly go to the tenants waiting longest.
  std::vector<size_t> tenant_demand;
  std::vector<int64_t> tenant_weight;
  for (const Tenant& t : tenants) {
    tenant_demand.push_back(t.rows);
    tenant_weight.push_back(t.weight);
  }
  const auto oldest_first = [](const std::vector<size_t>&, size_t k) {
    std::vector<size_t> first(k);
    std::iota(first.begin(), first.end(), 0);
    return first;
  };
  const std::vector<size_t> tenant_share = FairShares(tenant_demand, tenant_weight, b, oldest_first);
  std::vector<bool> taken(n, false);
  for (size_t t = 0; t < tenants.size(); ++t) {
    const std::vector<Request>& requests = tenants[t].requests;
    // A tenant's requests share its slots alike; the slots left go to the
    // requests whose first rows are closest in length around the oldest.
    std::vector<size_t> request_demand;
    std::vector<int64_t> first_length;  // of each request's oldest row
    for (const Request& r : requests) {
      request_demand.push_back(r.rows.size());
      first_length.push_back(queue_[r.rows.front()].length());
    }
    const auto nearest_in_length = [&](const std::vector<size_t>& candidates, size_t k) {
      std::vector<int64_t> lengths;
      lengths.reserve(candidates.size());
      for (size_t c : candidates) lengths.push_back(first_length[c]);
      return PickWindow(lengths, k, 0);
    };
    const std::vector<size_t> share =
        FairShares(request_demand, std::vector<int64_t>(requests.size(), 1), tenant_share[t], nearest_in_length);
    // Within a request, its rows closest in length around its oldest.
    for (size_t r = 0; r < requests.size(); ++r) {
      std::vector<int64_t> lengths;
      for (size_t i : requests[r].rows) lengths.push_back(queue_[i].length());
      for (size_t w : PickWindow(lengths, share[r], 0)) taken[requests[r].rows[w]] = true;
    }
  }
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
