#include "server/serving/device_executor.h"

#include <limits>
#include <utility>

namespace adapterd::serving {

absl::StatusOr<std::unique_ptr<DeviceExecutor>> DeviceExecutor::Create(Options options) {
  if (!(options.min_training_share >= 0 && options.min_training_share <= 1)) {
    return absl::InvalidArgumentError("min_training_share must be in [0, 1]");
  }
  return std::unique_ptr<DeviceExecutor>(new DeviceExecutor(std::move(options)));
}

DeviceExecutor::DeviceExecutor(Options options)
    : options_(std::move(options)),
      debt_rate_(options_.min_training_share >= 1 ? std::numeric_limits<double>::infinity()
                                                  : options_.min_training_share / (1 - options_.min_training_share)) {
  thread_ = std::thread([this] { Loop(); });
}

DeviceExecutor::~DeviceExecutor() { Shutdown(); }

bool DeviceExecutor::OnExecutorThread() const { return std::this_thread::get_id() == thread_.get_id(); }

absl::Status DeviceExecutor::SubmitInference(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the device executor is shut down");
  inference_.push_back(std::move(fn));
  ++stats_.pending_inference;
  return absl::OkStatus();
}

absl::Status DeviceExecutor::RunTraining(const std::function<absl::Status()>& fn) {
  if (OnExecutorThread()) return fn();
  TrainingItem item;
  item.fn = &fn;
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the device executor is shut down");
  training_.push_back(&item);
  ++stats_.pending_training;
  mu_.Await(absl::Condition(&item.done));
  return item.result;
}

void DeviceExecutor::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

DeviceExecutor::Stats DeviceExecutor::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void DeviceExecutor::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](DeviceExecutor* e)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->stopping_ || !e->inference_.empty() || !e->training_.empty(); },
        this));
    if (stopping_) {
      for (TrainingItem* item : training_) {
        item->result = absl::UnavailableError("the device executor shut down before the training work ran");
        item->done = true;
      }
      stats_.pending_training -= static_cast<int64_t>(training_.size());
      training_.clear();
      if (inference_.empty()) return;
    }
    const bool both_at_start = !inference_.empty() && !training_.empty();
    const bool run_training =
        inference_.empty() ||
        (!training_.empty() && (debt_rate_ == std::numeric_limits<double>::infinity() || debt_seconds_ > 0));
    std::function<void()> inference;
    TrainingItem* training = nullptr;
    if (run_training) {
      training = training_.front();
      training_.pop_front();
      --stats_.pending_training;
    } else {
      inference = std::move(inference_.front());
      inference_.pop_front();
      --stats_.pending_inference;
    }

    mu_.Unlock();
    const absl::Time start = Now();
    absl::Status result;
    if (training != nullptr) {
      result = (*training->fn)();
    } else {
      inference();
      inference = nullptr;  // release what the batch captured off the lock
    }
    const double seconds = absl::ToDoubleSeconds(Now() - start);
    if (options_.observer != nullptr) {
      options_.observer->OnExecutorBusy(training != nullptr ? WorkKind::kTraining : WorkKind::kInference, seconds);
    }
    mu_.Lock();

    if (training != nullptr) {
      training->result = std::move(result);
      training->done = true;
      stats_.training_busy_seconds += seconds;
      ++stats_.training_runs;
      if (both_at_start || !inference_.empty()) debt_seconds_ -= seconds;
    } else {
      stats_.inference_busy_seconds += seconds;
      ++stats_.inference_batches;
      if ((both_at_start || !training_.empty()) && debt_rate_ > 0) {
        debt_seconds_ += debt_rate_ == std::numeric_limits<double>::infinity() ? seconds : debt_rate_ * seconds;
      }
    }
  }
}

}  // namespace adapterd::serving
