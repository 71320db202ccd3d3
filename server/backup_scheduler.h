// BackupScheduler: online database backups on a schedule, and on demand
// (SIGUSR1 in main.cc), while the server serves and trains
// (storage/backup.h for what a backup is; docs/DEPLOYMENT.md for the
// procedure). One backup runs at a time; a trigger during a backup runs one
// more right after it.
//
// Thread safety: TriggerNow() from any thread. Ownership: the Database is
// borrowed and must outlive the scheduler; destroying the scheduler waits
// for a backup in progress.
#ifndef ADAPTERD_SERVER_BACKUP_SCHEDULER_H_
#define ADAPTERD_SERVER_BACKUP_SCHEDULER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/periodic_thread.h"
#include "storage/backup.h"

namespace adapterd {
namespace storage {
class Database;
}

class BackupScheduler {
 public:
  struct Options {
    storage::Database* db = nullptr;  // not owned
    std::string backup_dir;
    absl::Duration interval = absl::Hours(1);  // first backup one interval after start
    int keep = 7;
    // Called after every backup with its outcome and duration.
    std::function<void(const absl::StatusOr<storage::BackupInfo>&, absl::Duration)> on_backup;
  };
  explicit BackupScheduler(Options options);
  ~BackupScheduler();
  BackupScheduler(const BackupScheduler&) = delete;
  BackupScheduler& operator=(const BackupScheduler&) = delete;

  // Takes a backup as soon as possible (asynchronously).
  void TriggerNow();

 private:
  void TakeBackup();

  const Options options_;
  PeriodicThread thread_;  // last: runs TakeBackup, which reads options_
};

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_BACKUP_SCHEDULER_H_
