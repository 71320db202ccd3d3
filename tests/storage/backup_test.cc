// Backups (storage/backup.h) over a real RocksDB: an online backup taken
// while a writer commits is one point in time; restore opens without repair;
// retention, verification and the restore target's guard.
#include "storage/backup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
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
  ASSERT_OK_AND_ASSIGN(BackupInfo ok, Backups::Verify(dir.Sub("backups"), 0));
  EXPECT_EQ(ok.id, b.id);
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

}  // namespace
}  // namespace adapterd::storage
