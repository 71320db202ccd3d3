#include "server/backup_tool.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "storage/backup.h"
#include "storage/database.h"

namespace adapterd {
namespace {

std::string Describe(const storage::BackupInfo& b) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(b.timestamp_seconds), absl::UTCTimeZone()) + " " +
         std::to_string(b.size_bytes) + " bytes " + std::to_string(b.num_files) + " files";
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "adapterd: %s\n", s.ToString().c_str());
  return 1;
}

// Opens the restored database once (schema check) and reads every job
// record, so a restore that would not serve fails here.
absl::Status CheckRestored(const std::string& db_path, size_t* jobs) {
  storage::Database::Options o;
  o.path = db_path;
  o.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<storage::Database>> db = storage::Database::Open(o);
  if (!db.ok()) return db.status();
  storage::JobStore::ListOptions lo;
  lo.page_size = storage::kMaxPageSize;
  *jobs = 0;
  while (true) {
    absl::StatusOr<storage::JobStore::Page> page = (*db)->jobs().List(lo);
    if (!page.ok()) return page.status();
    *jobs += page->jobs.size();
    if (page->next_page_token.empty()) break;
    lo.page_token = page->next_page_token;
  }
  return (*db)->Close();
}

}  // namespace

bool IsBackupCommand(int argc, char** argv) {
  if (argc < 2) return false;
  const std::string_view cmd = argv[1];
  return cmd == "restore" || cmd == "backups";
}

int RunBackupCommand(int argc, char** argv) {
  CLI::App app{"adapterd backup commands: list, verify, delete and restore RocksDB backups taken with --backup_dir"};
  app.require_subcommand(1);
  std::string backup_dir, data_dir;
  uint32_t backup_id = 0;

  CLI::App* backups = app.add_subcommand("backups", "Inspect backups");
  backups->require_subcommand(1);
  CLI::App* list = backups->add_subcommand(
      "list", "List the backups, oldest first; exit 1 naming each damaged file if the directory is damaged");
  list->add_option("--backup_dir", backup_dir, "The backup directory")->required();
  CLI::App* verify = backups->add_subcommand("verify", "Check backups file by file, with checksums");
  verify->add_option("--backup_dir", backup_dir, "The backup directory")->required();
  verify->add_option("--backup_id", backup_id, "Backup to verify; 0 = every backup");
  CLI::App* remove = backups->add_subcommand("delete", "Delete one backup, damaged or not, and the files only it uses");
  remove->add_option("--backup_dir", backup_dir, "The backup directory")->required();
  remove->add_option("--backup_id", backup_id, "Backup to delete")->required();
  CLI::App* restore = app.add_subcommand("restore", "Restore a backup into an empty data directory");
  restore->add_option("--backup_dir", backup_dir, "The backup directory")->required();
  restore->add_option("--data_dir", data_dir, "The data directory to restore into (<data_dir>/db must not exist)")
      ->required();
  restore->add_option("--backup_id", backup_id,
                      "Backup to restore; 0 = the newest, refused while the directory's metadata is damaged");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (list->parsed()) {
    absl::StatusOr<storage::BackupDirectory> dir = storage::Backups::Inspect(backup_dir);
    if (!dir.ok()) return Fail(dir.status());
    for (const storage::BackupInfo& b : dir->backups) std::printf("%u %s\n", b.id, Describe(b).c_str());
    if (dir->damage.empty()) return 0;
    for (const std::string& d : dir->damage) std::fprintf(stderr, "adapterd: damaged: %s\n", d.c_str());
    std::fprintf(stderr, "adapterd: backup directory %s is damaged (%zu file(s) above)\n", backup_dir.c_str(),
                 dir->damage.size());
    return 1;
  }
  if (verify->parsed()) {
    absl::StatusOr<std::vector<storage::BackupInfo>> intact = storage::Backups::Verify(backup_dir, backup_id);
    if (!intact.ok()) return Fail(intact.status());
    for (const storage::BackupInfo& b : *intact) {
      std::printf("backup %u is intact (%s)\n", b.id, Describe(b).c_str());
    }
    return 0;
  }
  if (remove->parsed()) {
    if (absl::Status s = storage::Backups::Delete(backup_dir, backup_id); !s.ok()) return Fail(s);
    std::printf("deleted backup %u\n", backup_id);
    return 0;
  }
  if (PathIsWithin(backup_dir, data_dir) || PathIsWithin(data_dir, backup_dir)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--backup_dir '", backup_dir, "' must be outside --data_dir '",
                                                        data_dir, "' (and not contain it)")));
  }
  const std::string db_path = (std::filesystem::path(data_dir) / "db").string();
  absl::StatusOr<storage::BackupInfo> b = storage::Backups::Restore(backup_dir, backup_id, db_path);
  if (!b.ok()) return Fail(b.status());
  size_t jobs = 0;
  if (absl::Status s = CheckRestored(db_path, &jobs); !s.ok()) {
    return Fail(absl::Status(s.code(), "the restored database does not open: " + std::string(s.message())));
  }
  std::printf("restored backup %u (%s) into %s: %zu jobs\n", b->id, Describe(*b).c_str(), db_path.c_str(), jobs);
  return 0;
}

}  // namespace adapterd
