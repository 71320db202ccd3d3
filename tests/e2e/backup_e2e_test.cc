// Backup and restore of a live server (docs/DEPLOYMENT.md, "Backup and
// restore"): the real adapterd with --backup_dir takes an online backup
// (SIGUSR1) while a Predict loop and a training job run; the data dir is
// wiped and `adapterd restore` brings it back: every task serves
// bit-identical scores, every finished job is still listed, and the job that
// was running at backup time resumes to SUCCEEDED.
#include <signal.h>

#include <filesystem>
#include <regex>
#include <set>

#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class BackupTest : public ServerProcessTest {};

TEST_F(BackupTest, OnlineBackupRestoresEveryTaskAndJob) {
  const std::string backups = dir_.Sub("backups");
  extra_args_ = {"--backup_dir", backups, "--backup_interval_seconds", "86400", "--backups_to_keep", "3"};
  ASSERT_NO_FATAL_FAILURE(StartServer());

  std::map<std::string, nlohmann::json> scores;
  for (const std::string task : {"sentiment", "topics"}) {
    const CommandResult train = Ctl({"train", "--task", task, "--data", Example(task + "_train.csv"), "--epochs", "1",
                                     "--seed", "11"});
    ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
    scores[task] = CtlJson(PredictArgs(task))["predictions"];
  }

  // Load while the backup runs: a Predict loop and a longer training job.
  Process predicts = Probe({"predict_loop", "sentiment", "60"}, "probe-predict");
  ASSERT_TRUE(Logged(predicts, "first ok")) << predicts.Log();
  const nlohmann::json running = CtlJson({"train", "--detach", "--task", "late", "--data",
                                          Example("sentiment_train.csv"), "--epochs", "6", "--seed", "2"});
  const std::string late_job = running["job_id"].get<std::string>();
  ASSERT_TRUE(PollUntil([&] { return CtlJson({"jobs", "get", late_job})["state"] == "JOB_STATE_RUNNING"; },
                        absl::Minutes(2)));

  server_->Signal(SIGUSR1);
  ASSERT_TRUE(PollUntil([&] { return server_->Log().find("backup 1 done") != std::string::npos; }, absl::Minutes(2)))
      << server_->Log();
  const std::string state_at_backup = CtlJson({"jobs", "get", late_job})["state"];
  EXPECT_EQ(state_at_backup, "JOB_STATE_RUNNING") << "the backup should have run during training";
  EXPECT_THAT(predicts.Log(), Not(HasSubstr("status "))) << "Predict failed during the backup";
  predicts.Signal(SIGKILL);

  // The backup metrics tell an operator it worked.
  absl::StatusOr<HttpResponse> m = HttpGet(metrics_port_, "/metrics", absl::Seconds(10));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->body, HasSubstr("adapterd_backups_total{result=\"ok\"} 1"));

  EXPECT_EQ(StopServer(), 0) << server_->Log();

  // Verify, wipe, restore.
  absl::StatusOr<CommandResult> verify = RunCommand({kAdapterd, "backups", "verify", "--backup_dir", backups},
                                                    absl::Minutes(2));
  ASSERT_TRUE(verify.ok());
  EXPECT_EQ(verify->exit_code, 0) << verify->err;
  EXPECT_THAT(verify->out, HasSubstr("is intact"));
  std::filesystem::remove_all(dir_.Sub("data"));
  absl::StatusOr<CommandResult> restore =
      RunCommand({kAdapterd, "restore", "--backup_dir", backups, "--data_dir", dir_.Sub("data")}, absl::Minutes(2));
  ASSERT_TRUE(restore.ok());
  ASSERT_EQ(restore->exit_code, 0) << restore->err << restore->out;
  EXPECT_THAT(restore->out, HasSubstr("restored backup 1"));
  // Restoring over a database is refused.
  absl::StatusOr<CommandResult> again =
      RunCommand({kAdapterd, "restore", "--backup_dir", backups, "--data_dir", dir_.Sub("data")}, absl::Minutes(2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->exit_code, 1);
  EXPECT_THAT(again->err, HasSubstr("not empty"));

  extra_args_.clear();
  ASSERT_NO_FATAL_FAILURE(StartServer());
  for (const auto& [task, before] : scores) {
    EXPECT_EQ(CtlJson(PredictArgs(task))["predictions"], before) << task;
  }
  const nlohmann::json jobs = CtlJson({"jobs", "list", "--all"});
  std::map<std::string, std::string> state_of_task;
  for (const auto& j : jobs["jobs"]) state_of_task[j["task_id"].get<std::string>()] = j["state"].get<std::string>();
  EXPECT_EQ(state_of_task["sentiment"], "JOB_STATE_SUCCEEDED") << jobs.dump();
  EXPECT_EQ(state_of_task["topics"], "JOB_STATE_SUCCEEDED") << jobs.dump();
  // The job that was running resumes from the restored state.
  ASSERT_TRUE(state_of_task.count("late")) << jobs.dump();
  const CommandResult watch = Ctl({"jobs", "watch", late_job}, "", 600);
  EXPECT_EQ(watch.exit_code, 0) << watch.err << watch.out;
  EXPECT_EQ(CtlJson({"jobs", "get", late_job})["state"], "JOB_STATE_SUCCEEDED");
  EXPECT_EQ(StopServer(), 0);
}

}  // namespace
}  // namespace adapterd::e2e
