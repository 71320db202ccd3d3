// The job queue over a real RocksDB: state machine, fairness, idempotency,
// limits, cancellation in every state, events, and restart recovery.
#include "server/training/job_manager.h"
#include "common/testing/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "server/model/adapter_set.h"
#include "storage/database.h"

namespace adapterd::training {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

// Accepts any dataset except ones named "bad*", which it rejects as the real
// validator would (naming an example).
absl::StatusOr<ValidationOutcome> FakeValidator(const storage::v1::JobRecord& job) {
  for (const std::string& d : job.dataset_ids()) {
    if (d.starts_with("bad")) return absl::InvalidArgumentError("train example 3: text is empty");
  }
  ValidationOutcome out;
  out.labels = {"neg", "pos"};
  out.num_train_examples = 10;
  if (job.task_id() == "warn") out.warnings = {"labels are imbalanced"};
  if (job.task_id() == "resolved") {
    out.hyperparameters = job.hyperparameters();
    out.hyperparameters->set_epochs(7);  // as if from the server's defaults
  }
  return out;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void TearDown() override {
    queue_.reset();
    db_.reset();
  }
  void Reopen(QueueLimits limits = {}) {
    queue_.reset();
    db_.reset();
    auto db = storage::Database::Open({.path = dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    auto q = JobManager::Create({.db = db_.get(),
                                 .limits = limits,
                                 .validator = FakeValidator,
                                 .on_task_changed = [this](const std::string& tenant, const std::string& task) {
                                   changed_.push_back(tenant + "/" + task);
                                 }});
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
  }
  JobRequest Request(const std::string& tenant, const std::string& task, const std::string& request_id = "") {
    JobRequest r;
    r.tenant = tenant;
    r.task_id = task;
    r.request_id = request_id;
    r.dataset_ids = {"ds1"};
    r.max_queued_for_tenant = 16;
    return r;
  }
  std::vector<storage::v1::JobState> States(const std::string& tenant, const std::string& job_id) {
    std::vector<storage::v1::JobState> out;
    auto events = db_->jobs().ReadEvents(job_id, 1);
    EXPECT_TRUE(events.ok());
    for (const storage::v1::JobEvent& e : *events) {
      if (e.has_state_change()) out.push_back(e.state_change().to());
    }
    return out;
  }

  ::adapterd::testing::TempDir tmp_{"queue"};
  std::string dir_ = tmp_.path();
  std::unique_ptr<storage::Database> db_;
  std::unique_ptr<JobManager> queue_;
  // "tenant/task" of every on_task_changed call, in order.
  std::vector<std::string> changed_;
};

TEST(JobStateMachine, LegalAndIllegalTransitions) {
  using S = storage::v1::JobState;
  const std::vector<std::pair<S, S>> legal = {
      {storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED},
      {storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_FAILED},
      {storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_CANCELLED},
      {storage::v1::JOB_STATE_QUEUED, storage::v1::JOB_STATE_RUNNING},
      {storage::v1::JOB_STATE_QUEUED, storage::v1::JOB_STATE_CANCELLED},
      {storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_SUCCEEDED},
      {storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_FAILED},
      {storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_CANCELLING},
      {storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_CANCELLED},
      {storage::v1::JOB_STATE_CANCELLING, storage::v1::JOB_STATE_CANCELLED},
      {storage::v1::JOB_STATE_CANCELLING, storage::v1::JOB_STATE_FAILED},
  };
  int checked = 0;
  for (int f = storage::v1::JOB_STATE_UNSPECIFIED; f <= storage::v1::JOB_STATE_CANCELLED; ++f) {
    for (int t = storage::v1::JOB_STATE_UNSPECIFIED; t <= storage::v1::JOB_STATE_CANCELLED; ++t) {
      const bool want = std::find(legal.begin(), legal.end(), std::pair{S(f), S(t)}) != legal.end();
      absl::Status s = CheckTransition(S(f), S(t));
      EXPECT_EQ(s.ok(), want) << JobStateName(S(f)) << " -> " << JobStateName(S(t));
      if (!want) {
        EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 64);
  for (S terminal :
       {storage::v1::JOB_STATE_SUCCEEDED, storage::v1::JOB_STATE_FAILED, storage::v1::JOB_STATE_CANCELLED}) {
    EXPECT_TRUE(IsTerminal(terminal));
  }
}

TEST(TaskKinds, AJobsKindIsTheRequestsTheTasksOrClassificationAndOnlyClassificationTrainsYet) {
  using storage::v1::TaskKind;
  EXPECT_EQ(ResolveTaskKind(storage::v1::TASK_KIND_UNSPECIFIED, nullptr).value_or(storage::v1::TASK_KIND_UNSPECIFIED),
            storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION);
  storage::v1::TaskRecord old;  // written before kinds existed
  old.set_task_id("t");
  EXPECT_EQ(ResolveTaskKind(storage::v1::TASK_KIND_UNSPECIFIED, &old).value_or(storage::v1::TASK_KIND_UNSPECIFIED),
            storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION);
  EXPECT_EQ(ResolveTaskKind(storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION, &old)
                .value_or(storage::v1::TASK_KIND_UNSPECIFIED),
            storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION);
  EXPECT_THAT(ResolveTaskKind(storage::v1::TASK_KIND_REGRESSION, &old),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("task 't' is of kind sequence_classification; a job cannot train it as regression")));
  storage::v1::TaskRecord qa;
  qa.set_task_id("q");
  qa.set_task_kind(storage::v1::TASK_KIND_EXTRACTIVE_QA);
  EXPECT_EQ(ResolveTaskKind(storage::v1::TASK_KIND_UNSPECIFIED, &qa).value_or(storage::v1::TASK_KIND_UNSPECIFIED),
            storage::v1::TASK_KIND_EXTRACTIVE_QA);
  EXPECT_THAT(ResolveTaskKind(storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION, &qa),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("'q' is of kind extractive_qa")));
  EXPECT_EQ(ResolveTaskKind(storage::v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION, nullptr)
                .value_or(storage::v1::TASK_KIND_UNSPECIFIED),
            storage::v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION);
  EXPECT_THAT(ResolveTaskKind(static_cast<TaskKind>(42), nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(JobManagerTest, SubmitValidatesThenPersistsQueuedWithItsHistory) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "warn")));
  EXPECT_EQ(job.state(), storage::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.labels_size(), 2);
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord stored, queue_->Get("acme", job.job_id()));
  EXPECT_EQ(stored.state(), storage::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(States("acme", job.job_id()),
            (std::vector<storage::v1::JobState>{storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED}));
  ASSERT_OK_AND_ASSIGN(auto events, db_->jobs().ReadEvents(job.job_id(), 1));
  bool warned = false;
  for (const auto& e : events) warned |= e.has_warning() && e.warning().message() == "labels are imbalanced";
  EXPECT_TRUE(warned);
  EXPECT_EQ(stored.attempts(), 0);  // not started yet
}

TEST_F(JobManagerTest, TheJobStoresTheHyperparametersValidationResolved) {
  JobRequest r = Request("acme", "resolved", "req-1");
  r.hyperparameters.set_learning_rate(0.5);
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(r));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord stored, queue_->Get("acme", job.job_id()));
  EXPECT_EQ(stored.hyperparameters().epochs(), 7);
  EXPECT_DOUBLE_EQ(stored.hyperparameters().learning_rate(), 0.5);
  // Idempotency compares the request as sent, not the stored resolution.
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord again, queue_->Submit(r));
  EXPECT_EQ(again.job_id(), job.job_id());
}

