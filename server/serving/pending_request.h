// PendingRequest: the completion state of one Predict's rows. The rows may be
// computed in different batches, in any order; the request is done when every
// row has completed or failed. The first failure decides the request's status.
//
// A request may hand its rows to the batcher a few at a time and take each
// text's outputs as soon as that text's rows are done (InferenceEngine plans
// and queues rows incrementally): Finished, WaitForRowsOrFinished and
// TakeIfDone serve that; Wait takes every row's outputs at once.
//
// Thread safety: thread-safe; Complete/Fail are called from the batcher and
// executor threads, the waiting and taking methods from the request's thread.
// Shared as std::shared_ptr<PendingRequest> by the request and its queued
// rows.
#ifndef ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_
#define ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace adapterd::serving {

class PendingRequest {
 public:
  // A request of `rows` rows in all (indices 0 .. rows-1).
  explicit PendingRequest(int64_t rows);
  PendingRequest(const PendingRequest&) = delete;
  PendingRequest& operator=(const PendingRequest&) = delete;

  // Row `row` finished with its outputs (what its task's kind decodes:
  // InferenceEngine). Each row must be completed or failed exactly once.
  void Complete(int64_t row, std::vector<float> outputs);
  void Fail(int64_t row, absl::Status status);

  // Blocks until every row is done. The first row failure, or every row's
  // outputs in row order.
  absl::StatusOr<std::vector<std::vector<float>>> Wait();
  bool done() const;

  // Rows completed or failed so far.
  int64_t finished() const;
  // Blocks until rows [first, first + n) are all done, or at least
  // `finished_at_least` rows are, or a row has failed: OK, or the first
  // failure.
  absl::Status WaitForRowsOrFinished(int64_t first, int64_t n, int64_t finished_at_least);
  // Rows [first, first + n)'s outputs, moved out (each row's may be taken
  // once), when they are all done and none of the request's rows failed;
  // nullopt otherwise.
  std::optional<std::vector<std::vector<float>>> TakeIfDone(int64_t first, int64_t n);

 private:
  bool RowsDoneLocked(int64_t first, int64_t n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Protects the results, the rows' done flags, the first error and the
  // count of finished rows.
  mutable absl::Mutex mu_;
  absl::CondVar cv_;  // signalled by every Complete and Fail
  std::vector<std::vector<float>> results_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> row_done_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_
