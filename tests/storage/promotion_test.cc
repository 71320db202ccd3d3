// Atomic promotion of adapter versions: round trip, retention, task deletion,
// concurrency, and atomicity under SIGKILL of a writing process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::CheckAdapterBytes;
using ::adapterd::storage::testing::Child;
using ::adapterd::storage::testing::MakeAdapterBytes;
using ::adapterd::storage::testing::PromoteJobVersion;
using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using v1::CheckpointRecord;
using v1::JobEvent;
using v1::JobRecord;
using v1::TaskRecord;

Database::Options At(const std::string& path) {
  Database::Options o;
  o.path = path;
  return o;
}

JobRecord RunningJob(const std::string& id, const std::string& task) {
  JobRecord j;
  j.set_tenant("acme");
  j.set_job_id(id);
  j.set_task_id(task);
  j.set_state(v1::JOB_STATE_RUNNING);
  return j;
}

JobEvent Succeeded() {
  JobEvent e;
  e.mutable_state_change()->set_from(v1::JOB_STATE_RUNNING);
  e.mutable_state_change()->set_to(v1::JOB_STATE_SUCCEEDED);
  return e;
}

Promotion MakePromotion(const std::string& task, int64_t version, int keep = 2) {
  Promotion p;
  p.task.set_tenant("acme");
  p.task.set_task_id(task);
  p.task.add_labels("neg");
  p.task.add_labels("pos");
  p.task.mutable_adapter_config()->set_bottleneck_size(64);
  p.adapter_bytes = MakeAdapterBytes(task, version, 8192);
  p.expected_version = version;
  p.keep_versions = keep;
  return p;
}

