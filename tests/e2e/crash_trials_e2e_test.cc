// Crash trials, in the spirit of RocksDB's crash tests: the real adapterd is
// SIGKILLed at a random moment of one operation, restarted over the same data
// directory, and the invariants are checked after every restart:
//
//   - the database opens (no repair: adapterd has no repair path) and the
//     server is SERVING;
//   - no partial state is visible: a dataset whose upload was cut is absent
//     or complete (same size and content hash as sent), an import is absent
//     or serves the imported bytes, a deleted task is gone or intact, and no
//     task exists that no completed operation made;
//   - every job is terminal or resumes, and ends SUCCEEDED (none FAILED);
//   - every task serves the same version, and the same scores bit for bit,
//     as before the kill (a task a training job promoted: as the job left it).
//
// The operations, in turn: an epoch of training, training that checkpoints
// every step, the promotion at the end of training, an adapter import, a
// dataset upload, a task delete, an online backup (after which the backups
// list and verify).
//
// Arguments (after GoogleTest's): --trials N (default 10; CI runs 10) and
// --seed S (default 1). Every choice of operation, delay and data comes from
// the seed; a failure prints the seed and trial to re-run.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/adapterd_client.h"
#include "common/testing/status_matchers.h"
#include "tests/e2e/e2e_data.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

using ::adapterd::client::AdapterdClient;

int g_trials = 10;
uint64_t g_seed = 1;

enum class Op { kEpoch, kCheckpoint, kPromotion, kImport, kUpload, kDelete, kBackup };
constexpr Op kOps[] = {Op::kEpoch, Op::kCheckpoint, Op::kPromotion, Op::kImport, Op::kUpload, Op::kDelete, Op::kBackup};
const char* OpName(Op op) {
  switch (op) {
    case Op::kEpoch:
      return "epoch";
    case Op::kCheckpoint:
      return "checkpoint";
    case Op::kPromotion:
      return "promotion";
    case Op::kImport:
      return "import";
    case Op::kUpload:
      return "upload";
    case Op::kDelete:
      return "delete";
    case Op::kBackup:
      return "backup";
  }
  return "?";
}

// What a task served before a kill: its version and every label's score for
// two fixed texts, as raw float bits.
struct TaskRef {
  int64_t version = 0;
  std::vector<uint32_t> score_bits;
};

class CrashTrialsTest : public ServerProcessTest {
 protected:
  void Start() {
    StartServer();
    AdapterdClient::Options o;
    o.server = absl::StrCat("127.0.0.1:", grpc_port_);
    o.default_deadline = absl::Seconds(60);
    o.upload_chunk_bytes = 2048;  // many chunks: a kill lands mid-stream
    auto c = AdapterdClient::Create(o);
    ASSERT_OK(c.status());
    client_ = *std::move(c);
  }

  void Kill() {
    server_->Signal(SIGKILL);
    absl::StatusOr<int> code = server_->Wait(absl::Minutes(1));
    ASSERT_TRUE(code.ok()) << code.status();
  }

  absl::StatusOr<TaskRef> Serve(const std::string& task) {
    absl::StatusOr<v1::PredictResponse> r = client_->Predict(TwoTextPredict(task));
    if (!r.ok()) return r.status();
    return TaskRef{r->version(), ScoreBits(*r)};
  }

  v1::CreateTrainingJobRequest TrainRequest(const std::string& task, int checkpoint_every) {
    v1::CreateTrainingJobRequest req;
    req.set_task_id(task);
    req.add_dataset_ids("base");
    req.mutable_hyperparameters()->set_epochs(3);
    req.mutable_hyperparameters()->set_batch_size(8);
    req.mutable_hyperparameters()->set_learning_rate(3e-3);
    req.mutable_hyperparameters()->set_max_seq_len(16);
    req.mutable_hyperparameters()->set_bottleneck_size(8);
    if (checkpoint_every > 0) req.mutable_hyperparameters()->set_checkpoint_every_steps(checkpoint_every);
    return req;
  }

