#include "server/serving/pending_request.h"

#include <utility>

namespace adapterd::serving {

PendingRequest::PendingRequest(int64_t rows)
    : results_(static_cast<size_t>(rows)), row_done_(static_cast<size_t>(rows), false) {}

void PendingRequest::Complete(int64_t row, std::vector<float> probabilities) {
  absl::MutexLock lock(&mu_);
  results_[static_cast<size_t>(row)] = std::move(probabilities);
  row_done_[static_cast<size_t>(row)] = true;
  ++finished_;
  cv_.SignalAll();
}

void PendingRequest::Fail(int64_t row, absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = std::move(status);
  row_done_[static_cast<size_t>(row)] = true;
  ++finished_;
  cv_.SignalAll();
}

absl::StatusOr<std::vector<std::vector<float>>> PendingRequest::Wait() {
  absl::MutexLock lock(&mu_);
  while (finished_ < static_cast<int64_t>(results_.size())) cv_.Wait(&mu_);
  if (!status_.ok()) return status_;
  return std::move(results_);
}

bool PendingRequest::done() const {
  absl::MutexLock lock(&mu_);
  return finished_ >= static_cast<int64_t>(results_.size());
}

int64_t PendingRequest::finished() const {
  absl::MutexLock lock(&mu_);
  return finished_;
}

bool PendingRequest::RowsDoneLocked(int64_t first, int64_t n) const {
  for (int64_t r = first; r < first + n; ++r) {
    if (!row_done_[static_cast<size_t>(r)]) return false;
  }
  return true;
}

absl::Status PendingRequest::WaitForRowsOrFinished(int64_t first, int64_t n, int64_t finished_at_least) {
  absl::MutexLock lock(&mu_);
  while (status_.ok() && finished_ < finished_at_least && !RowsDoneLocked(first, n)) cv_.Wait(&mu_);
  return status_;
}

std::optional<std::vector<std::vector<float>>> PendingRequest::TakeIfDone(int64_t first, int64_t n) {
  absl::MutexLock lock(&mu_);
  if (!status_.ok() || !RowsDoneLocked(first, n)) return std::nullopt;
  std::vector<std::vector<float>> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t r = first; r < first + n; ++r) out.push_back(std::move(results_[static_cast<size_t>(r)]));
  return out;
}

}  // namespace adapterd::serving
