// PeriodicThread: scheduled runs, triggered runs, no overlap, and a
// destructor that stops it. Waits are bounded; nothing asserts on time.
#include "common/periodic_thread.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace adapterd {
namespace {

// Counts runs; WaitFor(n) waits (bounded) until at least n happened.
class Runs {
 public:
  void Add() {
    absl::MutexLock l(&mu_);
    ++n_;
  }
  bool WaitFor(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return n_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(60));
  }
  int count() {
    absl::MutexLock l(&mu_);
    return n_;
  }

 private:
  absl::Mutex mu_;
  int n_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PeriodicThread, RunsEveryIntervalUntilDestroyed) {
  Runs runs;
  int at_destruction = 0;
  {
    PeriodicThread t(absl::Milliseconds(5), [&] { runs.Add(); });
    EXPECT_TRUE(runs.WaitFor(3));
  }
  at_destruction = runs.count();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(runs.count(), at_destruction);  // no run after the destructor returned
}

TEST(PeriodicThread, ATriggerRunsAtOnceWithoutAnInterval) {
  Runs runs;
  PeriodicThread t(absl::ZeroDuration(), [&] { runs.Add(); });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(runs.count(), 0);  // no interval: only triggers run it
  t.Trigger();
  EXPECT_TRUE(runs.WaitFor(1));
  t.Trigger();
  EXPECT_TRUE(runs.WaitFor(2));
}

TEST(PeriodicThread, ATriggerDuringARunMakesOneMoreRunAfterIt) {
  absl::Notification started, release;
  std::atomic<int> active{0}, most_active{0};
  Runs runs;
  PeriodicThread t(absl::InfiniteDuration(), [&] {
    const int now = ++active;
    if (now > most_active) most_active = now;
    if (!started.HasBeenNotified()) {
      started.Notify();
      release.WaitForNotification();
    }
    --active;
    runs.Add();
  });
  t.Trigger();
  started.WaitForNotification();
  t.Trigger();  // while the first run is blocked
  t.Trigger();  // folded into the same one extra run
  release.Notify();
  EXPECT_TRUE(runs.WaitFor(2));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(runs.count(), 2);
  EXPECT_EQ(most_active.load(), 1);  // runs never overlap
}

}  // namespace
}  // namespace adapterd