TEST_F(JobManagerTest, InvalidDataIsRefusedStoringNothingAndFreeingTheRequestId) {
  JobRequest r = Request("acme", "t", "req-7");
  r.dataset_ids = {"bad-data"};
  for (int i = 0; i < 5; ++i) {
    EXPECT_THAT(queue_->Submit(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("train example 3")));
  }
  ASSERT_OK_AND_ASSIGN(auto page, queue_->List({.tenant = "acme"}));
  EXPECT_TRUE(page.jobs.empty()) << page.jobs.size() << " jobs stored";
  EXPECT_THAT(db_->jobs().FindByRequestId("acme", "req-7"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(queue_->queued(), 0);
  // The corrected request may use the same request_id.
  r.dataset_ids = {"good-data"};
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(r));
  EXPECT_EQ(job.state(), storage::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(queue_->queued(), 1);
}

TEST_F(JobManagerTest, ServesTenantsRoundRobinInAScriptedOrder) {
  std::vector<std::pair<std::string, std::string>> arrivals = {{"A", "a1"}, {"A", "a2"}, {"A", "a3"}, {"B", "b1"},
                                                               {"C", "c1"}, {"A", "a4"}, {"B", "b2"}};
  std::map<std::string, std::string> task_of_job;
  for (auto& [tenant, task] : arrivals) {
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord j, queue_->Submit(Request(tenant, task)));
    task_of_job[j.job_id()] = task;
  }
  std::vector<std::string> served;
  while (auto job = queue_->NextJob(absl::ZeroDuration())) {
    EXPECT_EQ(job->state(), storage::v1::JOB_STATE_RUNNING);
    served.push_back(job->task_id());
    ASSERT_OK(queue_->Fail(*job, absl::InternalError("not training in this test")));
  }
  EXPECT_EQ(served, (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3", "a4"}));
}

TEST_F(JobManagerTest, RequestIdMakesCreationIdempotent) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord first, queue_->Submit(Request("acme", "t", "req-1")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord again, queue_->Submit(Request("acme", "t", "req-1")));
  EXPECT_EQ(first.job_id(), again.job_id());
  EXPECT_EQ(queue_->queued(), 1);
  JobRequest different = Request("acme", "t", "req-1");
  different.hyperparameters.set_epochs(7);
  EXPECT_THAT(queue_->Submit(different),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("already used for a different request")));
  // Another tenant may use the same request id independently.
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord other, queue_->Submit(Request("globex", "t", "req-1")));
  EXPECT_NE(other.job_id(), first.job_id());
  // And it survives a restart.
  Reopen();
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord after, queue_->Submit(Request("acme", "t", "req-1")));
  EXPECT_EQ(after.job_id(), first.job_id());
}

