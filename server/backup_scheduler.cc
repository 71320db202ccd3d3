#include "server/backup_scheduler.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace adapterd {

BackupScheduler::BackupScheduler(Options options)
    : options_(std::move(options)), thread_(options_.interval, [this] { TakeBackup(); }) {}

BackupScheduler::~BackupScheduler() = default;

void BackupScheduler::TriggerNow() { thread_.Trigger(); }

void BackupScheduler::TakeBackup() {
  const absl::Time start = absl::Now();
  absl::StatusOr<storage::BackupInfo> info = storage::Backups::Create(*options_.db, options_.backup_dir, options_.keep);
  const absl::Duration took = absl::Now() - start;
  if (info.ok()) {
    LOG(INFO) << "backup " << info->id << " done in " << absl::StrFormat("%.2f", absl::ToDoubleSeconds(took)) << " s ("
              << info->size_bytes << " bytes, " << info->num_files << " files) in " << options_.backup_dir;
  } else {
    LOG(ERROR) << "backup failed after " << absl::StrFormat("%.2f", absl::ToDoubleSeconds(took))
               << " s: " << info.status();
  }
  if (options_.on_backup) options_.on_backup(info, took);
}

}  // namespace adapterd
