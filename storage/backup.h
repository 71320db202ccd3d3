// Backups: online, consistent backups of the adapterd database with RocksDB's
// BackupEngine, and their restore (docs/DEPLOYMENT.md, "Backup and restore").
//
// A backup directory holds RocksDB's meta/, private/ and shared_checksum/
// trees and one file of adapterd's own, kMetaChecksumsFile: the SHA-256 of
// every meta/<id> file, in sha256sum's format, written when the backup is
// taken. RocksDB checks every data file against its meta file (size and
// crc32c), but nothing checks the meta files themselves, and BackupEngine
// silently skips a meta file it cannot parse: a damaged newest backup would
// disappear from the list and "the newest" would quietly become an older
// one. So every call below first inspects the whole directory.
//
// Contract:
// - Inspect() reports every damaged file it can see without reading the data
//   files: a meta file RocksDB cannot parse, a meta file whose SHA-256
//   differs from kMetaChecksumsFile, a meta file kMetaChecksumsFile lists but
//   that is gone, and a kMetaChecksumsFile that does not parse. Meta files
//   of backups taken before kMetaChecksumsFile existed are trusted as
//   RocksDB parses them (and get a checksum at the next Create()).
// - Verify() re-reads data files too: every file of a backup, size and
//   checksum. Together with Inspect(), a bit flipped in any file of the
//   directory is found.
// - Create() runs on a live, open Database while reads and writes go on. The
//   backup is one point in time across every column family: live SST and
//   blob files plus the WAL are copied with file deletions held off, and the
//   WAL replays at restore to the last write before the backup began. Files
//   already in the backup directory are shared between backups (incremental).
//   After a successful backup, all but the newest `keep` are purged. Create()
//   refuses (FAILED_PRECONDITION, naming the damage) a directory Inspect()
//   finds damaged: RocksDB would garbage-collect the damaged backup's files
//   and keep numbering after it, and an operator must decide (Delete() the
//   damaged backup, or move the directory aside).
// - A failed or interrupted Create() leaves earlier backups intact; its
//   partial files are garbage-collected by the next Create().
// - Restore() writes a backup into a database directory that must not hold a
//   database yet (FAILED_PRECONDITION otherwise): restoring never overwrites
//   live state. It verifies the backup first (DATA_LOSS, nothing written) and
//   removes what it wrote if the restore fails. `id` 0 (the newest) is
//   refused while the directory is damaged: which backup is the newest is
//   then unknown, so the operator must name one. The restored database opens
//   without repair.
//
// Errors: NOT_FOUND for a missing directory or backup; DATA_LOSS naming the
// damaged file(s), relative to the backup directory ("meta/2").
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

// adapterd's checksums of the meta files, in the backup directory's root.
inline constexpr char kMetaChecksumsFile[] = "adapterd-meta.sha256";

struct BackupInfo {
  uint32_t id = 0;
  int64_t timestamp_seconds = 0;  // Unix time the backup was taken
  uint64_t size_bytes = 0;        // files of this backup (shared ones included)
  uint32_t num_files = 0;
};

// What Inspect() found.
struct BackupDirectory {
  // The backups whose metadata is intact, oldest first.
  std::vector<BackupInfo> backups;
  // One line per damaged file, naming it relative to the directory
  // ("meta/2: does not match its SHA-256 in adapterd-meta.sha256"); empty
  // when the directory is intact.
  std::vector<std::string> damage;
  // Ids of backups whose metadata is damaged or missing.
  std::vector<uint32_t> damaged_ids;
};

class Backups {
 public:
  // A new backup of `db` in `backup_dir` (created if missing); keeps the
  // newest `keep` (>= 1) backups.
  static absl::StatusOr<BackupInfo> Create(Database& db, const std::string& backup_dir, int keep);
  // The directory's backups and damage (see above). NOT_FOUND if
  // `backup_dir` does not exist.
  static absl::StatusOr<BackupDirectory> Inspect(const std::string& backup_dir);
  // Every backup, oldest first; DATA_LOSS naming the damage if Inspect()
  // finds any.
  static absl::StatusOr<std::vector<BackupInfo>> List(const std::string& backup_dir);
  // Checks backup `id` file by file, with checksums; `id` 0 checks every
  // backup. DATA_LOSS naming each damaged file, including the directory
  // damage Inspect() finds, whatever `id` is.
  static absl::StatusOr<std::vector<BackupInfo>> Verify(const std::string& backup_dir, uint32_t id);
  // Restores backup `id` into `db_path` (see above) and returns which one
  // was restored. `id` 0 = the newest, only while the directory is intact.
  static absl::StatusOr<BackupInfo> Restore(const std::string& backup_dir, uint32_t id, const std::string& db_path);
  // Deletes backup `id`, damaged or not, and the files only it used.
  static absl::Status Delete(const std::string& backup_dir, uint32_t id);
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_BACKUP_H_
