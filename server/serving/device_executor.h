// DeviceExecutor: the one thread that owns the device (docs/ARCHITECTURE.md, "server/serving").
// Inference batches and training micro-batches share it.
//
// Work:
//   - SubmitInference(fn): queues an inference batch; returns at once.
//   - RunTraining(fn): queues one training micro-batch and blocks the caller
//     until fn ran on the executor thread; returns fn's status. It has the
//     signature of TrainerHooks::run_on_device / JobRunner::Options::
//     run_on_device, so a server passes
//       [&](const auto& fn) { return engine.executor().RunTraining(fn); }
//     Called from the executor thread itself (from inside a work item) it
//     runs fn inline.
//   Each kind runs in FIFO order.
//
// Scheduling rule (a deficit counter). Inference has priority, but while
// training work is pending it keeps at least min_training_share s of the
// device's busy time. With r = s / (1 - s), the executor keeps a debt D owed
// to training (in seconds, starting at 0):
//   - only one kind pending: run it;
//   - both pending: run training if D > 0, else inference;
//   - after an inference item of t seconds during which training was pending
//     (at its start or at its end): D += r * t;
//   - after a training item of t seconds during which inference was pending
//     (at its start or at its end): D -= t.
// Work run while the other kind is absent changes nothing, so neither kind
// banks credit across idle periods. Over a contended stretch training gets a
// share s of the busy time, within one work item; s = 0 means inference
// always first, s = 1 training always first. Serving latency is bounded by
// one training micro-batch when D <= 0. Times come from Options::clock.
//
// Shutdown(): new work fails with UNAVAILABLE; queued inference batches still
// run; queued training work fails with UNAVAILABLE (fn not run; the job
// runner preempts or resumes it later); then the thread is joined. The
// destructor calls it.
//
// Thread safety: thread-safe. Work items must not throw (LibTorch errors are
// to be converted inside them).
#ifndef ADAPTERD_SERVER_SERVING_DEVICE_EXECUTOR_H_
#define ADAPTERD_SERVER_SERVING_DEVICE_EXECUTOR_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/serving/serving_observer.h"

namespace adapterd::serving {

class DeviceExecutor {
 public:
  struct Options {
    // Least share of busy time training keeps while it is pending, in [0, 1].
    double min_training_share = 0.25;
    // Optional: OnExecutorBusy after every item.
    ServingObserver* observer = nullptr;
    // Measures busy time; null = absl::Now. Tests inject a fake clock that
    // the work items advance, which makes the schedule deterministic.
    std::function<absl::Time()> clock;
  };

  struct Stats {
    double inference_busy_seconds = 0;
    double training_busy_seconds = 0;
    int64_t inference_batches = 0;  // inference items run
    int64_t training_runs = 0;      // training items run
    int64_t pending_inference = 0;
    int64_t pending_training = 0;
  };

  // INVALID_ARGUMENT when min_training_share is outside [0, 1]. Starts the
  // thread.
  static absl::StatusOr<std::unique_ptr<DeviceExecutor>> Create(Options options);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  // UNAVAILABLE after Shutdown() began (fn is then not run).
  absl::Status SubmitInference(std::function<void()> fn);
  // See the header comment. UNAVAILABLE after Shutdown() began.
  absl::Status RunTraining(const std::function<absl::Status()>& fn);

  void Shutdown();

  Stats stats() const;
  // True on the executor thread.
  bool OnExecutorThread() const;

 private:
  // A training item lives on its caller's stack until `done`.
  struct TrainingItem {
    const std::function<absl::Status()>* fn = nullptr;
    absl::Status result;
    bool done = false;
  };

  explicit DeviceExecutor(Options options);
  void Loop();
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }

  const Options options_;
  // training debt gained per second of contended inference: s / (1 - s).
  const double debt_rate_;

  // Protects the queues, the debt, the counters and the stopping flag.
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> inference_ ABSL_GUARDED_BY(mu_);
  std::deque<TrainingItem*> training_ ABSL_GUARDED_BY(mu_);
  double debt_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_DEVICE_EXECUTOR_H_
