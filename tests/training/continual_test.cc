// The continual guarantee end to end through the job queue, runner and
// storage: training tasks B and C, retraining B, and training a task of
// another kind (extractive QA, with its windows) never change task A's
// stored bytes, A's predictions, or any encoder tensor.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/model/adapter_format.h"
#include "server/training/job_manager.h"
#include "server/training/job_runner.h"
#include "tests/training/training_fixture.h"

namespace adapterd::training {
namespace {

using namespace ::adapterd::training::testing;  // NOLINT

class ContinualTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = FixtureEncoder();
    tokenizer_ = FixtureTokenizer();
    ASSERT_NE(encoder_, nullptr);
    auto db = storage::Database::Open({.path = dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = *std::move(db);
    defaults_.epochs = 4;
    defaults_.learning_rate = 3e-3;
    defaults_.bottleneck_size = 16;
    defaults_.max_seq_len = 32;
    auto q = JobManager::Create(
        {.db = db_.get(), .validator = MakeJobValidator(db_.get(), tokenizer_.get(), {}, defaults_)});
    ASSERT_TRUE(q.ok()) << q.status();
    queue_ = *std::move(q);
    auto r = JobRunner::Create({.jobs = queue_.get(),
                                .db = db_.get(),
                                .encoder = encoder_.get(),
                                .tokenizer = tokenizer_.get(),
                                .defaults = defaults_});
    ASSERT_TRUE(r.ok()) << r.status();
    runner_ = *std::move(r);
  }
  void TearDown() override {
    runner_.reset();
    queue_.reset();
    db_.reset();
  }

  // Uploads a dataset keyed on word `key`, trains `task` on it and waits
  // for SUCCEEDED.
  void TrainTask(const std::string& task, int key, uint64_t seed) {
    const std::string ds = absl::StrCat(task, "-", seed);
    ASSERT_OK(PutPresenceDataset(*db_, "acme", ds, 160, key, seed));
    ASSERT_NO_FATAL_FAILURE(RunJob(task, ds, seed, storage::v1::TASK_KIND_UNSPECIFIED));
  }

  // Extractive QA: the answer is the context's one word of w5-w9; contexts
  // of up to 40 words make several windows at max_seq_len 32.
  void TrainQaTask(const std::string& task, uint64_t seed) {
    std::mt19937_64 rng(seed);
    storage::v1::DatasetChunk chunk;
    for (int i = 0; i < 120; ++i) {
      std::string context;
      const int n = 5 + static_cast<int>(rng() % 36), at = static_cast<int>(rng() % static_cast<uint64_t>(n));
      int32_t start = 0;
      std::string answer;
      for (int j = 0; j < n; ++j) {
        const std::string w = j == at ? absl::StrCat("w", 5 + rng() % 5) : absl::StrCat("w", 20 + rng() % 40);
        if (j == at) start = static_cast<int32_t>(context.size() + (j > 0 ? 1 : 0)), answer = w;
        absl::StrAppend(&context, j ? " " : "", w);
      }
      storage::v1::Example* e = chunk.add_examples();
      e->set_text("w1 w2");
      e->set_text_pair(context);
      e->add_answers()->set_text(answer);
      e->mutable_answers(0)->set_answer_start(start);
    }
    storage::v1::DatasetRecord record;
    record.set_tenant("acme");
    record.set_dataset_id(task);
    record.set_num_examples(chunk.examples_size());
    record.set_num_chunks(1);
    ASSERT_OK(db_->datasets().Put(record, {chunk}));
    ASSERT_NO_FATAL_FAILURE(RunJob(task, task, seed, storage::v1::TASK_KIND_EXTRACTIVE_QA));
  }

  void RunJob(const std::string& task, const std::string& ds, uint64_t seed, storage::v1::TaskKind kind) {
    JobRequest req;
    req.tenant = "acme";
    req.task_id = task;
    req.dataset_ids = {ds};
    req.hyperparameters.set_seed(seed);
    req.task_kind = kind;
    req.max_queued_for_tenant = 1;
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord job, queue_->Submit(req));
    ASSERT_OK(runner_->RunNext(absl::Seconds(1)));
    ASSERT_OK_AND_ASSIGN(storage::v1::JobRecord done, queue_->Get("acme", job.job_id()));
    ASSERT_EQ(done.state(), storage::v1::JOB_STATE_SUCCEEDED) << done.error_message();
  }

