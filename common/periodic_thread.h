// PeriodicThread: runs a function on its own thread every `interval` (the
// first run one interval after construction), and as soon as possible after
// Trigger(). Runs never overlap; a Trigger() during a run makes one more
// run right after it. Used for the server's scheduled backups
// (server/backup_scheduler.h) and heap releases (ReleaseFreeHeap).
//
//   PeriodicThread t(absl::Minutes(1), [] { Housekeeping(); });
//
// Thread safety: Trigger() from any thread. Ownership: owns its thread and
// the function; the destructor stops the thread, waiting for a run in
// progress, so whatever the function uses must outlive the PeriodicThread.
#ifndef ADAPTERD_COMMON_PERIODIC_THREAD_H_
#define ADAPTERD_COMMON_PERIODIC_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace adapterd {

class PeriodicThread {
 public:
  // An interval of zero or less runs `fn` only when triggered.
  PeriodicThread(absl::Duration interval, std::function<void()> fn);
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Runs the function as soon as possible (asynchronously).
  void Trigger();

 private:
  void Loop();

  const absl::Duration interval_;
  const std::function<void()> fn_;
  absl::Mutex mu_;  // guards the two flags
  bool triggered_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_PERIODIC_THREAD_H_