  // Waits until `job_id` is terminal; returns it.
  v1::TrainingJob AwaitTerminal(const std::string& job_id) {
    v1::TrainingJob job;
    const bool done = PollUntil(
        [&] {
          auto j = client_->GetTrainingJob(job_id);
          if (!j.ok()) return false;
          job = *j;
          return job.state() == v1::JOB_STATE_SUCCEEDED || job.state() == v1::JOB_STATE_FAILED ||
                 job.state() == v1::JOB_STATE_CANCELLED;
        },
        absl::Minutes(3));
    EXPECT_TRUE(done) << "job " << job_id << " did not finish: " << job.DebugString();
    return job;
  }

  std::vector<v1::TrainingJob> AllJobs() {
    std::vector<v1::TrainingJob> jobs;
    v1::ListTrainingJobsRequest req;
    req.set_page_size(1000);
    auto r = client_->ListTrainingJobs(req);
    EXPECT_OK(r.status());
    if (r.ok()) jobs.assign(r->jobs().begin(), r->jobs().end());
    return jobs;
  }

  std::set<std::string> AllTasks() {
    std::set<std::string> tasks;
    v1::ListTasksRequest req;
    req.set_page_size(1000);
    auto r = client_->ListTasks(req);
    EXPECT_OK(r.status());
    if (r.ok()) {
      for (const v1::Task& t : r->tasks()) tasks.insert(t.task_id());
    }
    return tasks;
  }

  // The invariants every restart must keep (see the file comment), for the
  // state known before the trial's operation. `maybe_new_tasks` may exist
  // or not (the operation may or may not have committed); `maybe_gone`
  // likewise may have been deleted.
  void CheckInvariants(const std::set<std::string>& maybe_new_tasks, const std::set<std::string>& maybe_gone) {
    // Jobs: every one ends SUCCEEDED (nothing is cancelled in these trials).
    // A job first seen finished promoted a new version: that is its task's
    // reference from now on.
    for (const v1::TrainingJob& j : AllJobs()) {
      if (finished_jobs_.contains(j.job_id())) continue;
      const v1::TrainingJob done = AwaitTerminal(j.job_id());
      EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.DebugString();
      if (done.state() != v1::JOB_STATE_SUCCEEDED) continue;
      finished_jobs_.insert(done.job_id());
      absl::StatusOr<TaskRef> served = Serve(done.task_id());
      ASSERT_OK(served.status()) << done.task_id();
      EXPECT_GE(served->version, done.result_version());
      tasks_[done.task_id()] = *served;
    }
    // Tasks: exactly the known ones, give or take the trial's own.
    const std::set<std::string> listed = AllTasks();
    for (const std::string& t : listed) {
      EXPECT_TRUE(tasks_.contains(t) || maybe_new_tasks.contains(t)) << "unexpected task " << t;
    }
    for (auto it = tasks_.begin(); it != tasks_.end();) {
      const std::string& task = it->first;
      if (!listed.contains(task)) {
        EXPECT_TRUE(maybe_gone.contains(task)) << "task " << task << " was lost";
        it = tasks_.erase(it);
        continue;
      }
      absl::StatusOr<TaskRef> now = Serve(task);
      ASSERT_OK(now.status()) << task;
      EXPECT_EQ(now->version, it->second.version) << task;
      EXPECT_EQ(now->score_bits, it->second.score_bits) << task << ": scores changed across the restart";
      ++it;
    }
    // Datasets: each complete one is unchanged.
    for (const auto& [id, before] : datasets_) {
      auto now = client_->GetDataset(id);
      ASSERT_OK(now.status()) << id;
      EXPECT_EQ(now->num_examples(), before.num_examples()) << id;
      EXPECT_EQ(now->content_sha256(), before.content_sha256()) << id;
    }
  }

  std::unique_ptr<AdapterdClient> client_;
  std::map<std::string, TaskRef> tasks_;
  std::map<std::string, v1::Dataset> datasets_;
  std::set<std::string> finished_jobs_;  // SUCCEEDED and accounted for
  int inside_ = 0;                       // kills that landed inside their operation
  // An exported adapter file and what it served when exported.
  std::string adapter_file_;
  TaskRef adapter_ref_;
};

