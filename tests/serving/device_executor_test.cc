// DeviceExecutor: one thread, inference priority, the training share under
// contention (a fake clock makes the schedule exact), inline re-entry and
// shutdown.
#include "server/serving/device_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"

namespace adapterd::serving {
namespace {

using ::adapterd::testing::StatusIs;

// Work items advance this clock by their nominal duration.
class FakeClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ = absl::UnixEpoch();
};

// The order in which work ran: 'I' inference, 'T' training.
class Order {
 public:
  void Add(char c) {
    absl::MutexLock lock(&mu_);
    s_.push_back(c);
  }
  std::string Get() {
    absl::MutexLock lock(&mu_);
    return s_;
  }

 private:
  absl::Mutex mu_;
  std::string s_;
};

// Waits (bounded) until the executor reports the given pending counts.
void AwaitPending(const DeviceExecutor& ex, int64_t inference, int64_t training) {
  for (int i = 0; i < 20000; ++i) {
    const DeviceExecutor::Stats s = ex.stats();
    if (s.pending_inference == inference && s.pending_training == training) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
  FAIL() << "executor never had " << inference << " inference and " << training << " training items pending";
}

struct Contended {
  std::string order;
};

// Blocks the executor, queues `n_inference` inference items and `n_training`
// training items (one caller thread each), releases it and returns the order
// in which they ran. Each item advances the fake clock by one second.
Contended RunContended(double share, int n_inference, int n_training) {
  FakeClock clock;
  Order order;
  DeviceExecutor::Options o;
  o.min_training_share = share;
  o.clock = [&clock] { return clock.Now(); };
  auto ex = DeviceExecutor::Create(std::move(o));
  EXPECT_TRUE(ex.ok());
  absl::Notification started, release;
  EXPECT_OK((*ex)->SubmitInference([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  std::vector<std::thread> trainers;
  for (int i = 0; i < n_training; ++i) {
    trainers.emplace_back([&] {
      EXPECT_OK((*ex)->RunTraining([&] {
        order.Add('T');
        clock.Advance(absl::Seconds(1));
        return absl::OkStatus();
      }));
    });
  }
  for (int i = 0; i < n_inference; ++i) {
    EXPECT_OK((*ex)->SubmitInference([&] {
      order.Add('I');
      clock.Advance(absl::Seconds(1));
    }));
  }
  AwaitPending(**ex, n_inference, n_training);
  release.Notify();
  for (std::thread& t : trainers) t.join();
  (*ex)->Shutdown();
  return {order.Get()};
}

TEST(DeviceExecutor, RunTrainingRunsOnTheExecutorThreadAndReturnsItsStatus) {
  ASSERT_OK_AND_ASSIGN(auto ex, DeviceExecutor::Create({}));
  bool on_thread = false;
  EXPECT_THAT(ex->RunTraining([&] {
    on_thread = ex->OnExecutorThread();
    return absl::DataLossError("step failed");
  }),
              StatusIs(absl::StatusCode::kDataLoss, "step failed"));
  EXPECT_TRUE(on_thread);
  EXPECT_FALSE(ex->OnExecutorThread());
  EXPECT_EQ(ex->stats().training_runs, 1);
}

TEST(DeviceExecutor, RunTrainingFromAWorkItemRunsInline) {
  ASSERT_OK_AND_ASSIGN(auto ex, DeviceExecutor::Create({}));
  absl::Notification done;
  absl::Status inner = absl::UnknownError("not run");
  ASSERT_OK(ex->SubmitInference([&] {
    inner = ex->RunTraining([] { return absl::OkStatus(); });
    done.Notify();
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_OK(inner);
}

TEST(DeviceExecutor, InferenceHasPriorityWhenTrainingShareIsZero) {
  const Contended c = RunContended(0.0, 4, 2);
  EXPECT_EQ(c.order, "IIIITT");
}

TEST(DeviceExecutor, TrainingAlwaysFirstWhenShareIsOne) {
  const Contended c = RunContended(1.0, 3, 2);
  EXPECT_EQ(c.order, "TTIII");
}

// While both kinds are pending, every prefix of the schedule gives training
// its share of busy time to within one item (the documented guarantee).
TEST(DeviceExecutor, TrainingKeepsItsShareUnderContention) {
  for (double share : {0.25, 0.5, 0.75}) {
    SCOPED_TRACE(share);
    const int n_training = 6;
    const int n_inference = 30;
    const Contended c = RunContended(share, n_inference, n_training);
    ASSERT_EQ(c.order.size(), static_cast<size_t>(n_inference + n_training));
    int training = 0, inference = 0;
    for (char k : c.order) {
      if (training == n_training || inference == n_inference) break;  // contention over
      (k == 'T' ? training : inference) += 1;
      const int n = training + inference;
      EXPECT_LE(std::abs(training - share * n), 1.0 + 1e-9) << "after " << n << " items: " << c.order;
    }
    EXPECT_EQ(training, n_training) << c.order;  // all training ran before inference ran out
  }
}

TEST(DeviceExecutor, ShutdownRunsQueuedInferenceFailsQueuedTrainingAndRejectsNewWork) {
  ASSERT_OK_AND_ASSIGN(auto ex, DeviceExecutor::Create({.min_training_share = 0.0}));
  absl::Notification started, release;
  ASSERT_OK(ex->SubmitInference([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  std::atomic<int> inference_ran{0};
  std::atomic<bool> training_ran{false};
  ASSERT_OK(ex->SubmitInference([&] { ++inference_ran; }));
  absl::Status training_status;
  std::thread trainer([&] {
    training_status = ex->RunTraining([&] {
      training_ran = true;
      return absl::OkStatus();
    });
  });
  AwaitPending(*ex, 1, 1);
  std::thread stopper([&] { ex->Shutdown(); });
  // Shutdown refuses new work as soon as it begins.
  absl::Status late = absl::OkStatus();
  for (int i = 0; i < 20000 && late.ok(); ++i) {
    late = ex->SubmitInference([] {});
    if (late.ok()) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kUnavailable));
  release.Notify();
  stopper.join();
  trainer.join();
  EXPECT_EQ(inference_ran.load(), 1);
  EXPECT_FALSE(training_ran.load());
  EXPECT_THAT(training_status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(ex->RunTraining([] { return absl::OkStatus(); }), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(DeviceExecutor, CreateRejectsAShareOutsideZeroToOne) {
  EXPECT_THAT(DeviceExecutor::Create({.min_training_share = -0.1}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DeviceExecutor::Create({.min_training_share = 1.5}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd::serving
