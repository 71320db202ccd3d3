// Backups (storage/backup.h) over a real RocksDB: an online backup taken
// while a writer commits is one point in time; restore opens without repair;
// retention, verification and the restore target's guard; a bit flipped in
// any file of a backup directory is reported, and never makes restore pick
// another backup silently.
#include "storage/backup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

Database::Options At(const std::string& path, uint64_t write_buffer = 0) {
  Database::Options o;
  o.path = path;
  o.write_buffer_size = write_buffer;
  return o;
}

std::string JobId(int i) { return absl::StrFormat("j%06d", i); }

// Step i writes a 6 KB chunk (a blob file value) and then job i (an SST
// value): two separate commits, so a consistent restore has, for some k,
// jobs 0..k-1 and chunks 0..k-1 or 0..k, and nothing else.
absl::Status WriteStep(Database& db, int i) {
  if (i == 0) {
    // The chunks belong to a dataset with a record: chunks without one are
    // an upload that never finished, which opening a database removes.
    v1::DatasetRecord record;
    record.set_tenant("acme");
    record.set_dataset_id("ds");
    RETURN_IF_ERROR(db.datasets().PutRecord(record));
  }
  v1::DatasetChunk chunk;
  v1::Example* e = chunk.add_examples();
  e->set_text(std::string(6000, static_cast<char>('a' + i % 26)));
  e->set_label(std::to_string(i));
  RETURN_IF_ERROR(db.datasets().PutChunk("acme", "ds", i, chunk));
  v1::JobRecord job;
  job.set_tenant("acme");
  job.set_job_id(JobId(i));
  job.set_task_id("task");
  job.set_state(v1::JOB_STATE_QUEUED);
  return db.jobs().Put(job);
}

TEST(Backups, OnlineBackupDuringWritesRestoresOnePointInTime) {
  TempDir dir;
  // A small memtable makes flushes (new SST and blob files) happen while the
  // backup copies files.
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"), 64 << 10)));
  for (int i = 0; i < 50; ++i) ASSERT_OK(WriteStep(*db, i));

  std::atomic<int> committed{50};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 50; !stop.load() && i < 100000; ++i) {
      if (!WriteStep(*db, i).ok()) return;
      committed.store(i + 1);
    }
  });
  // Let the writer run, then back up in the middle of it.
  while (committed.load() < 150) std::this_thread::yield();
  const int before = committed.load();
  ASSERT_OK_AND_ASSIGN(BackupInfo info, Backups::Create(*db, dir.Sub("backups"), 3));
  stop.store(true);
  writer.join();
  const int after = committed.load();
  EXPECT_GT(info.num_files, 0u);
  EXPECT_GT(after, before) << "the writer should have kept committing during the backup";

  ASSERT_OK_AND_ASSIGN(BackupInfo restored, Backups::Restore(dir.Sub("backups"), 0, dir.Sub("restored")));
  EXPECT_EQ(restored.id, info.id);
  Database::Options ro = At(dir.Sub("restored"));
  ro.create_if_missing = false;
  ASSERT_OK_AND_ASSIGN(auto back, Database::Open(ro));  // opens without repair

  // Jobs: a prefix 0..k-1 with k at least what was committed before the
  // backup began, and no later job.
  int k = 0;
  while (back->jobs().Get("acme", JobId(k)).ok()) ++k;
  EXPECT_GE(k, before);
  EXPECT_LE(k, after);
  for (int i = k; i < k + 5; ++i) EXPECT_FALSE(back->jobs().Get("acme", JobId(i)).ok()) << i;
  // Chunks: 0..k-1 (maybe k, written just before job k), byte for byte.
  for (int i = 0; i < k; ++i) {
    ASSERT_OK_AND_ASSIGN(v1::DatasetChunk c, back->datasets().GetChunk("acme", "ds", i));
    ASSERT_EQ(c.examples_size(), 1);
    ASSERT_EQ(c.examples(0).text(), std::string(6000, static_cast<char>('a' + i % 26))) << i;
  }
  EXPECT_FALSE(back->datasets().GetChunk("acme", "ds", k + 1).ok());
}

TEST(Backups, KeepsTheNewestAndListsThemOldestFirst) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  std::vector<uint32_t> ids;
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(WriteStep(*db, i));
    ASSERT_OK_AND_ASSIGN(BackupInfo b, Backups::Create(*db, dir.Sub("backups"), 2));
    ids.push_back(b.id);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<BackupInfo> kept, Backups::List(dir.Sub("backups")));
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].id, ids[2]);
  EXPECT_EQ(kept[1].id, ids[3]);
  // An older backup restores what was there then: after step 2, job 3 is absent.
  ASSERT_OK(Backups::Restore(dir.Sub("backups"), ids[2], dir.Sub("r")).status());
  Database::Options ro = At(dir.Sub("r"));
  ro.create_if_missing = false;
  ASSERT_OK_AND_ASSIGN(auto back, Database::Open(ro));
  EXPECT_OK(back->jobs().Get("acme", JobId(2)).status());
  EXPECT_THAT(back->jobs().Get("acme", JobId(3)).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Backups::Restore(dir.Sub("backups"), ids[0], dir.Sub("r0")).status(),
              StatusIs(absl::StatusCode::kNotFound));  // purged
}

