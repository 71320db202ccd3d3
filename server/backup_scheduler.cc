#include "server/backup_scheduler.h"

#include <cstdio>

#include "absl/time/clock.h"

namespace adapterd {

BackupScheduler::BackupScheduler(Options options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

BackupScheduler::~BackupScheduler() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void BackupScheduler::TriggerNow() {
  absl::MutexLock lock(&mu_);
  triggered_ = true;
}

void BackupScheduler::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || triggered_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), options_.interval);
      if (stop_) return;
      triggered_ = false;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<storage::BackupInfo> info =
        storage::Backups::Create(*options_.db, options_.backup_dir, options_.keep);
    const absl::Duration took = absl::Now() - start;
    if (info.ok()) {
      std::fprintf(stderr, "adapterd: backup %u done in %.2f s (%llu bytes, %u files) in %s\n", info->id,
                   absl::ToDoubleSeconds(took), static_cast<unsigned long long>(info->size_bytes), info->num_files,
                   options_.backup_dir.c_str());
    } else {
      std::fprintf(stderr, "adapterd: backup failed after %.2f s: %s\n", absl::ToDoubleSeconds(took),
                   info.status().ToString().c_str());
    }
    if (options_.on_backup) options_.on_backup(info, took);
  }
}

}  // namespace adapterd
