// A training job survives SIGKILL: a child process trains with frequent
// checkpoints and is killed mid-epoch; the reopened database resumes the job
// from its checkpoint to SUCCEEDED, and no half-written adapter version is
// ever visible.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <ATen/ATen.h>
#include "common/testing/status_matchers.h"

#include "common/testing/temp_dir.h"
#include "server/model/adapter_format.h"
#include "server/training/job_manager.h"
#include "server/training/job_runner.h"
#include "tests/training/training_fixture.h"

extern char** environ;

namespace adapterd::training {
namespace {

using ::adapterd::testing::StatusIs;
using namespace ::adapterd::training::testing;  // NOLINT

TEST(CrashRecovery, KilledMidEpochResumesFromCheckpointToSucceeded) {
  const char* bin = std::getenv("ADAPTERD_BINARY_DIR");
  ASSERT_NE(bin, nullptr) << "run through ctest (ADAPTERD_BINARY_DIR)";
  const std::string child = std::string(bin) + "/tests/training/training_crash_child";
  const ::adapterd::testing::TempDir tmp("crash");
  const std::string dir = tmp.path(), db_dir = dir + "/db", marker = dir + "/checkpointed";

  // 400 examples, batch 32: 13 steps per epoch; checkpoints every 2 steps.
  // The 4th checkpoint is step 8, inside epoch 1.
  pid_t pid = 0;
  std::vector<std::string> args = {child, db_dir, marker, "4"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ASSERT_EQ(::posix_spawn(&pid, child.c_str(), nullptr, nullptr, argv.data(), environ), 0);
  bool marked = false;
  for (int i = 0; i < 1200 && !marked; ++i) {  // bounded: 120 s
    marked = std::filesystem::exists(marker);
    int status = 0;
    if (!marked && ::waitpid(pid, &status, WNOHANG) == pid) FAIL() << "child exited early, status " << status;
    if (!marked) ::usleep(100 * 1000);
  }
  ASSERT_TRUE(marked) << "child never checkpointed";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto db = storage::Database::Open({.path = db_dir});
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_OK_AND_ASSIGN(auto page, (*db)->jobs().List({}));
  ASSERT_EQ(page.jobs.size(), 1u);
  const storage::v1::JobRecord killed = page.jobs[0];
  EXPECT_EQ(killed.state(), storage::v1::JOB_STATE_RUNNING);
  ASSERT_OK_AND_ASSIGN(storage::v1::CheckpointRecord ckpt, (*db)->checkpoints().Get(killed.job_id()));
  EXPECT_GE(ckpt.step(), 8);
  EXPECT_LT(ckpt.step(), 3 * 13);
  // Nothing was promoted: no task, no adapter version.
  EXPECT_THAT((*db)->tasks().Get("acme", "crashy"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT((*db)->adapters().GetCurrent("acme", "crashy"), StatusIs(absl::StatusCode::kNotFound));

  auto encoder = FixtureEncoder();
  auto tokenizer = FixtureTokenizer();
  Hyperparameters defaults;
  defaults.epochs = 3;
  defaults.bottleneck_size = 16;
  defaults.max_seq_len = 32;
  defaults.learning_rate = 3e-3;
  defaults.checkpoint_every_steps = 2;
  ASSERT_OK_AND_ASSIGN(
      auto queue,
      JobManager::Create({.db = db->get(), .validator = MakeJobValidator(db->get(), tokenizer.get(), {}, defaults)}));
  int64_t first_step_after_resume = -1;
  ASSERT_OK_AND_ASSIGN(auto runner, JobRunner::Create({.jobs = queue.get(),
                                                       .db = db->get(),
                                                       .encoder = encoder.get(),
                                                       .tokenizer = tokenizer.get(),
                                                       .defaults = defaults,
                                                       .after_checkpoint = [&](const storage::v1::CheckpointRecord& c) {
                                                         if (first_step_after_resume < 0)
                                                           first_step_after_resume = c.step();
                                                       }}));
  ASSERT_OK(runner->RunNext(absl::Seconds(1)));
  // It continued from the checkpoint rather than from step 0.
  EXPECT_GT(first_step_after_resume, ckpt.step());
  ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord done, queue->Get("acme", killed.job_id()));
  EXPECT_EQ(done.state(), storage::v1::JOB_STATE_SUCCEEDED) << done.error_message();
  EXPECT_EQ(done.result_version(), 1);
  ASSERT_OK_AND_ASSIGN(auto current, (*db)->adapters().GetCurrent("acme", "crashy"));
  EXPECT_EQ(current.version, 1);
  EXPECT_THAT((*db)->checkpoints().Get(killed.job_id()), StatusIs(absl::StatusCode::kNotFound));
  // And it is bit-for-bit the model an uninterrupted run trains (training
  // is deterministic; the resumed run restored parameters, optimiser
  // moments, RNG state and data order).
  ASSERT_OK_AND_ASSIGN(std::string resumed_bytes, (*db)->adapters().Get("acme", "crashy", 1));
  {
    auto clean_db = storage::Database::Open({.path = dir + "/clean"});
    ASSERT_TRUE(clean_db.ok()) << clean_db.status();
    ASSERT_OK(PutPresenceDataset(**clean_db, "acme", "ds", 400, 1, 21));
    ASSERT_OK_AND_ASSIGN(
        auto clean_queue,
        JobManager::Create(
            {.db = clean_db->get(), .validator = MakeJobValidator(clean_db->get(), tokenizer.get(), {}, defaults)}));
    JobRequest req;
    req.tenant = "acme";
    req.task_id = "crashy";
    req.dataset_ids = {"ds"};
    req.max_queued_for_tenant = 1;
    ASSERT_OK(clean_queue->Submit(req).status());
    ASSERT_OK_AND_ASSIGN(auto clean_runner, JobRunner::Create({.jobs = clean_queue.get(),
                                                               .db = clean_db->get(),
                                                               .encoder = encoder.get(),
                                                               .tokenizer = tokenizer.get(),
                                                               .defaults = defaults}));
    ASSERT_OK(clean_runner->RunNext(absl::Seconds(1)));
    ASSERT_OK_AND_ASSIGN(std::string clean_bytes, (*clean_db)->adapters().Get("acme", "crashy", 1));
    // The job id differs (it is in the metadata); compare the parameters.
    auto a = model::DeserializeAdapterSet(resumed_bytes, encoder->config(), encoder->fingerprint(), at::kCPU);
    auto b = model::DeserializeAdapterSet(clean_bytes, encoder->config(), encoder->fingerprint(), at::kCPU);
    ASSERT_TRUE(a.ok() && b.ok());
    auto na = (*a)->Named(), nb = (*b)->Named();
    for (size_t i = 0; i < na.size(); ++i) EXPECT_TRUE(at::equal(na[i].second, nb[i].second)) << na[i].first;
  }
  runner.reset();
  queue.reset();
  db->reset();
}

}  // namespace
}  // namespace adapterd::training
