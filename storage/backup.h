// Backups: online, consistent backups of the adapterd database with RocksDB's
// BackupEngine, and their restore (docs/DEPLOYMENT.md, "Backup and restore").
//
// Contract:
// - Create() runs on a live, open Database while reads and writes go on. The
//   backup is one point in time across every column family: live SST and
//   blob files plus the WAL are copied with file deletions held off, and the
//   WAL replays at restore to the last write before the backup began. Files
//   already in the backup directory are shared between backups (incremental).
//   After a successful backup, all but the newest `keep` are purged.
// - A failed or interrupted Create() leaves earlier backups intact; its
//   partial files are garbage-collected by the next Create().
// - Restore() writes a backup into a database directory that must not hold a
//   database yet (FAILED_PRECONDITION otherwise): restoring never overwrites
//   live state. The restored database opens without repair.
// - Verify() re-reads every file of a backup and checks sizes and checksums;
//   DATA_LOSS names what is wrong.
//
// Thread safety: each call opens its own BackupEngine. Calls for one
// backup directory must not overlap (the server runs one backup at a time);
// the Database may be used concurrently by other threads.
#ifndef ADAPTERD_STORAGE_BACKUP_H_
#define ADAPTERD_STORAGE_BACKUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace adapterd::storage {

class Database;

struct BackupInfo {
  uint32_t id = 0;
  int64_t timestamp_seconds = 0;  // Unix time the backup was taken
  uint64_t size_bytes = 0;        // files of this backup (shared ones included)
  uint32_t num_files = 0;
};

class Backups {
 public:
  // A new backup of `db` in `backup_dir` (created if missing); keeps the
  // newest `keep` (>= 1) backups.
  static absl::StatusOr<BackupInfo> Create(Database& db, const std::string& backup_dir, int keep);
  // Every intact backup, oldest first. NOT_FOUND if `backup_dir` does not
  // exist.
  static absl::StatusOr<std::vector<BackupInfo>> List(const std::string& backup_dir);
  // Checks backup `id` (0 = the newest) file by file, with checksums.
  static absl::StatusOr<BackupInfo> Verify(const std::string& backup_dir, uint32_t id);
  // Restores backup `id` (0 = the newest) into `db_path` (see above) and
  // returns which one was restored.
  static absl::StatusOr<BackupInfo> Restore(const std::string& backup_dir, uint32_t id, const std::string& db_path);
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_BACKUP_H_
