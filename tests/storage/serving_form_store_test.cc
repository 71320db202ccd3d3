// Serving forms in the adapters column family (AdapterStore): stored next to
// their version, removed by every path that removes the version (retention,
// TaskStore::Delete), never stored for a version deleted meanwhile, and
// never taken for a version.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "storage/backup.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::CheckAdapterBytes;
using ::adapterd::storage::testing::MakeAdapterBytes;
using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Optional;

Database::Options At(const std::string& path) {
  Database::Options o;
  o.path = path;
  o.sync_writes = false;
  return o;
}

Promotion Version(const std::string& task, int keep = 2) {
  Promotion p;
  p.task.set_tenant("acme");
  p.task.set_task_id(task);
  p.task.add_labels("neg");
  p.task.add_labels("pos");
  p.adapter_bytes = MakeAdapterBytes(task, 0, 8192);
  p.keep_versions = keep;
  return p;
}

std::string Form(int64_t version) { return std::string(6000, static_cast<char>('a' + version)); }

// The stored serving form of `version` (nullopt also when the read fails:
// the failure is reported).
std::optional<std::string> Stored(Database& db, const std::string& task, int64_t version) {
  absl::StatusOr<std::optional<std::string>> form = db.adapters().GetServingForm("acme", task, version);
  EXPECT_OK(form.status());
  return form.ok() ? *form : std::nullopt;
}

// Stores Form(version) as version's serving form.
absl::Status PutForm(Database& db, const std::string& task, int64_t version) {
  return db.adapters().PutServingForm("acme", task, version, Form(version), db.adapters().ServingFormEpoch());
}

// Promotes `versions` versions of `task` (keeping 2), each with a form.
absl::Status PromoteWithForms(Database& db, const std::string& task, int versions) {
  for (int v = 1; v <= versions; ++v) {
    ASSIGN_OR_RETURN(PromotionResult r, db.PromoteAdapterVersion(Version(task)));
    RETURN_IF_ERROR(PutForm(db, task, r.version));
  }
  return absl::OkStatus();
}