  at::Tensor Predict(const std::string& task) {
    auto current = db_->adapters().GetCurrent("acme", task);
    EXPECT_TRUE(current.ok()) << current.status();
    auto set = model::DeserializeAdapterSet(current->bytes, encoder_->config(), encoder_->fingerprint(), at::kCPU);
    EXPECT_TRUE(set.ok()) << set.status();
    model::EncodedBatch b = tokenizer_->EncodeBatch(std::vector<std::string>{"w1 w7 w9", "w3 w4", "w12 w1 w40 w2"});
    auto t = [&](std::vector<int64_t>& v) { return at::tensor(v, at::kLong).view({b.batch, b.seq_len}); };
    auto out = encoder_->Forward({t(b.input_ids), t(b.token_type_ids), t(b.attention_mask)}, **set);
    EXPECT_TRUE(out.ok()) << out.status();
    return at::softmax(out->logits, -1);
  }

  ::adapterd::testing::TempDir tmp_{"continual"};
  std::string dir_ = tmp_.path();
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
  std::unique_ptr<storage::Database> db_;
  Hyperparameters defaults_;
  std::unique_ptr<JobManager> queue_;
  std::unique_ptr<JobRunner> runner_;
};

TEST_F(ContinualTest, LaterTasksAndRetrainingNeverTouchAnEarlierTask) {
  TrainTask("task-a", 1, 11);
  ASSERT_OK_AND_ASSIGN(auto a_current, db_->adapters().GetCurrent("acme", "task-a"));
  const std::string a_bytes = a_current.bytes;
  const at::Tensor a_predictions = Predict("task-a");
  ASSERT_OK_AND_ASSIGN(std::string fingerprint_before,
                       model::ComputeEncoderFingerprint(encoder_->config(), encoder_->weights()));
  EXPECT_EQ(fingerprint_before, encoder_->fingerprint());

  TrainTask("task-b", 5, 12);
  TrainTask("task-c", 9, 13);
  TrainTask("task-b", 5, 14);  // retrain: version 2
  TrainQaTask("task-qa", 15);

  ASSERT_OK_AND_ASSIGN(auto a_after, db_->adapters().GetCurrent("acme", "task-a"));
  EXPECT_EQ(a_after.version, a_current.version);
  EXPECT_EQ(a_after.bytes, a_bytes);
  EXPECT_TRUE(at::equal(Predict("task-a"), a_predictions));
  ASSERT_OK_AND_ASSIGN(std::string fingerprint_after,
                       model::ComputeEncoderFingerprint(encoder_->config(), encoder_->weights()));
  EXPECT_EQ(fingerprint_after, fingerprint_before);
  // The retrained task has a new version, and both are kept (retention 2).
  ASSERT_OK_AND_ASSIGN(storage::v1::TaskRecord b, db_->tasks().Get("acme", "task-b"));
  EXPECT_EQ(b.current_version(), 2);
  EXPECT_OK(db_->adapters().Get("acme", "task-b", 1).status());
  // The tasks learned different things: B's predictions differ from A's.
  EXPECT_FALSE(at::allclose(Predict("task-b"), a_predictions, 1e-3, 1e-3));
  ASSERT_OK_AND_ASSIGN(storage::v1::TaskRecord qa, db_->tasks().Get("acme", "task-qa"));
  EXPECT_EQ(qa.task_kind(), storage::v1::TASK_KIND_EXTRACTIVE_QA);
}

}  // namespace
}  // namespace adapterd::training