TEST_F(JobManagerTest, LimitsArePerTenantAndTotal) {
  Reopen({.max_queued_total = 4});
  // Each request carries its tenant's quota: A's is 2, B's 3.
  auto request = [&](const std::string& tenant, const std::string& task, int64_t quota) {
    JobRequest r = Request(tenant, task);
    r.max_queued_for_tenant = quota;
    return r;
  };
  ASSERT_OK(queue_->Submit(request("A", "1", 2)).status());
  ASSERT_OK(queue_->Submit(request("A", "2", 2)).status());
  EXPECT_THAT(queue_->Submit(request("A", "3", 2)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("tenant 'A' already has 2 jobs waiting; its limit is 2")));
  ASSERT_OK(queue_->Submit(request("B", "1", 3)).status());
  ASSERT_OK(queue_->Submit(request("B", "2", 3)).status());
  EXPECT_THAT(queue_->Submit(request("B", "3", 3)),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("queue is full")));
  // A job leaving the queue frees its slot.
  auto job = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(job.has_value());
  EXPECT_OK(queue_->Submit(request("B", "3", 3)).status());
  // A request without its tenant's quota is the caller's mistake.
  EXPECT_THAT(queue_->Submit(request("C", "1", 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_queued_for_tenant")));
}

TEST_F(JobManagerTest, CancelInEveryState) {
  // QUEUED -> CANCELLED at once, and it never runs.
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord queued, queue_->Submit(Request("acme", "q")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord c1, queue_->Cancel("acme", queued.job_id()));
  EXPECT_EQ(c1.state(), storage::v1::JOB_STATE_CANCELLED);
  EXPECT_FALSE(queue_->NextJob(absl::ZeroDuration()).has_value());
  // RUNNING -> CANCELLING; the worker sees it and finishes CANCELLED.
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord running, queue_->Submit(Request("acme", "r")));
  auto taken = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(taken.has_value());
  EXPECT_FALSE(queue_->CancelRequested(running.job_id()));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord c2, queue_->Cancel("acme", running.job_id()));
  EXPECT_EQ(c2.state(), storage::v1::JOB_STATE_CANCELLING);
  EXPECT_TRUE(queue_->CancelRequested(running.job_id()));
  // CANCELLING again is a no-op answer.
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord c3, queue_->Cancel("acme", running.job_id()));
  EXPECT_EQ(c3.state(), storage::v1::JOB_STATE_CANCELLING);
  // A promotion racing the cancel loses: CANCELLING -> SUCCEEDED is illegal.
  storage::v1::TaskRecord task;
  task.set_tenant("acme");
  task.set_task_id("r");
  EXPECT_THAT(queue_->Complete(*taken, task, "bytes", 2), StatusIs(absl::StatusCode::kFailedPrecondition));
  // ... and writes nothing: no task, no version, the job still CANCELLING.
  EXPECT_THAT(db_->tasks().Get("acme", "r"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db_->adapters().Get("acme", "r", 1), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord after_race, queue_->Get("acme", running.job_id()));
  EXPECT_EQ(after_race.state(), storage::v1::JOB_STATE_CANCELLING);
  ASSERT_OK(queue_->FinishCancelled(*taken));
  EXPECT_EQ(States("acme", running.job_id()),
            (std::vector<storage::v1::JobState>{storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED,
                                                storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_CANCELLING,
                                                storage::v1::JOB_STATE_CANCELLED}));
  EXPECT_THAT(db_->tasks().Get("acme", "r"), StatusIs(absl::StatusCode::kNotFound));
  // Terminal states cannot be cancelled.
  for (const std::string& id : {queued.job_id(), running.job_id()}) {
    EXPECT_THAT(queue_->Cancel("acme", id),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("can no longer be cancelled")));
  }
  ASSERT_OK(queue_->Submit(Request("acme", "f")).status());
  auto failing = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(failing.has_value());
  ASSERT_OK(queue_->Fail(*failing, absl::InternalError("boom")));
  ASSERT_OK_AND_ASSIGN(auto page, queue_->List({.tenant = "acme", .states = {storage::v1::JOB_STATE_FAILED}}));
  ASSERT_EQ(page.jobs.size(), 1u);
  EXPECT_THAT(queue_->Cancel("acme", page.jobs[0].job_id()), StatusIs(absl::StatusCode::kFailedPrecondition));
  // Another tenant's job is NOT_FOUND, not "not yours".
  EXPECT_THAT(queue_->Cancel("globex", running.job_id()), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, CompletePromotesAtomically) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "sent")));
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  storage::v1::TaskRecord task;
  task.set_tenant("acme");
  task.set_task_id("sent");
  task.add_labels("neg");
  task.add_labels("pos");
  ASSERT_OK_AND_ASSIGN(storage::PromotionResult r, queue_->Complete(*running, task, "adapter-v1", 2));
  EXPECT_EQ(r.version, 1);
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord done, queue_->Get("acme", job.job_id()));
  EXPECT_EQ(done.state(), storage::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.result_version(), 1);
  ASSERT_OK_AND_ASSIGN(storage::v1::TaskRecord t, db_->tasks().Get("acme", "sent"));
  EXPECT_EQ(t.current_version(), 1);
  ASSERT_OK_AND_ASSIGN(std::string bytes, db_->adapters().Get("acme", "sent", 1));
  EXPECT_EQ(bytes, "adapter-v1");
  EXPECT_THAT(queue_->Fail(done, absl::InternalError("late")), StatusIs(absl::StatusCode::kFailedPrecondition));
  // The task's times: created with its first version, updated with each.
  EXPECT_GT(t.created_at_micros(), 0);
  EXPECT_EQ(t.updated_at_micros(), t.created_at_micros());
  ASSERT_OK(queue_->Submit(Request("acme", "sent", "again")).status());
  auto second = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(second.has_value());
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_OK(queue_->Complete(*second, task, "adapter-v2", 2).status());
  ASSERT_OK_AND_ASSIGN(storage::v1::TaskRecord t2, db_->tasks().Get("acme", "sent"));
  EXPECT_EQ(t2.current_version(), 2);
  EXPECT_EQ(t2.created_at_micros(), t.created_at_micros());
  EXPECT_GT(t2.updated_at_micros(), t.updated_at_micros());
}