TEST_F(CrashTrialsTest, InvariantsHoldAfterSigkillAtRandomMoments) {
  std::mt19937_64 rng(g_seed);
  auto uniform_ms = [&](int lo, int hi) { return absl::Milliseconds(lo + static_cast<int>(rng() % (hi - lo + 1))); };
  extra_args_ = {"--backup_dir", dir_.Sub("backups"), "--backups_to_keep", "3"};
  Start();

  // The starting state: one dataset, one trained task, its adapter exported.
  const std::vector<v1::Example> base = PresenceExamples(240, 0, g_seed);
  v1::UploadDatasetRequest::Metadata meta;
  meta.set_dataset_id("base");
  auto ds = client_->UploadDataset(meta, base);
  ASSERT_OK(ds.status());
  datasets_["base"] = *ds;
  auto job = client_->CreateTrainingJob(TrainRequest("t0", 0));
  ASSERT_OK(job.status());
  ASSERT_EQ(AwaitTerminal(job->job_id()).state(), v1::JOB_STATE_SUCCEEDED);
  finished_jobs_.insert(job->job_id());
  auto t0 = Serve("t0");
  ASSERT_OK(t0.status());
  tasks_["t0"] = *t0;
  auto exported = client_->ExportAdapter("t0");
  ASSERT_OK(exported.status());
  adapter_file_ = exported->bytes;
  adapter_ref_ = *t0;

  const size_t first = static_cast<size_t>(rng() % std::size(kOps));
  std::map<std::string, int> ran;
  for (int trial = 0; trial < g_trials; ++trial) {
    const Op op = kOps[(first + static_cast<size_t>(trial)) % std::size(kOps)];
    SCOPED_TRACE(absl::StrCat("seed ", g_seed, " trial ", trial, " op ", OpName(op)));
    std::fprintf(stderr, "crash trial %d: %s\n", trial, OpName(op));
    ++ran[OpName(op)];
    std::set<std::string> maybe_new, maybe_gone;
    std::string new_dataset;
    std::vector<v1::Example> sent;
    std::thread worker;
    std::atomic<bool> call_returned{false};
    std::string job_id;
    size_t log_before = server_->Log().size();
    switch (op) {
      case Op::kEpoch:
      case Op::kCheckpoint:
      case Op::kPromotion: {
        // Retrain an existing task (a new version) or train a new one.
        const std::string task = rng() % 2 == 0 ? "t0" : absl::StrCat("tr", trial);
        auto created = client_->CreateTrainingJob(TrainRequest(task, op == Op::kCheckpoint ? 1 : 0));
        ASSERT_OK(created.status());
        job_id = created->job_id();
        maybe_new.insert(task);
        if (op == Op::kPromotion) {
          // Into the last epoch's final steps, then a little further.
          PollUntil(
              [&] {
                auto j = client_->GetTrainingJob(created->job_id());
                return !j.ok() || j->state() == v1::JOB_STATE_SUCCEEDED ||
                       (j->progress().total_steps() > 0 &&
                        j->progress().step() * 10 >= j->progress().total_steps() * 9);
              },
              absl::Minutes(2), absl::Milliseconds(2));
          absl::SleepFor(uniform_ms(0, 8));
        } else {
          absl::SleepFor(uniform_ms(50, 1500));
        }
        break;
      }
      case Op::kImport: {
        const std::string task = absl::StrCat("imp", trial);
        maybe_new.insert(task);
        worker = std::thread([this, task, &call_returned] {
          (void)client_->ImportAdapter(task, adapter_file_);
          call_returned = true;
        });
        absl::SleepFor(uniform_ms(0, 8));
        break;
      }
      case Op::kUpload: {
        new_dataset = absl::StrCat("up", trial);
        sent = PresenceExamples(3000, 0, g_seed + static_cast<uint64_t>(trial));
        v1::UploadDatasetRequest::Metadata m;
        m.set_dataset_id(new_dataset);
        worker = std::thread([this, m, &sent, &call_returned] {
          (void)client_->UploadDataset(m, sent);
          call_returned = true;
        });
        absl::SleepFor(uniform_ms(0, 400));
        break;
      }
      case Op::kDelete: {
        // Never the last task: later trials need one to serve.
        if (tasks_.size() < 2) {
          const std::string task = absl::StrCat("imp", trial, "-seed");
          auto imported = client_->ImportAdapter(task, adapter_file_);
          ASSERT_OK(imported.status());
          auto served = Serve(task);
          ASSERT_OK(served.status());
          tasks_[task] = *served;
        }
        auto victim = tasks_.begin();
        std::advance(victim, static_cast<long>(rng() % tasks_.size()));
        const std::string task = victim->first;
        maybe_gone.insert(task);
        worker = std::thread([this, task, &call_returned] {
          (void)client_->DeleteTask(task);
          call_returned = true;
        });
        absl::SleepFor(uniform_ms(0, 2));
        break;
      }
      case Op::kBackup: {
        log_before = server_->Log().size();
        server_->Signal(SIGUSR1);
        absl::SleepFor(uniform_ms(0, 300));
        break;
      }
    }
    // Whether the kill landed inside the operation (reported, not asserted:
    // a kill just after it is a valid trial too).
    bool inside = false;
    if (!job_id.empty()) {
      auto j = client_->GetTrainingJob(job_id);
      inside = j.ok() && j->state() != v1::JOB_STATE_SUCCEEDED;
    } else if (op == Op::kBackup) {
      inside = server_->Log().find("backup ", log_before) == std::string::npos;
    } else {
      inside = !call_returned;
    }
    Kill();
    if (worker.joinable()) worker.join();
    inside_ += inside ? 1 : 0;
    std::fprintf(stderr, "crash trial %d: killed %s the %s\n", trial, inside ? "inside" : "after", OpName(op));
    Start();
    if (HasFatalFailure()) return;

    // The trial's own operation: all or nothing.
    if (!new_dataset.empty()) {
      auto got = client_->GetDataset(new_dataset);
      if (got.ok()) {
        EXPECT_EQ(got->num_examples(), static_cast<int64_t>(sent.size())) << "a partial dataset is visible";
        datasets_[new_dataset] = *got;
      } else {
        EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
      }
    }
    if (op == Op::kImport) {
      const std::string task = *maybe_new.begin();
      auto got = client_->GetTask(task);
      if (got.ok()) {
        auto back = client_->ExportAdapter(task);
        ASSERT_OK(back.status());
        EXPECT_EQ(back->bytes, adapter_file_) << "an imported task serves other bytes";
        auto served = Serve(task);
        ASSERT_OK(served.status());
        // The same adapter on the same encoder: the same scores, bit for bit.
        EXPECT_EQ(served->score_bits, adapter_ref_.score_bits);
        tasks_[task] = *served;
      } else {
        EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound) << got.status();
      }
    }
    if (op == Op::kBackup) {
      CommandResult list =
          *RunCommand({kAdapterd, "backups", "list", "--backup_dir", dir_.Sub("backups")}, absl::Minutes(2));
      EXPECT_EQ(list.exit_code, 0) << list.err;
      if (!list.out.empty()) {  // one line per intact backup; a cut one is not listed
        CommandResult verify =
            *RunCommand({kAdapterd, "backups", "verify", "--backup_dir", dir_.Sub("backups")}, absl::Minutes(2));
        EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
      }
    }
    CheckInvariants(maybe_new, maybe_gone);
    if (HasFailure()) {
      ADD_FAILURE() << "re-run: crash_trials_e2e_test --seed " << g_seed << " --trials " << trial + 1
                    << "; server log: " << server_->log_path();
      return;
    }
  }
  EXPECT_EQ(StopServer(), 0);
  std::string summary;
  for (const auto& [name, n] : ran) absl::StrAppend(&summary, " ", name, "=", n);
  std::fprintf(stderr,
               "crash trials: %d run (seed %llu), %d killed inside their operation, invariants held after "
               "each:%s\n",
               g_trials, static_cast<unsigned long long>(g_seed), inside_, summary.c_str());
}

}  // namespace
}  // namespace adapterd::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--trials" && !absl::SimpleAtoi(argv[i + 1], &adapterd::e2e::g_trials)) return 2;
    if (flag == "--seed" && !absl::SimpleAtoi(argv[i + 1], &adapterd::e2e::g_seed)) return 2;
  }
  return RUN_ALL_TESTS();
}
