// Backup and restore of a live server (docs/DEPLOYMENT.md, "Backup and
// restore"): the real adapterd with --backup_dir takes an online backup
// (SIGUSR1) while a Predict loop and a training job run; the data dir is
// wiped and `adapterd restore` brings it back: every task serves
// bit-identical scores, every finished job is still listed, and the job that
// was running at backup time resumes to SUCCEEDED.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iterator>
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
    const CommandResult train =
        Ctl({"train", "--task", task, "--data", Example(task + "_train.csv"), "--epochs", "1", "--seed", "11"});
    ASSERT_EQ(train.exit_code, 0) << train.err << train.out;
    scores[task] = CtlJson(PredictArgs(task))["predictions"];
  }

  // Load while the backup runs: a Predict loop and a longer training job.
  Process predicts = Probe({"predict_loop", "sentiment", "60"}, "probe-predict");
  ASSERT_TRUE(Logged(predicts, "first ok")) << predicts.Log();
  const nlohmann::json running = CtlJson({"train", "--detach", "--task", "late", "--data",
                                          Example("sentiment_train.csv"), "--epochs", "6", "--seed", "2"});
  const std::string late_job = running["job_id"].get<std::string>();
  ASSERT_TRUE(PollUntil(
      [&] {
        return CtlJson({"jobs", "get", late_job})["state"] == "JOB_STATE_RUNNING";
      },
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
  absl::StatusOr<CommandResult> verify =
      RunCommand({kAdapterd, "backups", "verify", "--backup_dir", backups}, absl::Minutes(2));
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

// Through the real binary: two backups, one bit flipped in the text
// "private/" of the newest's metadata file. `backups list` and `verify`
// report the damaged newest backup (never showing backup 1 alone as the
// newest), and `restore` needs an explicit id, so the newest data is never
// dropped without a word.
TEST_F(BackupTest, ADamagedNewestBackupIsReportedAndRestoreNeedsAnExplicitId) {
  const std::string backups = dir_.Sub("backups");
  // Inside the data directory is refused at start-up.
  {
    absl::StatusOr<CommandResult> inside =
        RunCommand({kAdapterd, "--model_dir", model_root_->Sub("model"), "--data_dir", dir_.Sub("data"), "--backup_dir",
                    dir_.Sub("data/db")},
                   absl::Minutes(1));
    ASSERT_TRUE(inside.ok());
    EXPECT_EQ(inside->exit_code, 2) << inside->err;
    EXPECT_THAT(inside->err, HasSubstr("outside --data_dir"));
  }
  extra_args_ = {"--backup_dir", backups, "--backup_interval_seconds", "86400"};
  ASSERT_NO_FATAL_FAILURE(StartServer());
  for (const std::string name : {"first", "second"}) {
    ASSERT_EQ(Ctl({"datasets", "upload", "--id", name, Example("sentiment_train.csv")}).exit_code, 0);
    server_->Signal(SIGUSR1);
    const std::string done = absl::StrCat("backup ", name == "first" ? 1 : 2, " done");
    ASSERT_TRUE(PollUntil([&] { return server_->Log().find(done) != std::string::npos; }, absl::Minutes(2)))
        << server_->Log();
  }
  EXPECT_EQ(StopServer(), 0) << server_->Log();

  const std::filesystem::path meta2 = std::filesystem::path(backups) / "meta" / "2";
  std::string text;
  {
    std::ifstream in(meta2, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = text.find("private/");
  ASSERT_NE(at, std::string::npos) << text;
  text[at + 2] = static_cast<char>(text[at + 2] ^ 0x01);
  {
    std::ofstream out(meta2, std::ios::binary | std::ios::trunc);
    out << text;
  }

  auto run = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kAdapterd};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, absl::Minutes(2));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  };
  const CommandResult list = run({"backups", "list", "--backup_dir", backups});
  EXPECT_EQ(list.exit_code, 1) << list.out << list.err;
  EXPECT_THAT(list.err, HasSubstr("meta/2"));
  EXPECT_THAT(list.out, HasSubstr("1 "));  // the intact one is still listed
  const CommandResult verify = run({"backups", "verify", "--backup_dir", backups});
  EXPECT_EQ(verify.exit_code, 1) << verify.out << verify.err;
  EXPECT_THAT(verify.err, HasSubstr("meta/2"));
  const CommandResult restore = run({"restore", "--backup_dir", backups, "--data_dir", dir_.Sub("restored")});
  EXPECT_EQ(restore.exit_code, 1) << restore.out << restore.err;
  EXPECT_THAT(restore.err, HasSubstr("--backup_id"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("restored/db/CURRENT")));
  // Named, the intact older backup restores, holding only what it held.
  const CommandResult older =
      run({"restore", "--backup_dir", backups, "--data_dir", dir_.Sub("restored"), "--backup_id", "1"});
  ASSERT_EQ(older.exit_code, 0) << older.out << older.err;
  EXPECT_THAT(older.out, HasSubstr("restored backup 1"));
  // The operator removes the damaged backup; the directory is whole again.
  EXPECT_EQ(run({"backups", "delete", "--backup_dir", backups, "--backup_id", "2"}).exit_code, 0);
  EXPECT_EQ(run({"backups", "list", "--backup_dir", backups}).exit_code, 0);
  EXPECT_EQ(run({"backups", "verify", "--backup_dir", backups}).exit_code, 0);
}

}  // namespace
}  // namespace adapterd::e2e
