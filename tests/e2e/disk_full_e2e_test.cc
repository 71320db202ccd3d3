// A full disk under the real server: its data directory is a small tmpfs
// (mounted in a private mount namespace by unshare(1), so nothing outside the
// test sees it) that a ballast file nearly fills. While training runs, an
// upload fills the rest, and a filler file takes what it left over the
// server's reserve. Then:
//   - the upload fails RESOURCE_EXHAUSTED or UNAVAILABLE, saying the disk is
//     full, naming no server path, and stores nothing;
//   - the server keeps serving: Predict gives the same scores bit for bit,
//     stored datasets and tasks read back unchanged;
//   - new writes fail with the same codes while the disk is full;
//   - the running job meets the full disk at its next checkpoint and waits
//     to record its failure;
//   - once the ballast and the filler are removed, writes work again without
//     a restart: that job ends FAILED, "disk full", and a new upload and a new
//     training job succeed.
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kTmpfsMiB = 64;
constexpr int kBallastMiB = 44;
constexpr int kReserveMiB = 4;  // --min_free_disk_bytes

class DiskFullTest : public ServerProcessTest {
 protected:
  // Starts adapterd over a fresh tmpfs at dir_/data, nearly filled by a
  // ballast. Two files outside the tmpfs drive it: `fill_trigger_` makes a
  // filler that leaves half the server's reserve free (every write is then
  // refused, and RocksDB's own background writes still have room), and
  // `trigger_` removes the ballast and the filler.
  void StartOnTmpfs() {
    const std::string data = dir_.Sub("data");
    std::filesystem::create_directories(data);
    const std::string script =
        "set -e; data=$1; fill=$2; trigger=$3; shift 3; "
        "mount -t tmpfs -o size=" +
        std::to_string(kTmpfsMiB) +
        "m adapterd-disk-full \"$data\"; "
        "dd if=/dev/zero of=\"$data/ballast\" bs=1M count=" +
        std::to_string(kBallastMiB) +
        " status=none; "
        "( while [ ! -e \"$fill\" ] && kill -0 $$ 2>/dev/null; do sleep 0.1; done; "
        "  avail=$(df --output=avail -B1 \"$data\" | tail -n 1); "
        "  size=$((avail - " +
        std::to_string((kReserveMiB << 20) / 2) +
        ")); "
        "  if [ \"$size\" -gt 0 ]; then fallocate -l \"$size\" \"$data/filler\"; fi; "
        "  echo \"disk_full_test: filler made, $(df --output=avail -B1 \"$data\" | tail -n 1) bytes free\" >&2; "
        "  while [ ! -e \"$trigger\" ] && kill -0 $$ 2>/dev/null; do sleep 0.1; done; "
        "  rm -f \"$data/ballast\" \"$data/filler\"; echo \"disk_full_test: ballast removed\" >&2 ) & "
        "exec \"$@\"";
    wrapper_ = {"/usr/bin/unshare"};
    if (::geteuid() != 0) {  // an unprivileged user maps itself to root in a user namespace
      wrapper_.push_back("--user");
      wrapper_.push_back("--map-root-user");
    }
    for (const std::string& a :
         {std::string("--mount"), std::string("--propagation"), std::string("private"), std::string("sh"),
          std::string("-c"), script, std::string("sh"), data, fill_trigger_, trigger_}) {
      wrapper_.push_back(a);
    }
    extra_args_ = {"--min_free_disk_bytes", std::to_string(kReserveMiB << 20)};
    StartServer();
    if (HasFatalFailure()) return;
    AdapterdClient::Options o;
    o.server = absl::StrCat("127.0.0.1:", grpc_port_);
    o.default_deadline = absl::Seconds(60);
    ASSERT_OK_AND_ASSIGN(client_, AdapterdClient::Create(o));
  }

  std::vector<uint32_t> Scores(const std::string& task) {
    auto r = client_->Predict(TwoTextPredict(task));
    EXPECT_OK(r.status());
    return r.ok() ? ScoreBits(*r) : std::vector<uint32_t>{};
  }

  v1::CreateTrainingJobRequest Train(const std::string& task, int epochs) {
    v1::CreateTrainingJobRequest req;
    req.set_task_id(task);
    req.add_dataset_ids("base");
    req.mutable_hyperparameters()->set_epochs(epochs);
    req.mutable_hyperparameters()->set_batch_size(8);
    req.mutable_hyperparameters()->set_learning_rate(3e-3);
    req.mutable_hyperparameters()->set_max_seq_len(16);
    req.mutable_hyperparameters()->set_bottleneck_size(8);
    req.mutable_hyperparameters()->set_checkpoint_every_steps(2);
    return req;
  }

  v1::TrainingJob AwaitTerminal(const std::string& job_id, absl::Duration timeout = absl::Minutes(3)) {
    v1::TrainingJob job;
    PollUntil(
        [&] {
          auto j = client_->GetTrainingJob(job_id);
          if (j.ok()) job = *j;
          return j.ok() && (job.state() == v1::JOB_STATE_SUCCEEDED || job.state() == v1::JOB_STATE_FAILED ||
                            job.state() == v1::JOB_STATE_CANCELLED);
        },
        timeout);
    return job;
  }

  void TearDown() override {
    if (HasFailure() && server_ != nullptr)
      std::fprintf(stderr, "--- adapterd's log ---\n%s\n", server_->Log().c_str());
  }

