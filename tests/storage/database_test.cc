// Database: open/close, schema version, locking, error mapping, corruption
// and disk-full handling.
#include "storage/database.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "common/testing/status_matchers.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/keys.h"
#include "storage/rocks_status.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::Child;
using ::adapterd::storage::testing::RawPut;
using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using v1::JobRecord;
using v1::TaskRecord;

Database::Options At(const std::string& path) {
  Database::Options o;
  o.path = path;
  return o;
}

JobRecord Job(const std::string& tenant, const std::string& id) {
  JobRecord j;
  j.set_tenant(tenant);
  j.set_job_id(id);
  j.set_task_id("task");
  j.set_state(v1::JOB_STATE_QUEUED);
  return j;
}

TEST(Database, OpenCreatesEveryColumnFamilyAndSchemaVersion) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    EXPECT_EQ(db->schema_version(), kSchemaVersion);
    EXPECT_TRUE(db->is_open());
    ASSERT_OK(db->Close());
    EXPECT_FALSE(db->is_open());
    ASSERT_OK(db->Close());  // idempotent
  }
  for (int i = 0; i < kNumColumnFamilies; ++i) {
    EXPECT_OK(testing::RawKeys(path, ColumnFamilyName(static_cast<ColumnFamily>(i)), ""));
  }
  ASSERT_OK_AND_ASSIGN(auto meta, testing::RawKeys(path, "meta", ""));
  EXPECT_THAT(meta, ::testing::Contains(std::string(keys::kSchemaVersion)));
}

TEST(Database, ReopenAfterCloseKeepsRecords) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    TaskRecord t;
    t.set_tenant("acme");
    t.set_task_id("sentiment");
    t.add_labels("neg");
    t.add_labels("pos");
    ASSERT_OK(db->tasks().Put(t));
    ASSERT_OK(db->jobs().Create(Job("acme", "j1")));
  }  // destructor closes
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "sentiment"));
  EXPECT_EQ(t.labels_size(), 2);
  EXPECT_OK(db->jobs().Get("acme", "j1"));
}

TEST(Database, CreatesMissingParentDirectories) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("a/b/db"))));
  EXPECT_OK(db->Close());
}

TEST(Database, MissingDatabaseIsNotFoundWithoutCreateIfMissing) {
  TempDir dir;
  Database::Options o = At(dir.Sub("nope"));
  o.create_if_missing = false;
  EXPECT_THAT(Database::Open(o), StatusIs(absl::StatusCode::kNotFound, HasSubstr(dir.Sub("nope"))));
  EXPECT_THAT(Database::Open(At("")), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("path")));
}

TEST(Database, CallsAfterCloseAreFailedPrecondition) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(db->Close());
  EXPECT_THAT(db->tasks().Get("a", "b"), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
  EXPECT_THAT(db->jobs().Create(Job("a", "j")), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("closed")));
}

// RocksDB's accounting as /metrics reports it: writes fill the memtables, a
// flush empties them into a table file whose index the table readers hold,
// and reading it back fills the block cache.
TEST(Database, MemoryFollowsWritesFlushesAndReads) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK_AND_ASSIGN(Database::MemoryUsage empty, db->Memory());
  constexpr int kTasks = 256;
  constexpr int64_t kLabelBytes = 4096;  // per task: 1 MiB in all
  for (int i = 0; i < kTasks; ++i) {
    TaskRecord t;
    t.set_tenant("acme");
    t.set_task_id("task-" + std::to_string(i));
    for (int l = 0; l < 16; ++l) t.add_labels(std::string(kLabelBytes / 16, static_cast<char>('a' + l)));
    ASSERT_OK(db->tasks().Put(t));
  }
  ASSERT_OK_AND_ASSIGN(Database::MemoryUsage written, db->Memory());
  EXPECT_GE(written.memtables - empty.memtables, kTasks * kLabelBytes);

  ASSERT_OK(db->Flush());
  ASSERT_OK_AND_ASSIGN(Database::MemoryUsage flushed, db->Memory());
  EXPECT_LT(flushed.memtables, written.memtables - kTasks * kLabelBytes / 2);
  EXPECT_GT(flushed.table_readers, empty.table_readers);

  for (int i = 0; i < kTasks; ++i) ASSERT_OK(db->tasks().Get("acme", "task-" + std::to_string(i)));
  ASSERT_OK_AND_ASSIGN(Database::MemoryUsage read, db->Memory());
  EXPECT_GE(read.block_cache - flushed.block_cache, kTasks * kLabelBytes / 2);

  ASSERT_OK(db->Close());
  EXPECT_THAT(db->Memory(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(Database, SecondOpenInSameProcessIsLockedError) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  ASSERT_OK_AND_ASSIGN(auto first, Database::Open(At(path)));
  EXPECT_THAT(Database::Open(At(path)),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("is locked by another process"), HasSubstr("lock file " + path + "/LOCK"))));
  ASSERT_OK(first->Close());
  EXPECT_OK(Database::Open(At(path)));
}

