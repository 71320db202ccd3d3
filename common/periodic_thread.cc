#include "common/periodic_thread.h"

#include <utility>

namespace adapterd {

PeriodicThread::PeriodicThread(absl::Duration interval, std::function<void()> fn)
    : interval_(interval), fn_(std::move(fn)), thread_([this] { Loop(); }) {}

PeriodicThread::~PeriodicThread() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void PeriodicThread::Trigger() {
  absl::MutexLock lock(&mu_);
  triggered_ = true;
}

void PeriodicThread::Loop() {
  const absl::Duration wait = interval_ > absl::ZeroDuration() ? interval_ : absl::InfiniteDuration();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || triggered_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), wait);
      if (stop_) return;
      triggered_ = false;
    }
    fn_();
  }
}

}  // namespace adapterd