TEST(PromoteAdapterVersion, WritesVersionTaskJobAndEventTogether) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    JobRecord job = RunningJob("job-x-1", "x");
    ASSERT_OK(db->jobs().Create(job));
    ASSERT_OK(db->jobs().AppendEvent("job-x-1", JobEvent()));
    CheckpointRecord c;
    c.set_job_id("job-x-1");
    ASSERT_OK(db->checkpoints().Put(c));

    int64_t event_seq = 0;
    ASSERT_OK_AND_ASSIGN(PromotionResult r,
                         PromoteJobVersion(*db, MakePromotion("x", 1), job, Succeeded(), &event_seq));
    EXPECT_EQ(r.version, 1);
    EXPECT_TRUE(r.removed_versions.empty());
    EXPECT_EQ(event_seq, 2);
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_EQ(t.current_version(), 1);
  EXPECT_EQ(t.latest_version(), 1);
  EXPECT_EQ(t.state(), v1::TASK_STATE_READY);
  EXPECT_EQ(t.current_job_id(), "job-x-1");
  EXPECT_EQ(t.adapter_config().bottleneck_size(), 64);
  ASSERT_OK_AND_ASSIGN(auto current, db->adapters().GetCurrent("acme", "x"));
  EXPECT_EQ(current.version, 1);
  EXPECT_OK(CheckAdapterBytes(current.bytes, "x", 1));
  ASSERT_OK_AND_ASSIGN(JobRecord job, db->jobs().Get("acme", "job-x-1"));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job.result_version(), 1);
  ASSERT_OK_AND_ASSIGN(auto events, db->jobs().ReadEvents("job-x-1", 2));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state_change().to(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(db->checkpoints().Get("job-x-1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("job-x-1")));
}

TEST(PromoteAdapterVersion, PendingTaskHasNoCurrentVersion) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  EXPECT_THAT(db->adapters().GetCurrent("acme", "x"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/x")));
  TaskRecord t;
  t.set_tenant("acme");
  t.set_task_id("x");
  t.set_created_at_micros(42);
  ASSERT_OK(db->tasks().Put(t));
  EXPECT_THAT(db->adapters().GetCurrent("acme", "x"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no ready version")));
  ASSERT_OK(db->PromoteAdapterVersion(MakePromotion("x", 1)).status());
  ASSERT_OK_AND_ASSIGN(TaskRecord got, db->tasks().Get("acme", "x"));
  EXPECT_EQ(got.created_at_micros(), 42);  // kept from the pending record
  EXPECT_OK(db->adapters().GetCurrent("acme", "x"));
}

// The task record carries its current version's file size, written with the
// version; a metadata-only task write keeps it.
TEST(PromoteAdapterVersion, TheTaskRecordCarriesTheCurrentFilesSize) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  for (int v = 1; v <= 2; ++v) {
    Promotion p = MakePromotion("x", v);
    p.adapter_bytes += std::string(static_cast<size_t>(v) * 100, 'p');  // each version its own size
    const auto size = static_cast<int64_t>(p.adapter_bytes.size());
    ASSERT_OK(db->PromoteAdapterVersion(std::move(p)).status());
    ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "x"));
    EXPECT_EQ(t.current_adapter_bytes(), size) << "version " << v;
    ASSERT_OK_AND_ASSIGN(std::string stored, db->adapters().Get("acme", "x", v));
    EXPECT_EQ(static_cast<int64_t>(stored.size()), size);
  }
  ASSERT_OK_AND_ASSIGN(TaskRecord before, db->tasks().Get("acme", "x"));
  TaskRecord renamed = before;
  renamed.clear_current_adapter_bytes();  // what a caller sends: the storage keeps its own
  ASSERT_OK(db->tasks().Put(renamed));
  ASSERT_OK_AND_ASSIGN(TaskRecord after, db->tasks().Get("acme", "x"));
  EXPECT_EQ(after.current_adapter_bytes(), before.current_adapter_bytes());
}

TEST(PromoteAdapterVersion, RetentionKeepsExactlyTheLastK) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  std::vector<std::vector<int64_t>> removed;
  for (int v = 1; v <= 5; ++v) {
    ASSERT_OK_AND_ASSIGN(PromotionResult r, db->PromoteAdapterVersion(MakePromotion("x", v)));
    EXPECT_EQ(r.version, v);
    removed.push_back(r.removed_versions);
  }
  EXPECT_THAT(removed, ElementsAre(ElementsAre(), ElementsAre(), ElementsAre(1), ElementsAre(2), ElementsAre(3)));
  ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_THAT(t.versions(), ElementsAre(4, 5));
  for (int v = 1; v <= 3; ++v) {
    EXPECT_THAT(db->adapters().Get("acme", "x", v),
                StatusIs(absl::StatusCode::kNotFound, HasSubstr(absl::StrCat("version ", v))));
  }
  for (int v = 4; v <= 5; ++v) {
    ASSERT_OK_AND_ASSIGN(std::string bytes, db->adapters().Get("acme", "x", v));
    EXPECT_OK(CheckAdapterBytes(bytes, "x", v));
  }
  // K can change per promotion: growing keeps more, shrinking trims at once.
  ASSERT_OK(db->PromoteAdapterVersion(MakePromotion("x", 6, /*keep=*/3)).status());
  ASSERT_OK_AND_ASSIGN(t, db->tasks().Get("acme", "x"));
  EXPECT_THAT(t.versions(), ElementsAre(4, 5, 6));
  ASSERT_OK_AND_ASSIGN(PromotionResult r, db->PromoteAdapterVersion(MakePromotion("x", 7, 1)));
  EXPECT_THAT(r.removed_versions, ElementsAre(4, 5, 6));
  ASSERT_OK_AND_ASSIGN(t, db->tasks().Get("acme", "x"));
  EXPECT_THAT(t.versions(), ElementsAre(7));
  ASSERT_OK(db->Close());
  ASSERT_OK_AND_ASSIGN(auto keys, testing::RawKeys(dir.Sub("db"), "adapters", "acme/x/"));
  EXPECT_THAT(keys, ElementsAre(keys::Adapter("acme", "x", 7)));
}

TEST(PromoteAdapterVersion, UnexpectedVersionWritesNothing) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  ASSERT_OK(db->PromoteAdapterVersion(MakePromotion("x", 1)).status());
  ASSERT_OK(db->jobs().Create(RunningJob("job-x-3", "x")));
  EXPECT_THAT(PromoteJobVersion(*db, MakePromotion("x", 3), RunningJob("job-x-3", "x"), Succeeded()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("next version is 2")));
  ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_EQ(t.current_version(), 1);
  ASSERT_OK_AND_ASSIGN(JobRecord job, db->jobs().Get("acme", "job-x-3"));
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(db->adapters().Get("acme", "x", 3), StatusIs(absl::StatusCode::kNotFound, HasSubstr("version 3")));
  // expected_version 0 takes whatever is next; no job is needed (an import).
  Promotion import = MakePromotion("x", 0);
  ASSERT_OK_AND_ASSIGN(PromotionResult r, db->PromoteAdapterVersion(std::move(import)));
  EXPECT_EQ(r.version, 2);
  ASSERT_OK_AND_ASSIGN(t, db->tasks().Get("acme", "x"));
  EXPECT_EQ(t.current_job_id(), "");
}