TEST(Database, OpenWhileAnotherProcessHoldsItIsLockedError) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  ASSERT_OK_AND_ASSIGN(Child child, Child::Start({"hold", path}, dir.Sub("child.err")));
  ASSERT_OK(child.WaitReady(10000));
  EXPECT_THAT(
      Database::Open(At(path)),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               AllOf(HasSubstr("database '" + path + "' is locked by another process"), HasSubstr(path + "/LOCK"))));
  child.KillAndWait();  // the kernel drops the dead process's lock
  EXPECT_OK(Database::Open(At(path)));
}

TEST(Database, NewerSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_OK(Database::Open(At(path)).status()); }
  ASSERT_OK(RawPut(path, "meta", keys::kSchemaVersion, "2"));
  EXPECT_THAT(Database::Open(At(path)), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                 AllOf(HasSubstr("schema version 2"), HasSubstr("supports (1)"))));
  // The refused open released the database.
  ASSERT_OK(RawPut(path, "meta", keys::kSchemaVersion, "1"));
  EXPECT_OK(Database::Open(At(path)));
}

TEST(Database, GarbledSchemaVersionIsDataLoss) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_OK(Database::Open(At(path)).status()); }
  ASSERT_OK(RawPut(path, "meta", keys::kSchemaVersion, "one"));
  EXPECT_THAT(Database::Open(At(path)),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("meta"), HasSubstr("one"))));
}

TEST(Database, UnknownColumnFamilyOfSameSchemaStillOpens) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_OK(Database::Open(At(path)).status()); }
  ASSERT_OK(RawPut(path, "from_the_future", "k", "v"));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  EXPECT_OK(db->Close());
}

TEST(Database, CorruptRecordIsDataLossNamingFamilyAndKey) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    ASSERT_OK(db->jobs().Create(Job("acme", "good")));
  }
  const std::string garbage("\xff\xff\xff\xff\x0f", 5);
  ASSERT_OK(RawPut(path, "jobs", "acme/j1", garbage));
  ASSERT_OK(RawPut(path, "tasks", "acme/broken", garbage));
  ASSERT_OK(RawPut(path, "job_events", "j1/00000000000000000001", garbage));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  EXPECT_THAT(db->jobs().Get("acme", "j1"),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("column family 'jobs'"), HasSubstr("key 'acme/j1'"),
                                                          HasSubstr("adapterd.storage.v1.JobRecord"))));
  EXPECT_THAT(db->tasks().Get("acme", "broken"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("acme/broken")));
  EXPECT_THAT(db->tasks().List("acme", 10, ""), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("acme/broken")));
  EXPECT_THAT(db->jobs().ReadEvents("j1", 1),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("j1/00000000000000000001")));
  // Good records next to the bad ones still read.
  EXPECT_OK(db->jobs().Get("acme", "good"));
}

TEST(Database, RecordStoredUnderWrongKeyIsDataLoss) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_OK(Database::Open(At(path)).status()); }
  ASSERT_OK(RawPut(path, "jobs", "acme/j2", Job("other", "j9").SerializeAsString()));
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  EXPECT_THAT(db->jobs().Get("acme", "j2"), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("other/j9")));
}