  std::string fill_trigger_ = dir_.Sub("fill-the-disk");
  std::string trigger_ = dir_.Sub("free-the-disk");
  std::unique_ptr<AdapterdClient> client_;
};

// The codes a caller may get from a full disk, and what the message must say.
MATCHER(IsDiskFull, "fails RESOURCE_EXHAUSTED or UNAVAILABLE saying the disk is full, naming no path") {
  const absl::Status& s = ::adapterd::testing::GetStatus(arg);
  *result_listener << "whose status is " << s.ToString();
  const std::string m(s.message());
  return (absl::IsResourceExhausted(s) || absl::IsUnavailable(s)) &&
         (m.find("disk full") != std::string::npos || m.find("retry shortly") != std::string::npos) &&
         m.find('/') == std::string::npos;
}

TEST_F(DiskFullTest, AFullDiskFailsWritesClearlyKeepsServingAndRecoversWhenSpaceReturns) {
  StartOnTmpfs();
  if (HasFatalFailure()) return;
  v1::UploadDatasetRequest::Metadata meta;
  meta.set_dataset_id("base");
  ASSERT_OK_AND_ASSIGN(v1::Dataset base, client_->UploadDataset(meta, PresenceExamples(240, 30, 1)));
  ASSERT_OK_AND_ASSIGN(v1::TrainingJob first, client_->CreateTrainingJob(Train("t0", 2)));
  ASSERT_EQ(AwaitTerminal(first.job_id()).state(), v1::JOB_STATE_SUCCEEDED);
  const std::vector<uint32_t> t0_bits = Scores("t0");
  ASSERT_FALSE(t0_bits.empty());

  // Training runs (checkpointing every 2 steps) while an upload fills the disk.
  ASSERT_OK_AND_ASSIGN(v1::TrainingJob during, client_->CreateTrainingJob(Train("t-during", 400)));
  ASSERT_TRUE(PollUntil(
      [&] {
        auto j = client_->GetTrainingJob(during.job_id());
        return j.ok() && j->state() == v1::JOB_STATE_RUNNING;
      },
      absl::Minutes(1)));
  meta.set_dataset_id("big");
  const std::vector<v1::Example> big = PresenceExamples(1000, 32 * 1024, 2);  // ~32 MiB, more than is free
  EXPECT_THAT(client_->UploadDataset(meta, big), IsDiskFull());

  // Still serving, nothing earlier lost.
  EXPECT_EQ(Scores("t0"), t0_bits);
  ASSERT_OK_AND_ASSIGN(v1::Dataset base_now, client_->GetDataset("base"));
  EXPECT_EQ(base_now.content_sha256(), base.content_sha256());
  EXPECT_OK(client_->GetTask("t0").status());
  // What the upload left over the reserve may still take a checkpoint or
  // two (a job can miss the full disk between checkpoints): the filler takes
  // it, and the job meets the full disk at its next checkpoint (every 2
  // steps). Its failure is a small write: either it was recorded before the
  // filler, or the job waits, RUNNING, for space to record it.
  std::ofstream(fill_trigger_) << "go";
  ASSERT_TRUE(PollUntil([&] { return server_->Log().find("filler made") != std::string::npos; }, absl::Seconds(30)));
  const std::string waiting = absl::StrCat("job ", during.job_id(), ": cannot record its failure yet");
  ASSERT_TRUE(PollUntil(
      [&] {
        auto j = client_->GetTrainingJob(during.job_id());
        return server_->Log().find(waiting) != std::string::npos || (j.ok() && j->state() == v1::JOB_STATE_FAILED);
      },
      absl::Minutes(1)));
  std::fprintf(stderr, "the job running while the disk filled %s\n",
               server_->Log().find(waiting) != std::string::npos ? "waits to record its failure"
                                                                 : "recorded its failure before the filler");
  // New writes fail the same way while it is full.
  meta.set_dataset_id("while-full");
  EXPECT_THAT(client_->UploadDataset(meta, PresenceExamples(4000, 2048, 3)), IsDiskFull());

  // Space returns: writes work again without a restart.
  std::ofstream(trigger_) << "go";
  ASSERT_TRUE(
      PollUntil([&] { return server_->Log().find("ballast removed") != std::string::npos; }, absl::Seconds(30)));
  meta.set_dataset_id("after");
  absl::StatusOr<v1::Dataset> after;
  ASSERT_TRUE(PollUntil(
      [&] {
        after = client_->UploadDataset(meta, PresenceExamples(120, 30, 4));
        return after.ok();
      },
      absl::Minutes(1), absl::Milliseconds(500)))
      << after.status();
  EXPECT_EQ(after->num_examples(), 120);
  EXPECT_THAT(client_->GetDataset("big"), ::adapterd::testing::StatusIs(absl::StatusCode::kNotFound));

  // The job that met the full disk ends, and says why.
  const v1::TrainingJob ended = AwaitTerminal(during.job_id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_FAILED) << ended.DebugString();
  EXPECT_THAT(ended.error_message(), AllOf(HasSubstr("disk full"), Not(HasSubstr("/"))));
  ASSERT_OK_AND_ASSIGN(v1::TrainingJob later, client_->CreateTrainingJob(Train("t-after", 2)));
  EXPECT_EQ(AwaitTerminal(later.job_id()).state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(Scores("t0"), t0_bits);
  EXPECT_TRUE(server_->running());
  server_->Signal(SIGTERM);
  absl::StatusOr<int> code = server_->Wait(absl::Minutes(1));
  ASSERT_OK(code.status());
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace adapterd::e2e