TEST(Backups, VerifyFindsADamagedFile) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  for (int i = 0; i < 20; ++i) ASSERT_OK(WriteStep(*db, i));
  ASSERT_OK(db->Flush());
  ASSERT_OK_AND_ASSIGN(BackupInfo b, Backups::Create(*db, dir.Sub("backups"), 1));
  ASSERT_OK_AND_ASSIGN(std::vector<BackupInfo> ok, Backups::Verify(dir.Sub("backups"), 0));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].id, b.id);
  // Flip one byte in the middle of the largest shared file (same size).
  std::filesystem::path largest;
  uintmax_t size = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.Sub("backups"))) {
    if (e.is_regular_file() && e.file_size() > size && e.path().string().find("shared") != std::string::npos) {
      size = e.file_size();
      largest = e.path();
    }
  }
  ASSERT_FALSE(largest.empty());
  {
    std::fstream f(largest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(size / 2));
    f.write(&c, 1);
  }
  EXPECT_THAT(Backups::Verify(dir.Sub("backups"), 0).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("damaged")));
}

TEST(Backups, RestoreNeverOverwritesADatabase) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(WriteStep(*db, 0));
  ASSERT_OK(Backups::Create(*db, dir.Sub("backups"), 1).status());
  ASSERT_OK(WriteStep(*db, 1));
  EXPECT_THAT(Backups::Restore(dir.Sub("backups"), 0, dir.Sub("db")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not empty")));
  EXPECT_OK(db->jobs().Get("acme", JobId(1)).status());  // the live database is untouched
  EXPECT_THAT(Backups::List(dir.Sub("nowhere")).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Backups::Create(*db, dir.Sub("b2"), 0).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Flips bit 0 of the byte at `offset` ('0' <-> '1': a digit stays a digit).
void FlipBit(const std::filesystem::path& file, uintmax_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

// Every regular file under `dir`, relative to it.
std::vector<std::string> FilesUnder(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(std::filesystem::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool IsEmptyOrAbsent(const std::string& path) {
  std::error_code ec;
  return !std::filesystem::exists(path, ec) || std::filesystem::is_empty(path, ec);
}

// Two backups of a database that changed in between (so they share some
// files and not others), in dir/backups; returns their ids.
std::vector<uint32_t> TwoBackups(TempDir& dir) {
  std::vector<uint32_t> ids;
  auto db = Database::Open(At(dir.Sub("db")));
  EXPECT_TRUE(db.ok()) << db.status();
  for (int i = 0; i < 10; ++i) EXPECT_OK(WriteStep(**db, i));
  EXPECT_OK((*db)->Flush());
  auto first = Backups::Create(**db, dir.Sub("backups"), 5);
  EXPECT_TRUE(first.ok()) << first.status();
  for (int i = 10; i < 20; ++i) EXPECT_OK(WriteStep(**db, i));
  auto second = Backups::Create(**db, dir.Sub("backups"), 5);
  EXPECT_TRUE(second.ok()) << second.status();
  return {first->id, second->id};
}

// One bit flipped in the text "private/" of the newest backup's meta file:
// RocksDB skips backup 2 when it opens the directory, so list, verify and
// restore would answer as if backup 1 were the newest. The damage is
// reported instead, and backup 2 is never skipped silently.
TEST(Backups, ADamagedNewestMetaFileIsReportedAndNeverSkipped) {
  TempDir dir;
  const std::vector<uint32_t> ids = TwoBackups(dir);
  ASSERT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  const std::filesystem::path meta2 = std::filesystem::path(dir.Sub("backups")) / "meta" / "2";
  std::ifstream in(meta2, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("private/");
  ASSERT_NE(at, std::string::npos) << text;
  FlipBit(meta2, at + 3);

  EXPECT_THAT(Backups::List(dir.Sub("backups")).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("meta/2")));
  ASSERT_OK_AND_ASSIGN(BackupDirectory state, Backups::Inspect(dir.Sub("backups")));
  ASSERT_EQ(state.backups.size(), 1u);
  EXPECT_EQ(state.backups[0].id, 1u);
  EXPECT_EQ(state.damaged_ids, std::vector<uint32_t>{2});
  EXPECT_THAT(Backups::Verify(dir.Sub("backups"), 0).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("meta/2")));
  EXPECT_THAT(Backups::Verify(dir.Sub("backups"), 1).status(),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("meta/2"), HasSubstr("intact: 1"))));
  EXPECT_THAT(Backups::Restore(dir.Sub("backups"), 0, dir.Sub("r")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, AllOf(HasSubstr("meta/2"), HasSubstr("--backup_id"))));
  EXPECT_TRUE(IsEmptyOrAbsent(dir.Sub("r")));
  EXPECT_THAT(Backups::Restore(dir.Sub("backups"), 2, dir.Sub("r")).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("meta/2")));
  // Named explicitly, the intact older backup restores.
  ASSERT_OK_AND_ASSIGN(BackupInfo restored, Backups::Restore(dir.Sub("backups"), 1, dir.Sub("r")));
  EXPECT_EQ(restored.id, 1u);

  // No new backup lands in a damaged directory until the operator decides.
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db2"))));
    EXPECT_THAT(Backups::Create(*db, dir.Sub("backups"), 5).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("backups delete")));
    ASSERT_OK(Backups::Delete(dir.Sub("backups"), 2));
    ASSERT_OK_AND_ASSIGN(std::vector<BackupInfo> left, Backups::List(dir.Sub("backups")));
    ASSERT_EQ(left.size(), 1u);
    ASSERT_OK_AND_ASSIGN(BackupInfo next, Backups::Create(*db, dir.Sub("backups"), 5));
    EXPECT_GT(next.id, 1u);
    ASSERT_OK_AND_ASSIGN(std::vector<BackupInfo> verified, Backups::Verify(dir.Sub("backups"), 0));
    EXPECT_EQ(verified.size(), 2u);
  }
}