TEST(ServingFormStore, StoredNextToItsVersionAndReadBack) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(db->PromoteAdapterVersion(Version("x")).status());
  EXPECT_EQ(Stored(*db, "x", 1), std::nullopt);
  ASSERT_OK_AND_ASSIGN(AdapterStore::CurrentServingForm none, db->adapters().GetCurrentServingForm("acme", "x"));
  EXPECT_EQ(none.version, 1);
  EXPECT_EQ(none.bytes, std::nullopt);

  ASSERT_OK(PutForm(*db, "x", 1));
  ASSERT_OK(db->Flush());  // into a blob file, read back without checksums
  EXPECT_EQ(Stored(*db, "x", 1), Form(1));
  ASSERT_OK_AND_ASSIGN(AdapterStore::CurrentServingForm current, db->adapters().GetCurrentServingForm("acme", "x"));
  EXPECT_EQ(current.version, 1);
  EXPECT_THAT(current.bytes, Optional(Form(1)));
  // The version itself and the task record are untouched.
  ASSERT_OK_AND_ASSIGN(AdapterStore::Current canonical, db->adapters().GetCurrent("acme", "x"));
  EXPECT_EQ(canonical.bytes, MakeAdapterBytes("x", 0, 8192));
  EXPECT_THAT(canonical.task.versions(), ElementsAre(1));

  EXPECT_THAT(db->adapters().GetCurrentServingForm("acme", "nope"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db->adapters().GetServingForm("acme", "x", 0), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A database in a temp dir, and the keys left in it once closed.
class ServingFormKeysTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(db_, Database::Open(At(dir_.Sub("db")))); }

  // Every key of the adapters family under `prefix`, read after closing.
  std::vector<std::string> KeysUnder(const std::string& prefix) {
    EXPECT_OK(db_->Close());
    absl::StatusOr<std::vector<std::string>> keys = testing::RawKeys(dir_.Sub("db"), "adapters", prefix);
    EXPECT_OK(keys.status());
    return keys.ok() ? *keys : std::vector<std::string>();
  }

  TempDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(ServingFormKeysTest, RetentionRemovesTheServingFormsOfRemovedVersions) {
  ASSERT_OK(PromoteWithForms(*db_, "x", 2));
  ASSERT_OK(db_->PromoteAdapterVersion(Version("x")).status());  // keeps 2 and 3
  EXPECT_EQ(Stored(*db_, "x", 1), std::nullopt);
  EXPECT_EQ(Stored(*db_, "x", 2), Form(2));
  // Nothing else under the task's prefix: the removed version and its form are gone.
  EXPECT_THAT(KeysUnder("acme/x/"), ElementsAre(keys::Adapter("acme", "x", 2), keys::AdapterServingForm("acme", "x", 2),
                                                keys::Adapter("acme", "x", 3)));
}

TEST_F(ServingFormKeysTest, DeletingTheTaskRemovesItsServingForms) {
  ASSERT_OK(PromoteWithForms(*db_, "x", 2));
  ASSERT_OK(PromoteWithForms(*db_, "xy", 1));  // shares a prefix
  ASSERT_OK(db_->tasks().Delete("acme", "x"));
  EXPECT_EQ(Stored(*db_, "x", 2), std::nullopt);
  // A task recreated under the id starts at version 1 again, without the
  // old version 1's form.
  ASSERT_OK(db_->PromoteAdapterVersion(Version("x")).status());
  EXPECT_EQ(Stored(*db_, "x", 1), std::nullopt);
  EXPECT_THAT(KeysUnder("acme/"), ElementsAre(keys::Adapter("acme", "x", 1), keys::Adapter("acme", "xy", 1),
                                              keys::AdapterServingForm("acme", "xy", 1)));
}

TEST(ServingFormStore, NotStoredForAVersionDeletedSinceItsBytesWereRead) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(db->PromoteAdapterVersion(Version("x", /*keep=*/1)).status());
  // A loader takes the epoch and reads version 1; then the task is deleted
  // and recreated, and its new version 1 is other bytes.
  const uint64_t epoch = db->adapters().ServingFormEpoch();
  ASSERT_OK(db->tasks().Delete("acme", "x"));
  ASSERT_OK(db->PromoteAdapterVersion(Version("x", 1)).status());
  EXPECT_THAT(db->adapters().PutServingForm("acme", "x", 1, Form(1), epoch), StatusIs(absl::StatusCode::kAborted));
  // Retention counts as a deletion too.
  const uint64_t before_retention = db->adapters().ServingFormEpoch();
  ASSERT_OK(db->PromoteAdapterVersion(Version("x", 1)).status());  // removes version 1
  EXPECT_THAT(db->adapters().PutServingForm("acme", "x", 2, Form(2), before_retention),
              StatusIs(absl::StatusCode::kAborted));
  // A version the task does not list is refused whatever the epoch.
  EXPECT_THAT(PutForm(*db, "x", 1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(PutForm(*db, "other", 1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(Stored(*db, "x", 1), std::nullopt);
  // Promotions that delete nothing leave the epoch alone.
  const uint64_t now = db->adapters().ServingFormEpoch();
  ASSERT_OK(db->PromoteAdapterVersion(Version("y", 3)).status());
  EXPECT_EQ(db->adapters().ServingFormEpoch(), now);
  ASSERT_OK(PutForm(*db, "x", 2));
}

TEST(ServingFormStore, AServingFormIsNeverTakenForAVersion) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(db->PromoteAdapterVersion(Version("x", 3)).status());
  ASSERT_OK(PutForm(*db, "x", 1));
  // The next version is 2, its bytes are its own, the record lists 1 and 2.
  ASSERT_OK_AND_ASSIGN(PromotionResult r, db->PromoteAdapterVersion(Version("x", 3)));
  EXPECT_EQ(r.version, 2);
  ASSERT_OK_AND_ASSIGN(v1::TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_THAT(t.versions(), ElementsAre(1, 2));
  ASSERT_OK_AND_ASSIGN(std::string v1_bytes, db->adapters().Get("acme", "x", 1));
  EXPECT_OK(CheckAdapterBytes(v1_bytes, "x", 0));
  EXPECT_EQ(Stored(*db, "x", 1), Form(1));
}

TEST(ServingFormStore, BackupAndRestoreKeepAFlushedOne) {
  TempDir dir;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
    ASSERT_OK(db->PromoteAdapterVersion(Version("x")).status());
    ASSERT_OK(PutForm(*db, "x", 1));
    // Written past the WAL: a backup has it once a flush wrote it to a file
    // (one still in the memtable is rebuilt after a restore, like after a
    // crash).
    ASSERT_OK(db->Flush());
    ASSERT_OK(Backups::Create(*db, dir.Sub("backups"), 1).status());
  }
  ASSERT_OK(Backups::Restore(dir.Sub("backups"), 0, dir.Sub("restored")).status());
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("restored"))));
  EXPECT_EQ(Stored(*db, "x", 1), Form(1));
  ASSERT_OK_AND_ASSIGN(v1::TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_THAT(t.versions(), ElementsAre(1));
}

TEST(ServingFormStore, AFailedWriteStoresNothingAndReadsGoOn) {
  TempDir dir;
  Database::Options o = At(dir.Sub("db"));
  int64_t free_bytes = int64_t{1} << 40;
  o.min_free_bytes = 1 << 20;
  o.free_bytes = [&free_bytes] { return std::optional<int64_t>(free_bytes); };
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
  ASSERT_OK(db->PromoteAdapterVersion(Version("x")).status());
  free_bytes = 1 << 19;  // under the reserve: writes are refused
  EXPECT_THAT(PutForm(*db, "x", 1), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(Stored(*db, "x", 1), std::nullopt);
  EXPECT_OK(db->adapters().GetCurrent("acme", "x"));
}

}  // namespace
}  // namespace adapterd::storage
