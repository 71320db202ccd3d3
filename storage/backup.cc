#include "storage/backup.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>

#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/database.h"
#include "storage/rocks_status.h"

namespace adapterd::storage {
namespace {

BackupInfo ToInfo(const rocksdb::BackupInfo& r) {
  BackupInfo b;
  b.id = r.backup_id;
  b.timestamp_seconds = r.timestamp;
  b.size_bytes = r.size;
  b.num_files = r.number_files;
  return b;
}

absl::Status MustExist(const std::string& backup_dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(backup_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("backup directory '", backup_dir, "' does not exist"));
  }
  return absl::OkStatus();
}

template <typename Engine>
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const std::string& backup_dir) {
  rocksdb::BackupEngineOptions o(backup_dir);
  o.sync = true;                    // a finished backup survives a crash
  o.share_files_with_checksum = true;
  Engine* raw = nullptr;
  RETURN_IF_ERROR(FromRocks(Engine::Open(o, rocksdb::Env::Default(), &raw),
                                               absl::StrCat("open backups in '", backup_dir, "'")));
  return std::unique_ptr<Engine>(raw);
}

// The backup `id` names, 0 = the newest; NOT_FOUND when there is none.
template <typename Engine>
absl::StatusOr<BackupInfo> Resolve(const Engine& engine, const std::string& backup_dir, uint32_t id) {
  std::vector<rocksdb::BackupInfo> infos;
  engine.GetBackupInfo(&infos);
  if (infos.empty()) return absl::NotFoundError(absl::StrCat("no backups in '", backup_dir, "'"));
  if (id == 0) return ToInfo(infos.back());
  for (const rocksdb::BackupInfo& i : infos) {
    if (i.backup_id == id) return ToInfo(i);
  }
  return absl::NotFoundError(absl::StrCat("no backup ", id, " in '", backup_dir, "'"));
}

}  // namespace

absl::StatusOr<BackupInfo> Backups::Create(Database& db, const std::string& backup_dir, int keep) {
  if (keep < 1) return absl::InvalidArgumentError("keep must be >= 1");
  RETURN_IF_ERROR(db.CheckOpen());
  std::error_code ec;
  std::filesystem::create_directories(backup_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create backup directory '", backup_dir, "': ", ec.message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngine> engine, OpenEngine<rocksdb::BackupEngine>(backup_dir));
  // Leftovers of an interrupted backup go first.
  RETURN_IF_ERROR(FromRocks(engine->GarbageCollect(), "collect garbage of earlier backups"));
  rocksdb::CreateBackupOptions co;
  // No flush: the WAL is copied instead, which makes the backup one point in
  // time across column families (a flush per family would not be atomic).
  co.flush_before_backup = false;
  rocksdb::BackupID id = 0;
  RETURN_IF_ERROR(FromRocks(
      engine->CreateNewBackupWithMetadata(co, db.db_.get(), absl::StrCat("adapterd schema ", db.schema_version()), &id),
      absl::StrCat("back up database '", db.path(), "' to '", backup_dir, "'")));
  RETURN_IF_ERROR(FromRocks(engine->PurgeOldBackups(static_cast<uint32_t>(keep)), "purge old backups"));
  rocksdb::BackupInfo info;
  RETURN_IF_ERROR(FromRocks(engine->GetBackupInfo(id, &info), "read the new backup's info"));
  return ToInfo(info);
}

absl::StatusOr<std::vector<BackupInfo>> Backups::List(const std::string& backup_dir) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  std::vector<rocksdb::BackupInfo> infos;
  engine->GetBackupInfo(&infos);
  std::vector<BackupInfo> out;
  for (const rocksdb::BackupInfo& i : infos) out.push_back(ToInfo(i));
  return out;
}

absl::StatusOr<BackupInfo> Backups::Verify(const std::string& backup_dir, uint32_t id) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  ASSIGN_OR_RETURN(BackupInfo info, Resolve(*engine, backup_dir, id));
  const rocksdb::Status s = engine->VerifyBackup(info.id, /*verify_with_checksum=*/true);
  if (!s.ok()) return absl::DataLossError(absl::StrCat("backup ", info.id, " is damaged: ", s.ToString()));
  return info;
}

absl::StatusOr<BackupInfo> Backups::Restore(const std::string& backup_dir, uint32_t id, const std::string& db_path) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  std::error_code ec;
  if (std::filesystem::exists(db_path, ec) && !std::filesystem::is_empty(db_path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", db_path, "' is not empty: restore only into an empty data directory (move the old one aside first)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  ASSIGN_OR_RETURN(BackupInfo info, Resolve(*engine, backup_dir, id));
  std::filesystem::create_directories(db_path, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create '", db_path, "': ", ec.message()));
  RETURN_IF_ERROR(FromRocks(engine->RestoreDBFromBackup(info.id, db_path, db_path),
                            absl::StrCat("restore backup ", info.id, " into '", db_path, "'")));
  return info;
}

}  // namespace adapterd::storage
