#include "server/backup_scheduler.h"

#include <cstdio>

#include "absl/time/clock.h"

namespace adapterd {

BackupScheduler::BackupScheduler(Options options)
    : options_(std::move(options)), thread_(options_.interval, [this] { TakeBackup(); }) {}

BackupScheduler::~BackupScheduler() = default;

void BackupScheduler::TriggerNow() { thread_.Trigger(); }

void BackupScheduler::TakeBackup() {
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

}  // namespace adapterd