// One bit flipped at the start, the middle and the end of every file of a
// backup directory (meta/, private/, shared_checksum/ and the checksum
// file): verify always reports it, naming the file, and a restore of "the
// newest" either refuses (writing nothing) or restores the newest backup
// whose every file is intact.
TEST(Backups, ABitFlippedInAnyFileIsFound) {
  TempDir dir;
  const std::vector<uint32_t> ids = TwoBackups(dir);
  const std::vector<std::string> files = FilesUnder(dir.Sub("backups"));
  std::set<std::string> tops;
  for (const std::string& f : files) tops.insert(f.substr(0, f.find('/')));
  EXPECT_THAT(tops, ::testing::IsSupersetOf({std::string("meta"), std::string("private"),
                                             std::string("shared_checksum"), std::string(kMetaChecksumsFile)}));
  int trial = 0;
  for (const std::string& file : files) {
    const uintmax_t size = std::filesystem::file_size(std::filesystem::path(dir.Sub("backups")) / file);
    if (size == 0) continue;
    for (const uintmax_t offset : {uintmax_t{0}, size / 2, size - 1}) {
      SCOPED_TRACE(absl::StrFormat("%s, byte %d of %d", file, offset, size));
      const std::string copy = dir.Sub(absl::StrFormat("trial%d", trial));
      std::filesystem::copy(dir.Sub("backups"), copy, std::filesystem::copy_options::recursive);
      FlipBit(std::filesystem::path(copy) / file, offset);
      // The checksum file names the meta file it disagrees with; everything
      // else is named itself.
      const std::string named = file == kMetaChecksumsFile ? std::string(kMetaChecksumsFile) : file;
      const absl::Status verified = Backups::Verify(copy, 0).status();
      EXPECT_THAT(verified, StatusIs(absl::StatusCode::kDataLoss, HasSubstr(named)));
      const std::string target = dir.Sub(absl::StrFormat("restored%d", trial));
      absl::StatusOr<BackupInfo> restored = Backups::Restore(copy, 0, target);
      if (restored.ok()) {
        EXPECT_EQ(restored->id, ids.back());
        // Only a file the newest backup does not use was damaged (an
        // older backup's): the newest is whole.
        EXPECT_OK(Backups::Verify(copy, ids.back()).status());
      } else {
        EXPECT_THAT(std::string(restored.status().message()), HasSubstr(named));
        EXPECT_TRUE(IsEmptyOrAbsent(target));
      }
      std::filesystem::remove_all(copy);
      std::filesystem::remove_all(target);
      ++trial;
    }
  }
  EXPECT_GT(trial, 20);
}

TEST(Backups, AMissingMetaFileIsDamageAndAMissingChecksumFileIsTrusted) {
  TempDir dir;
  TwoBackups(dir);
  const std::filesystem::path root = dir.Sub("backups");
  const std::string copy = dir.Sub("copy");
  std::filesystem::copy(root, copy, std::filesystem::copy_options::recursive);
  // Backup 2 removed behind adapterd's back: its checksum line remains.
  std::filesystem::remove(root / "meta" / "2");
  EXPECT_THAT(Backups::List(root.string()).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("meta/2: missing")));
  EXPECT_THAT(Backups::Restore(root.string(), 0, dir.Sub("r")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Backups taken before the checksum file existed: trusted as RocksDB
  // reads them, and given checksums at the next backup.
  std::filesystem::remove(std::filesystem::path(copy) / kMetaChecksumsFile);
  ASSERT_OK_AND_ASSIGN(std::vector<BackupInfo> listed, Backups::List(copy));
  EXPECT_EQ(listed.size(), 2u);
  {
    Database::Options o = At(dir.Sub("db"));
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
    ASSERT_OK(Backups::Create(*db, copy, 5).status());
  }
  ASSERT_OK_AND_ASSIGN(std::string sums, ReadFileToString((std::filesystem::path(copy) / kMetaChecksumsFile).string()));
  EXPECT_THAT(sums, AllOf(HasSubstr("  meta/1\n"), HasSubstr("  meta/2\n"), HasSubstr("  meta/3\n")));
}

}  // namespace
}  // namespace adapterd::storage