TEST(FromRocks, MapsEveryKindToItsCode) {
  struct Case {
    rocksdb::Status in;
    absl::StatusCode code;
  };
  const Case cases[] = {
      {rocksdb::Status::NotFound("x"), absl::StatusCode::kNotFound},
      {rocksdb::Status::Corruption("block checksum mismatch"), absl::StatusCode::kDataLoss},
      {rocksdb::Status::NoSpace("write"), absl::StatusCode::kResourceExhausted},
      {rocksdb::Status::IOError("While lock file", "/db/LOCK: Resource temporarily unavailable"),
       absl::StatusCode::kFailedPrecondition},
      {rocksdb::Status::Busy(), absl::StatusCode::kUnavailable},
      {rocksdb::Status::TryAgain(), absl::StatusCode::kUnavailable},
      {rocksdb::Status::TimedOut(), absl::StatusCode::kUnavailable},
      {rocksdb::Status::ShutdownInProgress(), absl::StatusCode::kUnavailable},
      {rocksdb::Status::InvalidArgument("bad"), absl::StatusCode::kInvalidArgument},
      {rocksdb::Status::IOError("read block"), absl::StatusCode::kInternal},
      {rocksdb::Status::NotSupported(), absl::StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    absl::Status s = FromRocks(c.in, "ctx");
    EXPECT_EQ(s.code(), c.code) << c.in.ToString();
    // A full disk is the one the caller is told about without the context
    // (paths): see DiskFullError.
    if (!c.in.IsNoSpace()) {
      EXPECT_THAT(std::string(s.message()), HasSubstr("ctx: ")) << c.in.ToString();
    }
  }
  EXPECT_OK(FromRocks(rocksdb::Status::OK(), "ctx"));
  EXPECT_THAT(FromRocks(rocksdb::Status::NoSpace(), "write to database '/srv/db'"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("disk full"), ::testing::Not(HasSubstr("/srv/db")))));
}

// A file system that fails every write with ENOSPC while `full` is set.
class FullDiskFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FullDiskFileSystem(std::shared_ptr<rocksdb::FileSystem> base) : FileSystemWrapper(std::move(base)) {}
  const char* Name() const override { return "FullDiskFileSystem"; }

  std::atomic<bool> full{false};

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override {
    if (full) return rocksdb::IOStatus::NoSpace("simulated full disk", f);
    rocksdb::IOStatus s = target()->NewWritableFile(f, opts, r, dbg);
    if (s.ok()) *r = std::make_unique<File>(std::move(*r), &full);
    return s;
  }

 private:
  class File : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    File(std::unique_ptr<rocksdb::FSWritableFile> f, std::atomic<bool>* full)
        : FSWritableFileOwnerWrapper(std::move(f)), full_(full) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* dbg) override {
      if (*full_) return rocksdb::IOStatus::NoSpace("simulated full disk");
      return FSWritableFileOwnerWrapper::Append(data, o, dbg);
    }
    rocksdb::IOStatus Append(const rocksdb::Slice& data, const rocksdb::IOOptions& o,
                             const rocksdb::DataVerificationInfo& v, rocksdb::IODebugContext* dbg) override {
      if (*full_) return rocksdb::IOStatus::NoSpace("simulated full disk");
      return FSWritableFileOwnerWrapper::Append(data, o, v, dbg);
    }

   private:
    std::atomic<bool>* full_;
  };
};

TEST(Database, FullDiskIsResourceExhaustedAndLosesNothingCommitted) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  auto fs = std::make_shared<FullDiskFileSystem>(rocksdb::FileSystem::Default());
  std::shared_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  absl::Status after;
  {
    Database::Options o = At(path);
    o.env = env;
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
    ASSERT_OK(db->jobs().Create(Job("acme", "before")));
    fs->full = true;
    EXPECT_THAT(db->jobs().Create(Job("acme", "during")),
                StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("disk full")));
    // Reads go on while the disk is full.
    EXPECT_OK(db->jobs().Get("acme", "before"));
    fs->full = false;
    // Space is back. RocksDB 7.8 recovers some failed writes in place (the
    // next write calls Resume()) and not others (a failed WAL write may need
    // the database reopened): either way the write says so with a caller's
    // code, never INTERNAL, and what it reports is what is stored.
    after = db->jobs().Create(Job("acme", "after"));
    if (!after.ok()) {
      EXPECT_TRUE(absl::IsResourceExhausted(after) || absl::IsUnavailable(after)) << after;
      EXPECT_THAT(std::string(after.message()), ::testing::Not(HasSubstr(path)));
    }
    db->Close().IgnoreError();  // may report the background error
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  EXPECT_OK(db->jobs().Get("acme", "before"));
  EXPECT_THAT(db->jobs().Get("acme", "during"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("during")));
  EXPECT_EQ(db->jobs().Get("acme", "after").ok(), after.ok());
  EXPECT_OK(db->jobs().Create(Job("acme", "reopened")));
}

