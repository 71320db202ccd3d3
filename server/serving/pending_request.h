// PendingRequest: the completion state of one Predict's rows. The rows may be
// computed in different batches, in any order; the request is done when every
// row has completed or failed. The first failure decides the request's status.
//
// Thread safety: thread-safe; Complete/Fail are called from the batcher and
// executor threads, Wait from the request's thread. Shared as
// std::shared_ptr<PendingRequest> by the request and its queued rows.
#ifndef ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_
#define ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace adapterd::serving {

class PendingRequest {
 public:
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

 private:
  // Protects the results, the first error and the count of unfinished rows.
  mutable absl::Mutex mu_;
  std::vector<std::vector<float>> results_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t remaining_ ABSL_GUARDED_BY(mu_);
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_PENDING_REQUEST_H_
