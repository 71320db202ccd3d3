#include "storage/backup.h"

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/utilities/backup_engine.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "storage/database.h"
#include "storage/rocks_status.h"

namespace adapterd::storage {
namespace {

namespace fs = std::filesystem;

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
  if (!fs::is_directory(backup_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("backup directory '", backup_dir, "' does not exist"));
  }
  return absl::OkStatus();
}

template <typename Engine>
absl::StatusOr<std::unique_ptr<Engine>> OpenEngine(const std::string& backup_dir) {
  rocksdb::BackupEngineOptions o(backup_dir);
  o.sync = true;  // a finished backup survives a crash
  o.share_files_with_checksum = true;
  Engine* raw = nullptr;
  RETURN_IF_ERROR(
      FromRocks(Engine::Open(o, rocksdb::Env::Default(), &raw), absl::StrCat("open backups in '", backup_dir, "'")));
  return std::unique_ptr<Engine>(raw);
}

std::string MetaFile(uint32_t id) { return absl::StrCat("meta/", id); }

// RocksDB names files by their absolute path (backup_dir + "/" + relative);
// messages name them relative to the backup directory instead.
std::string Relative(const std::string& message, const std::string& backup_dir) {
  return absl::StrReplaceAll(message, {{backup_dir + "/", ""}});
}

// kMetaChecksumsFile: "<64 lowercase hex>  meta/<id>" per line (sha256sum's
// format, so `sha256sum -c` checks it too).
struct MetaChecksums {
  std::map<uint32_t, std::string> sha256;  // by backup id
  bool exists = false;
  std::vector<std::string> damage;  // lines that do not parse
};

absl::StatusOr<MetaChecksums> ReadMetaChecksums(const std::string& backup_dir) {
  MetaChecksums out;
  absl::StatusOr<std::string> text = ReadFileToString((fs::path(backup_dir) / kMetaChecksumsFile).string());
  if (absl::IsNotFound(text.status())) return out;
  if (!text.ok()) return text.status();
  out.exists = true;
  if (!text->empty() && text->back() != '\n') {
    out.damage.push_back(absl::StrCat(kMetaChecksumsFile, ": does not end with a newline"));
  }
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    ++line_no;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits("  ", 1));
    uint32_t id = 0;
    const bool hex_ok = parts.size() == 2 && parts[0].size() == 64 &&
                        std::all_of(parts[0].begin(), parts[0].end(),
                                    [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
    const bool name_ok = parts.size() == 2 && absl::StartsWith(parts[1], "meta/") && parts[1].size() > 5 &&
                         std::all_of(parts[1].begin() + 5, parts[1].end(), absl::ascii_isdigit) &&
                         absl::SimpleAtoi(parts[1].substr(5), &id) && id > 0;
    if (!hex_ok || !name_ok || out.sha256.count(id) > 0) {
      out.damage.push_back(absl::StrCat(kMetaChecksumsFile, ": line ", line_no, " does not parse"));
      continue;
    }
    out.sha256[id] = std::string(parts[0]);
  }
  return out;
}

absl::Status WriteMetaChecksums(const std::string& backup_dir, const std::map<uint32_t, std::string>& sha256) {
  std::string text;
  for (const auto& [id, digest] : sha256) absl::StrAppend(&text, digest, "  ", MetaFile(id), "\n");
  return WriteFileAtomically((fs::path(backup_dir) / kMetaChecksumsFile).string(), text);
}

absl::StatusOr<std::string> MetaSha256(const std::string& backup_dir, uint32_t id) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString((fs::path(backup_dir) / MetaFile(id)).string()));
  return Sha256Hex(bytes);
}

