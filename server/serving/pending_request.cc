#include "server/serving/pending_request.h"

#include <utility>

namespace adapterd::serving {

PendingRequest::PendingRequest(int64_t rows) : results_(static_cast<size_t>(rows)), remaining_(rows) {}

void PendingRequest::Complete(int64_t row, std::vector<float> probabilities) {
  absl::MutexLock lock(&mu_);
  results_[static_cast<size_t>(row)] = std::move(probabilities);
  --remaining_;
}

void PendingRequest::Fail(int64_t row, absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (status_.ok()) status_ = std::move(status);
  --remaining_;
}

absl::StatusOr<std::vector<std::vector<float>>> PendingRequest::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int64_t* remaining) { return *remaining <= 0; }, &remaining_));
  if (!status_.ok()) return status_;
  return std::move(results_);
}

bool PendingRequest::done() const {
  absl::MutexLock lock(&mu_);
  return remaining_ <= 0;
}

}  // namespace adapterd::serving