// The reserve (Options::min_free_bytes) refuses writes before RocksDB can
// meet a full disk: RESOURCE_EXHAUSTED "disk full" without a path, reads go
// on, nothing stored is touched, and writes pass once the reserve is met.
TEST(Database, WritesStopAtTheFreeSpaceReserve) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    ASSERT_OK(db->jobs().Create(Job("acme", "before")));
  }
  {
    Database::Options o = At(path);
    o.min_free_bytes = std::numeric_limits<int64_t>::max() / 2;  // more than any disk has
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
    const absl::Status refused = db->jobs().Create(Job("acme", "refused"));
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("disk full")));
    EXPECT_THAT(std::string(refused.message()), ::testing::Not(HasSubstr(path)));
    EXPECT_OK(db->jobs().Get("acme", "before"));
    EXPECT_OK(db->Close());
  }
  Database::Options o = At(path);
  o.min_free_bytes = 1;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
  EXPECT_OK(db->jobs().Create(Job("acme", "after")));
  EXPECT_OK(db->jobs().Get("acme", "before"));
  EXPECT_THAT(db->jobs().Get("acme", "refused"), StatusIs(absl::StatusCode::kNotFound));
}

// The reserve counts the memtables not yet flushed: their flush writes
// about as many bytes again (while the WAL still holds them), so a write
// that fits beside the reserve but not beside that flush is refused before
// RocksDB can meet the full disk in the flush or the next WAL write.
TEST(Database, TheReserveCountsTheMemtablesStillToBeFlushed) {
  TempDir dir;
  constexpr int64_t kReserve = 1 << 20;
  auto free_bytes = std::make_shared<std::atomic<int64_t>>(int64_t{1} << 40);
  Database::Options o = At(dir.Sub("db"));
  o.min_free_bytes = kReserve;
  o.free_bytes = [free_bytes]() -> std::optional<int64_t> { return free_bytes->load(); };
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
  v1::DatasetChunk chunk;
  chunk.add_examples()->set_text(std::string(2 << 20, 'x'));  // 2 MiB, below the family's write buffer
  ASSERT_OK(db->datasets().PutChunk("acme", "big", 0, chunk));

  // Room for the reserve and a small record, not for the memtable's flush.
  free_bytes->store(kReserve + (64 << 10));
  EXPECT_THAT(db->jobs().Create(Job("acme", "refused")),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("disk full")));
  // Room for the flush too: the same write passes.
  free_bytes->store(kReserve + (2 << 20) + (128 << 10));
  EXPECT_OK(db->jobs().Create(Job("acme", "accepted")));
  EXPECT_THAT(db->jobs().Get("acme", "refused"), StatusIs(absl::StatusCode::kNotFound));
}

TEST(Keys, PaddedNumbersSortNumerically) {
  EXPECT_EQ(keys::PaddedNumber(42), "00000000000000000042");
  EXPECT_LT(keys::Adapter("t", "x", 9), keys::Adapter("t", "x", 10));
  EXPECT_EQ(keys::ParsePaddedNumber(keys::PaddedNumber(1234567890123)), 1234567890123);
  EXPECT_FALSE(keys::ParsePaddedNumber("12").has_value());
  EXPECT_FALSE(keys::ParsePaddedNumber("0000000000000000001x").has_value());
  EXPECT_FALSE(keys::ParsePaddedNumber("99999999999999999999").has_value());
  EXPECT_EQ(keys::PrefixEnd("a/b/"), "a/b0");
}

TEST(Keys, IdsMustBeNonEmptyShortAndSlashFree) {
  EXPECT_OK(ValidateId("task_id", "sentiment-v2_x.y"));
  EXPECT_THAT(ValidateId("task_id", ""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("task_id must not be empty")));
  EXPECT_THAT(ValidateId("tenant", "a/b"),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("tenant"), HasSubstr("'/'"))));
  EXPECT_THAT(ValidateId("job_id", std::string("a\0b", 3)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job_id")));
  EXPECT_THAT(ValidateId("job_id", std::string(kMaxIdBytes + 1, 'x')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit")));
}

}  // namespace
}  // namespace adapterd::storage