// Serving's one subscription: a promotion, an import and a delete each tell
// it once which task changed; a refused import or training tells it nothing.
TEST_F(JobManagerTest, EveryChangeOfATasksAdaptersIsAnnouncedOnce) {
  ASSERT_OK(queue_->Submit(Request("acme", "trained")).status());
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  const storage::v1::TaskRecord trained =
      TaskRecordFor("acme", "trained", {.bottleneck_size = 16, .labels = {"neg", "pos"}}, "sha256:e");
  ASSERT_OK(queue_->Complete(*running, trained, "adapter-v1", 2).status());
  EXPECT_THAT(changed_, ::testing::ElementsAre("acme/trained"));

  const storage::v1::TaskRecord imported = TaskRecordFor(
      "acme", "imported", {.bottleneck_size = 8, .activation = model::Activation::kRelu, .labels = {"a", "b", "c"}},
      "sha256:e");
  ASSERT_OK_AND_ASSIGN(storage::PromotionResult r, queue_->ImportVersion(imported, "adapter-file"));
  EXPECT_EQ(r.version, 1);
  ASSERT_OK_AND_ASSIGN(storage::v1::TaskRecord stored, db_->tasks().Get("acme", "imported"));
  EXPECT_THAT(stored.labels(), ::testing::ElementsAre("a", "b", "c"));
  EXPECT_EQ(stored.adapter_config().bottleneck_size(), 8);
  EXPECT_EQ(stored.adapter_config().activation(), "relu");
  EXPECT_EQ(stored.task_kind(), storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION);
  EXPECT_GT(stored.created_at_micros(), 0);
  // Importing onto an existing task, trained or imported, is refused.
  EXPECT_THAT(queue_->ImportVersion(imported, "again"), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(queue_->ImportVersion(trained, "again"), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(changed_, ::testing::ElementsAre("acme/trained", "acme/imported"));

  ASSERT_OK(queue_->DeleteTask("acme", "imported"));
  EXPECT_THAT(changed_, ::testing::ElementsAre("acme/trained", "acme/imported", "acme/imported"));
  ASSERT_OK_AND_ASSIGN(std::string bytes, db_->adapters().Get("acme", "trained", 1));
  EXPECT_EQ(bytes, "adapter-v1");
}

storage::v1::TaskRecord TaskOf(const std::string& tenant, const std::string& task_id) {
  storage::v1::TaskRecord task;
  task.set_tenant(tenant);
  task.set_task_id(task_id);
  task.add_labels("neg");
  task.add_labels("pos");
  return task;
}

// Train T, start a retrain, delete T: the delete cancels the retrain, so it
// cannot bring T back when it would have finished.
// Order 1: the delete lands while the retrain runs.
TEST_F(JobManagerTest, DeletingATaskCancelsItsRunningAndQueuedJobsAndNoneBringsItBack) {
  ASSERT_OK(queue_->Submit(Request("acme", "t")).status());
  auto first = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(first.has_value());
  ASSERT_OK(queue_->Complete(*first, TaskOf("acme", "t"), "v1", 2).status());
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord retrain, queue_->Submit(Request("acme", "t")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord queued, queue_->Submit(Request("acme", "t")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord other, queue_->Submit(Request("acme", "u")));
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  ASSERT_EQ(running->job_id(), retrain.job_id());

  ASSERT_OK(queue_->DeleteTask("acme", "t"));
  EXPECT_THAT(db_->tasks().Get("acme", "t"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord q, queue_->Get("acme", queued.job_id()));
  EXPECT_EQ(q.state(), storage::v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(q.error_message(), "task deleted");
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord r, queue_->Get("acme", retrain.job_id()));
  EXPECT_EQ(r.state(), storage::v1::JOB_STATE_CANCELLING);
  EXPECT_TRUE(queue_->CancelRequested(retrain.job_id()));
  // The retrain's promotion, had it finished in the same instant, is refused.
  EXPECT_THAT(queue_->Complete(*running, TaskOf("acme", "t"), "v2", 2),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(queue_->FinishCancelled(*running));
  ASSERT_OK_AND_ASSIGN(r, queue_->Get("acme", retrain.job_id()));
  EXPECT_EQ(r.state(), storage::v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(r.error_message(), "task deleted");
  ASSERT_OK_AND_ASSIGN(auto events, db_->jobs().ReadEvents(retrain.job_id(), 1));
  EXPECT_EQ(events.back().state_change().reason(), "task deleted");
  EXPECT_THAT(db_->tasks().Get("acme", "t"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db_->adapters().Get("acme", "t", 1), StatusIs(absl::StatusCode::kNotFound));
  // The cancelled queued job never runs; the other task's job does.
  auto next = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->job_id(), other.job_id());
  // A job submitted after the delete trains a new task of that name.
  ASSERT_OK(queue_->Complete(*next, TaskOf("acme", "u"), "u1", 2).status());
  ASSERT_OK(queue_->Submit(Request("acme", "t")).status());
  auto again = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(again.has_value());
  ASSERT_OK_AND_ASSIGN(storage::PromotionResult fresh, queue_->Complete(*again, TaskOf("acme", "t"), "new", 2));
  EXPECT_EQ(fresh.version, 1);
}

// Order 2: the retrain's promotion commits first; the delete that follows
// removes the new version with the task, and the job stays SUCCEEDED.
TEST_F(JobManagerTest, DeletingATaskRightAfterItsJobPromotedRemovesTheNewVersion) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "t")));
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  ASSERT_OK(queue_->Complete(*running, TaskOf("acme", "t"), "v1", 2).status());
  ASSERT_OK(queue_->DeleteTask("acme", "t"));
  EXPECT_THAT(db_->tasks().Get("acme", "t"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(db_->adapters().Get("acme", "t", 1), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord done, queue_->Get("acme", job.job_id()));
  EXPECT_EQ(done.state(), storage::v1::JOB_STATE_SUCCEEDED);
  // Nothing left to delete.
  EXPECT_THAT(queue_->DeleteTask("acme", "t"), StatusIs(absl::StatusCode::kNotFound));
}

// A task whose first training is still running has no record; deleting it
// stops the training, so it never appears.
TEST_F(JobManagerTest, DeletingATaskDuringItsFirstTrainingStopsIt) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "new")));
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  ASSERT_OK(queue_->DeleteTask("acme", "new"));
  EXPECT_THAT(queue_->Complete(*running, TaskOf("acme", "new"), "v1", 2),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(queue_->FinishCancelled(*running));
  EXPECT_THAT(db_->tasks().Get("acme", "new"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(queue_->DeleteTask("acme", "never"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, ADatasetAnUnfinishedJobUsesCannotBeDeleted) {
  for (const char* id : {"ds1", "val", "free"}) {
    storage::v1::DatasetRecord rec;
    rec.set_tenant("acme");
    rec.set_dataset_id(id);
    rec.set_num_chunks(1);
    storage::v1::DatasetChunk chunk;
    chunk.add_examples()->set_text("x");
    ASSERT_OK(db_->datasets().Put(rec, {chunk}));
  }
  JobRequest r = Request("acme", "t");
  r.validation_dataset_id = "val";
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(r));
  EXPECT_THAT(queue_->DeleteDataset("acme", "ds1"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(job.job_id())));
  EXPECT_THAT(queue_->DeleteDataset("acme", "val"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr(job.job_id())));
  ASSERT_OK_AND_ASSIGN(storage::v1::DatasetRecord gone, queue_->DeleteDataset("acme", "free"));
  EXPECT_EQ(gone.dataset_id(), "free");
  EXPECT_THAT(db_->datasets().Get("acme", "free"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(queue_->DeleteDataset("acme", "free"), StatusIs(absl::StatusCode::kNotFound));
  // Another tenant's dataset of the same name is NOT_FOUND.
  EXPECT_THAT(queue_->DeleteDataset("globex", "ds1"), StatusIs(absl::StatusCode::kNotFound));
  // Running still counts; once the job is over the data can go.
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  EXPECT_THAT(queue_->DeleteDataset("acme", "ds1"), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(queue_->Fail(*running, absl::InternalError("boom")));
  ASSERT_OK(queue_->DeleteDataset("acme", "ds1").status());
  ASSERT_OK(queue_->DeleteDataset("acme", "val").status());
}

// A cancel asks the worker to stop before it commits RUNNING -> CANCELLING,
// so a worker that stops at once can read RUNNING and find CANCELLING when
// it writes CANCELLED. It ends the job from the state it finds, never
// leaving it CANCELLING for good.
// The worker ends its job as soon as it sees the cancel request, which may
// be before the cancel's own write: both succeed, and the job ends CANCELLED.
TEST_F(JobManagerTest, ACancelRacingTheWorkersEndSucceedsAndEndsIt) {
  for (int i = 0; i < 60; ++i) {
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", absl::StrCat("race-", i))));
    auto running = queue_->NextJob(absl::ZeroDuration());
    ASSERT_TRUE(running.has_value());
    absl::Status cancelled;
    std::thread canceller([&] { cancelled = queue_->Cancel("acme", job.job_id()).status(); });
    while (!queue_->CancelRequested(job.job_id())) std::this_thread::yield();
    EXPECT_OK(queue_->FinishCancelled(*running)) << "iteration " << i;
    canceller.join();
    EXPECT_OK(cancelled) << "iteration " << i;
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord done, queue_->Get("acme", job.job_id()));
    ASSERT_EQ(done.state(), storage::v1::JOB_STATE_CANCELLED) << "iteration " << i;
  }
}

TEST_F(JobManagerTest, EveryRecordedEventCarriesWhenItHappened) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "t")));
  auto running = queue_->NextJob(absl::ZeroDuration());
  ASSERT_TRUE(running.has_value());
  storage::v1::JobEvent progress;  // no time: the commit's
  progress.mutable_progress()->set_step(10);
  ASSERT_OK(queue_->RecordEvent(*running, progress));
  storage::v1::JobEvent given;  // a time of its own is kept
  given.set_time_micros(42);
  given.mutable_warning()->set_kind("note");
  ASSERT_OK(queue_->RecordEvent(*running, given));
  ASSERT_OK_AND_ASSIGN(auto events, queue_->WaitForEvents("acme", job.job_id(), 0, absl::ZeroDuration()));
  ASSERT_GE(events.size(), 4u);  // VALIDATING, QUEUED, RUNNING, progress, warning
  for (const auto& e : events) {
    if (e.has_warning()) {
      EXPECT_EQ(e.time_micros(), 42);
    } else {
      EXPECT_GE(e.time_micros(), job.created_at_micros()) << e.ShortDebugString();
    }
  }
  EXPECT_EQ(events.back().warning().kind(), "note");
}

TEST_F(JobManagerTest, WatchingGivesTheSnapshotThenNewEventsUntilTerminal) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(Request("acme", "w")));
  ASSERT_OK_AND_ASSIGN(auto snapshot, queue_->WaitForEvents("acme", job.job_id(), 0, absl::ZeroDuration()));
  ASSERT_EQ(snapshot.size(), 2u);  // VALIDATING, QUEUED
  const int64_t last = snapshot.back().seq();
  std::thread worker([&] {
    absl::SleepFor(absl::Milliseconds(50));
    auto running = queue_->NextJob(absl::ZeroDuration());
    if (running) (void)queue_->Fail(*running, absl::InternalError("boom"));
  });
  std::vector<storage::v1::JobState> seen;
  int64_t after = last;
  for (int round = 0; round < 50; ++round) {  // bounded: each wait is <= 1 s
    ASSERT_OK_AND_ASSIGN(auto events, queue_->WaitForEvents("acme", job.job_id(), after, absl::Seconds(1)));
    for (const auto& e : events) {
      after = e.seq();
      if (e.has_state_change()) seen.push_back(e.state_change().to());
    }
    if (!seen.empty() && IsTerminal(seen.back())) break;
  }
  worker.join();
  EXPECT_EQ(seen, (std::vector<storage::v1::JobState>{storage::v1::JOB_STATE_RUNNING, storage::v1::JOB_STATE_FAILED}));
  EXPECT_THAT(queue_->WaitForEvents("globex", job.job_id(), 0, absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(JobManagerTest, RestartResumesRunningFirstKeepsQueuedOrderAndFinishesCancelling) {
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord a1, queue_->Submit(Request("A", "a1")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord a2, queue_->Submit(Request("A", "a2")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord b1, queue_->Submit(Request("B", "b1")));
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord a3, queue_->Submit(Request("A", "a3")));
  auto running = queue_->NextJob(absl::ZeroDuration());  // a1 runs
  ASSERT_TRUE(running.has_value());
  ASSERT_EQ(running->job_id(), a1.job_id());
  EXPECT_EQ(running->attempts(), 1);
  auto second = queue_->NextJob(absl::ZeroDuration());  // b1 runs, then is cancelled
  ASSERT_TRUE(second.has_value());
  ASSERT_OK(queue_->Cancel("B", b1.job_id()).status());
  // "Crash": drop everything in memory and reopen from disk.
  Reopen();
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord b1_after, queue_->Get("B", b1.job_id()));
  EXPECT_EQ(b1_after.state(), storage::v1::JOB_STATE_CANCELLED);
  std::vector<std::string> order;
  while (auto job = queue_->NextJob(absl::ZeroDuration())) {
    order.push_back(job->task_id());
    EXPECT_EQ(job->state(), storage::v1::JOB_STATE_RUNNING);
    // a1 resumes: its second attempt, in the answer and in storage.
    const int attempts = job->job_id() == a1.job_id() ? 2 : 1;
    EXPECT_EQ(job->attempts(), attempts) << job->task_id();
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord stored, queue_->Get(job->tenant(), job->job_id()));
    EXPECT_EQ(stored.attempts(), attempts) << job->task_id();
    ASSERT_OK(queue_->Fail(*job, absl::InternalError("stop")));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "a2", "a3"}));
  (void)a2;
  (void)a3;
}

TEST_F(JobManagerTest, ShutdownWakesWaitersAndRefusesNewJobs) {
  std::thread waiter([&] { EXPECT_FALSE(queue_->NextJob(absl::Seconds(30)).has_value()); });
  absl::SleepFor(absl::Milliseconds(20));
  queue_->Shutdown();
  waiter.join();
  EXPECT_THAT(queue_->Submit(Request("acme", "late")), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace adapterd::training