TEST(TaskStore, DeleteRemovesTaskAndEveryVersionAtomically) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    for (int v = 1; v <= 3; ++v) ASSERT_OK(db->PromoteAdapterVersion(MakePromotion("x", v, 3)).status());
    ASSERT_OK(db->PromoteAdapterVersion(MakePromotion("xy", 1)).status());  // shares a prefix
    ASSERT_OK(db->tasks().Delete("acme", "x"));
    EXPECT_THAT(db->tasks().Get("acme", "x"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/x")));
    for (int v = 1; v <= 3; ++v) {
      EXPECT_THAT(db->adapters().Get("acme", "x", v), StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/x")));
    }
    EXPECT_OK(db->adapters().GetCurrent("acme", "xy"));
    // A new task under the same id starts again at version 1.
    ASSERT_OK_AND_ASSIGN(PromotionResult r, db->PromoteAdapterVersion(MakePromotion("x", 1)));
    EXPECT_EQ(r.version, 1);
  }
  ASSERT_OK_AND_ASSIGN(auto keys, testing::RawKeys(path, "adapters", "acme/"));
  EXPECT_THAT(keys, ElementsAre(keys::Adapter("acme", "x", 1), keys::Adapter("acme", "xy", 1)));
}

TEST(PromoteAdapterVersion, ConcurrentPromotionsOfOneTaskGetDistinctVersions) {
  TempDir dir;
  Database::Options o = At(dir.Sub("db"));
  o.sync_writes = false;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
  constexpr int kThreads = 4;
  constexpr int kEach = 10;
  std::vector<std::vector<int64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        Promotion p = MakePromotion("x", 0, /*keep=*/kThreads * kEach);
        p.adapter_bytes = absl::StrCat("thread ", t, " item ", i);
        auto r = db->PromoteAdapterVersion(std::move(p));
        if (r.ok()) got[t].push_back(r->version);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::map<int64_t, int> count;
  for (const auto& g : got) {
    for (int64_t v : g) ++count[v];
  }
  ASSERT_EQ(count.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(count.begin()->first, 1);
  EXPECT_EQ(count.rbegin()->first, kThreads * kEach);
  ASSERT_OK_AND_ASSIGN(TaskRecord t, db->tasks().Get("acme", "x"));
  EXPECT_EQ(t.current_version(), kThreads * kEach);
  EXPECT_EQ(t.versions_size(), kThreads * kEach);
}

// Invariants after a writer was SIGKILLed at an arbitrary point (see
// crash_child.cc): each task's record, adapter bytes, jobs, events and
// checkpoints agree, whatever write the kill interrupted.
void CheckCrashInvariants(const std::string& path, int num_tasks, int keep, std::map<std::string, int64_t>& last_seen,
                          int64_t* total_versions) {
  *total_versions = 0;
  std::map<std::string, std::vector<int64_t>> expected_versions;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    for (int i = 0; i < num_tasks; ++i) {
      const std::string task = absl::StrCat("task", i);
      SCOPED_TRACE(task);
      int64_t cur = 0;
      auto rec = db->tasks().Get("t", task);
      if (rec.ok()) {
        cur = rec->current_version();
        ASSERT_GE(cur, 1);
        EXPECT_EQ(rec->latest_version(), cur);
        EXPECT_EQ(rec->state(), v1::TASK_STATE_READY);
        EXPECT_EQ(rec->current_job_id(), absl::StrCat("job-", task, "-", cur));
        std::vector<int64_t> want;
        for (int64_t v = std::max<int64_t>(1, cur - keep + 1); v <= cur; ++v) want.push_back(v);
        EXPECT_EQ(std::vector<int64_t>(rec->versions().begin(), rec->versions().end()), want);
        expected_versions[task] = want;
        for (int64_t v : want) {
          ASSERT_OK_AND_ASSIGN(std::string bytes, db->adapters().Get("t", task, v));
          EXPECT_OK(CheckAdapterBytes(bytes, task, v)) << "version " << v;
        }
      } else {
        ASSERT_THAT(rec, StatusIs(absl::StatusCode::kNotFound, HasSubstr(task)));
        expected_versions[task] = {};
      }
      EXPECT_GE(cur, last_seen[task]) << "a synced promotion was lost";
      last_seen[task] = cur;
      *total_versions += cur;

      for (int64_t v = 1; v <= cur; ++v) {
        const std::string job_id = absl::StrCat("job-", task, "-", v);
        ASSERT_OK_AND_ASSIGN(JobRecord job, db->jobs().Get("t", job_id));
        EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job_id;
        EXPECT_EQ(job.result_version(), v) << job_id;
        EXPECT_THAT(db->checkpoints().Get(job_id), StatusIs(absl::StatusCode::kNotFound, HasSubstr(job_id)));
        ASSERT_OK_AND_ASSIGN(auto events, db->jobs().ReadEvents(job_id, 1));
        ASSERT_FALSE(events.empty()) << job_id;
        for (size_t e = 0; e < events.size(); ++e) EXPECT_EQ(events[e].seq(), static_cast<int64_t>(e + 1));
        EXPECT_EQ(events.back().state_change().to(), v1::JOB_STATE_SUCCEEDED) << job_id;
      }
      // The job in flight when the child died never looks finished.
      const std::string next = absl::StrCat("job-", task, "-", cur + 1);
      auto in_flight = db->jobs().Get("t", next);
      if (in_flight.ok()) {
        EXPECT_EQ(in_flight->state(), v1::JOB_STATE_RUNNING) << next;
        ASSERT_OK_AND_ASSIGN(auto events, db->jobs().ReadEvents(next, 1));
        for (const auto& e : events) {
          EXPECT_NE(e.state_change().to(), v1::JOB_STATE_SUCCEEDED) << next;
        }
      } else {
        EXPECT_THAT(in_flight, StatusIs(absl::StatusCode::kNotFound, HasSubstr(next)));
      }
      EXPECT_THAT(db->jobs().Get("t", absl::StrCat("job-", task, "-", cur + 2)),
                  StatusIs(absl::StatusCode::kNotFound, HasSubstr("job-")));
    }
  }
  // No adapter bytes exist beyond (or besides) what the records point at.
  std::vector<std::string> want_keys;
  for (const auto& [task, want] : expected_versions) {
    for (int64_t v : want) want_keys.push_back(keys::Adapter("t", task, v));
  }
  ASSERT_OK_AND_ASSIGN(auto stored_keys, testing::RawKeys(path, "adapters", "t/"));
  EXPECT_EQ(stored_keys, want_keys);
}

TEST(PromoteAdapterVersion, KilledWriterLeavesNoPartialPromotion) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  constexpr int kTasks = 4;
  constexpr int kKeep = 2;
  // Kill delays after the child reports ready; each round resumes from the
  // previous round's state. The child spends most of its time promoting, so
  // if a promotion were two writes instead of one batch, a kill would land
  // between them with probability ~0.3-0.4 (measured by splitting the write:
  // the mutant was caught in 20 of 20 runs). Total about 4 s.
  const int kDelaysMs[] = {3, 11, 29, 47, 71, 97, 131, 173, 229, 307, 401, 523};
  std::map<std::string, int64_t> last_seen;
  int64_t total = 0;
  int64_t previous_total = 0;
  int rounds_with_progress = 0;
  for (int delay : kDelaysMs) {
    SCOPED_TRACE(absl::StrCat("kill after ", delay, " ms"));
    ASSERT_OK_AND_ASSIGN(Child child, Child::Start({"promote", path, std::to_string(kTasks), std::to_string(kKeep)},
                                                   dir.Sub("child.err")));
    ASSERT_OK(child.WaitReady(10000));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    int status = 0;
    ASSERT_FALSE(child.TryWait(&status)) << "child exited early: " << child.Stderr();
    status = child.KillAndWait();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << child.Stderr();
    CheckCrashInvariants(path, kTasks, kKeep, last_seen, &total);
    if (::testing::Test::HasFatalFailure()) return;
    if (total > previous_total) ++rounds_with_progress;
    previous_total = total;
  }
  // The kills must have interrupted real work, not an idle process.
  EXPECT_GE(rounds_with_progress, 3);
  EXPECT_GT(total, 20) << "the child promoted too little to test anything";
  RecordProperty("promotions", static_cast<int>(total));
  std::printf("[          ] %lld promotions over %zu kills\n", static_cast<long long>(total), std::size(kDelaysMs));
}

}  // namespace
}  // namespace adapterd::storage