// Ids of the meta/<id> files present (in-progress ".<id>.tmp" files aside).
absl::StatusOr<std::vector<uint32_t>> MetaIdsOnDisk(const std::string& backup_dir) {
  std::vector<uint32_t> ids;
  std::error_code ec;
  const fs::path meta = fs::path(backup_dir) / "meta";
  if (!fs::exists(meta, ec)) return ids;
  for (fs::directory_iterator it(meta, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    uint32_t id = 0;
    if (!name.empty() && std::all_of(name.begin(), name.end(), absl::ascii_isdigit) && absl::SimpleAtoi(name, &id)) {
      ids.push_back(id);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list '", meta.string(), "': ", ec.message()));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Inspect() with an open engine; `checksums` receives what the checksum
// file holds.
absl::StatusOr<BackupDirectory> InspectWith(const rocksdb::BackupEngineReadOnlyBase& engine,
                                            const std::string& backup_dir, MetaChecksums* checksums) {
  BackupDirectory out;
  std::vector<rocksdb::BackupInfo> infos;
  engine.GetBackupInfo(&infos);
  for (const rocksdb::BackupInfo& i : infos) out.backups.push_back(ToInfo(i));

  std::map<uint32_t, std::string> problem;  // first problem found per backup id
  std::vector<rocksdb::BackupID> corrupt;
  engine.GetCorruptedBackups(&corrupt);
  ASSIGN_OR_RETURN(*checksums, ReadMetaChecksums(backup_dir));
  ASSIGN_OR_RETURN(const std::vector<uint32_t> on_disk, MetaIdsOnDisk(backup_dir));
  for (const auto& [id, digest] : checksums->sha256) {
    if (!std::binary_search(on_disk.begin(), on_disk.end(), id)) {
      problem.emplace(id, absl::StrCat(MetaFile(id), ": missing, but ", kMetaChecksumsFile, " lists it (backup ", id,
                                       " was removed by hand, or lost)"));
      continue;
    }
    ASSIGN_OR_RETURN(const std::string actual, MetaSha256(backup_dir, id));
    if (actual != digest) {
      problem.emplace(id, absl::StrCat(MetaFile(id), ": its SHA-256 differs from the one in ", kMetaChecksumsFile,
                                       " (one of the two files is damaged)"));
    }
  }
  for (rocksdb::BackupID id : corrupt) {
    problem.emplace(id, absl::StrCat(MetaFile(id), ": RocksDB cannot read this backup's metadata"));
  }
  for (const auto& [id, text] : problem) {
    out.damage.push_back(text);
    out.damaged_ids.push_back(id);
    // A damaged description may still parse (a flipped digit): it is not
    // a backup to offer.
    std::erase_if(out.backups, [id = id](const BackupInfo& b) { return b.id == id; });
  }
  for (const std::string& d : checksums->damage) out.damage.push_back(d);
  return out;
}

std::string DamageText(const std::string& backup_dir, const std::vector<std::string>& damage) {
  return absl::StrCat("backup directory '", backup_dir, "' is damaged: ", absl::StrJoin(damage, "; "));
}

std::string IdList(const std::vector<BackupInfo>& backups) {
  if (backups.empty()) return "none";
  std::vector<uint32_t> ids;
  ids.reserve(backups.size());
  for (const BackupInfo& b : backups) ids.push_back(b.id);
  return absl::StrJoin(ids, ", ");
}

// Removes what a failed restore wrote into `db_path` (which was empty or
// absent before).
void RemoveRestoreLeftovers(const std::string& db_path, bool created) {
  std::error_code ec;
  if (created) {
    fs::remove_all(db_path, ec);
    return;
  }
  for (fs::directory_iterator it(db_path, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

}  // namespace

absl::StatusOr<BackupInfo> Backups::Create(Database& db, const std::string& backup_dir, int keep) {
  if (keep < 1) return absl::InvalidArgumentError("keep must be >= 1");
  RETURN_IF_ERROR(db.CheckOpen());
  std::error_code ec;
  fs::create_directories(backup_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create backup directory '", backup_dir, "': ", ec.message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngine> engine, OpenEngine<rocksdb::BackupEngine>(backup_dir));
  MetaChecksums checksums;
  ASSIGN_OR_RETURN(const BackupDirectory state, InspectWith(*engine, backup_dir, &checksums));
  if (!state.damage.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        DamageText(backup_dir, state.damage),
        "; no backup is taken until an operator decides: `adapterd backups delete --backup_id N` removes a "
        "damaged backup, or move the directory aside (docs/DEPLOYMENT.md, \"Backup and restore\")"));
  }
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
  // Checksums of the backups that survive the purge, written before it: a
  // crash in between leaves meta files without a checksum (trusted as
  // RocksDB reads them), never a checksum without its file.
  std::vector<rocksdb::BackupInfo> infos;
  engine->GetBackupInfo(&infos);
  std::map<uint32_t, std::string> next;
  for (size_t i = infos.size() > static_cast<size_t>(keep) ? infos.size() - keep : 0; i < infos.size(); ++i) {
    const uint32_t b = infos[i].backup_id;
    auto known = checksums.sha256.find(b);
    if (known != checksums.sha256.end()) {
      next[b] = known->second;
    } else {
      ASSIGN_OR_RETURN(next[b], MetaSha256(backup_dir, b));
    }
  }
  RETURN_IF_ERROR(WriteMetaChecksums(backup_dir, next));
  RETURN_IF_ERROR(FromRocks(engine->PurgeOldBackups(static_cast<uint32_t>(keep)), "purge old backups"));
  rocksdb::BackupInfo info;
  RETURN_IF_ERROR(FromRocks(engine->GetBackupInfo(id, &info), "read the new backup's info"));
  return ToInfo(info);
}

absl::StatusOr<BackupDirectory> Backups::Inspect(const std::string& backup_dir) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  MetaChecksums checksums;
  return InspectWith(*engine, backup_dir, &checksums);
}

absl::StatusOr<std::vector<BackupInfo>> Backups::List(const std::string& backup_dir) {
  ASSIGN_OR_RETURN(BackupDirectory state, Inspect(backup_dir));
  if (!state.damage.empty()) return absl::DataLossError(DamageText(backup_dir, state.damage));
  return state.backups;
}

absl::StatusOr<std::vector<BackupInfo>> Backups::Verify(const std::string& backup_dir, uint32_t id) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  MetaChecksums checksums;
  ASSIGN_OR_RETURN(BackupDirectory state, InspectWith(*engine, backup_dir, &checksums));
  std::vector<BackupInfo> targets;
  if (id == 0) {
    targets = state.backups;
  } else {
    for (const BackupInfo& b : state.backups) {
      if (b.id == id) targets.push_back(b);
    }
    const bool damaged = std::count(state.damaged_ids.begin(), state.damaged_ids.end(), id) > 0;
    if (targets.empty() && !damaged) {
      return absl::NotFoundError(absl::StrCat("no backup ", id, " in '", backup_dir, "'"));
    }
  }
  if (targets.empty() && state.damage.empty()) {
    return absl::NotFoundError(absl::StrCat("no backups in '", backup_dir, "'"));
  }
  std::vector<std::string> problems = state.damage;
  std::vector<BackupInfo> intact;
  for (const BackupInfo& b : targets) {
    const rocksdb::Status s = engine->VerifyBackup(b.id, /*verify_with_checksum=*/true);
    if (s.ok()) {
      intact.push_back(b);
    } else {
      problems.push_back(absl::StrCat("backup ", b.id, ": ", Relative(s.ToString(), backup_dir)));
    }
  }
  if (!problems.empty()) {
    return absl::DataLossError(absl::StrCat(DamageText(backup_dir, problems), " (intact: ", IdList(intact), ")"));
  }
  return intact;
}

absl::StatusOr<BackupInfo> Backups::Restore(const std::string& backup_dir, uint32_t id, const std::string& db_path) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  std::error_code ec;
  const bool created = !fs::exists(db_path, ec);
  if (!created && !fs::is_empty(db_path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", db_path, "' is not empty: restore only into an empty data directory (move the old one aside first)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngineReadOnly> engine,
                   OpenEngine<rocksdb::BackupEngineReadOnly>(backup_dir));
  MetaChecksums checksums;
  ASSIGN_OR_RETURN(BackupDirectory state, InspectWith(*engine, backup_dir, &checksums));
  BackupInfo info;
  if (id == 0) {
    if (!state.damage.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          DamageText(backup_dir, state.damage),
          "; which backup is the newest cannot be told, so none is restored by default: name the backup to "
          "restore with --backup_id (backups with intact metadata: ",
          IdList(state.backups), ")"));
    }
    if (state.backups.empty()) return absl::NotFoundError(absl::StrCat("no backups in '", backup_dir, "'"));
    info = state.backups.back();
  } else {
    auto it =
        std::find_if(state.backups.begin(), state.backups.end(), [id](const BackupInfo& b) { return b.id == id; });
    if (it == state.backups.end()) {
      if (std::count(state.damaged_ids.begin(), state.damaged_ids.end(), id) > 0) {
        return absl::DataLossError(
            absl::StrCat("backup ", id, " cannot be restored: ", DamageText(backup_dir, state.damage)));
      }
      return absl::NotFoundError(absl::StrCat("no backup ", id, " in '", backup_dir, "'"));
    }
    info = *it;
  }
  // Every file, checked before anything is written.
  const rocksdb::Status verified = engine->VerifyBackup(info.id, /*verify_with_checksum=*/true);
  if (!verified.ok()) {
    return absl::DataLossError(
        absl::StrCat("backup ", info.id, " is damaged, nothing restored: ", Relative(verified.ToString(), backup_dir)));
  }
  fs::create_directories(db_path, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create '", db_path, "': ", ec.message()));
  absl::Status restored = FromRocks(engine->RestoreDBFromBackup(info.id, db_path, db_path),
                                    absl::StrCat("restore backup ", info.id, " into '", db_path, "'"));
  if (!restored.ok()) {
    RemoveRestoreLeftovers(db_path, created);
    return restored;
  }
  return info;
}

absl::Status Backups::Delete(const std::string& backup_dir, uint32_t id) {
  RETURN_IF_ERROR(MustExist(backup_dir));
  if (id == 0) return absl::InvalidArgumentError("name the backup to delete (ids start at 1)");
  ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::BackupEngine> engine, OpenEngine<rocksdb::BackupEngine>(backup_dir));
  absl::Status deleted =
      FromRocks(engine->DeleteBackup(id), absl::StrCat("delete backup ", id, " in '", backup_dir, "'"));
  // The checksums of what remains (lines that did not parse are dropped).
  ASSIGN_OR_RETURN(MetaChecksums checksums, ReadMetaChecksums(backup_dir));
  const bool listed = checksums.sha256.erase(id) > 0;
  // A backup whose meta file is gone is only a line in the checksum file.
  if (!deleted.ok() && !(absl::IsNotFound(deleted) && listed)) return deleted;
  if (!checksums.exists) return absl::OkStatus();
  return WriteMetaChecksums(backup_dir, checksums.sha256);
}

}  // namespace adapterd::storage
