// InferenceEngine end to end over a tiny encoder and a real RocksDB: results,
// row independence inside mixed-task batches (both strategies), deadlines,
// validation, draining.
#include "server/serving/inference_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <new>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "tests/serving/serving_fixture.h"

namespace adapterd::serving {
namespace {

using ::adapterd::serving::testing::AdapterBytes;
using ::adapterd::serving::testing::CountingObserver;
using ::adapterd::serving::testing::FixtureEncoder;
using ::adapterd::serving::testing::FixtureTokenizer;
using ::adapterd::serving::testing::OpenDb;
using ::adapterd::serving::testing::Promote;
using ::adapterd::serving::testing::TempDir;
using ::adapterd::serving::testing::Text;
using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kForever = int64_t{3600} * 1000 * 1000;

class InferenceEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = FixtureEncoder();
    tokenizer_ = FixtureTokenizer();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_NE(tokenizer_, nullptr);
    ASSERT_OK_AND_ASSIGN(db_, OpenDb(dir_));
    // Tasks with 2, 3 and 4 labels, far-from-identity adapters.
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(std::string bytes, AdapterBytes(*encoder_, 2 + i, 200 + i));
      ASSERT_OK(Promote(*db_, "acme", Task(i), 2 + i, std::move(bytes)).status());
    }
  }

  static std::string Task(int i) { return "task" + std::to_string(i); }

  InferenceEngine::Options BaseOptions() {
    InferenceEngine::Options o;
    o.encoder = encoder_.get();
    o.tokenizer = tokenizer_.get();
    o.db = db_.get();
    o.max_seq_len = 32;
    o.max_queue_delay_us = 0;
    o.observer = &observer_;
    return o;
  }

  static PredictRequest Request(int task, std::vector<std::string> texts) {
    PredictRequest r;
    r.tenant = "acme";
    r.task_id = Task(task);
    r.texts = std::move(texts);
    return r;
  }

  TempDir dir_;
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
  std::unique_ptr<storage::Database> db_;
  CountingObserver observer_;
};

TEST_F(InferenceEngineTest, PredictReturnsOneDistributionPerTextOverTheTasksLabels) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  ASSERT_OK_AND_ASSIGN(PredictResult r, engine->Predict(Request(1, {Text(1, 3), Text(2, 9)})));
  EXPECT_EQ(r.version, 1);
  EXPECT_THAT(r.labels, ::testing::ElementsAre("label0", "label1", "label2"));
  ASSERT_EQ(r.texts.size(), 2u);
  for (const TextPrediction& text : r.texts) {
    const std::vector<float>& p = text.probabilities;
    ASSERT_EQ(p.size(), 3u);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-5);
    for (float x : p) EXPECT_GE(x, 0.0f);
  }
  // Different texts, different scores (the adapters are far from identity).
  EXPECT_NE(r.texts[0].probabilities, r.texts[1].probabilities);
}

// A row's scores do not depend on the batch it ran in: each text alone vs all
// of them in one mixed-task, mixed-length batch, for both strategies, run as
// one forward or as forwards of equal-length rows (length_groups.h).
TEST_F(InferenceEngineTest, RowsAreIndependentInsideMixedTaskBatches) {
  const std::vector<std::vector<std::string>> texts = {
      {Text(0, 2), Text(3, 11)}, {Text(5, 6)}, {Text(7, 1), Text(8, 14), Text(9, 4)}};
  std::vector<std::vector<std::vector<float>>> alone(3);
  {
    ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
    for (int t = 0; t < 3; ++t) {
      for (const std::string& text : texts[static_cast<size_t>(t)]) {
        ASSERT_OK_AND_ASSIGN(PredictResult r, engine->Predict(Request(t, {text})));
        alone[static_cast<size_t>(t)].push_back(r.texts[0].probabilities);
      }
    }
  }
  // One forward for the whole batch (a forward priced above any padding),
  // or a forward per length (a free forward: no padding at all).
  // With the adapters resident in a slab (slab 16: the tasks' m is 8) or
  // not (0: a CPU's default).
  struct Case {
    model::MixedStrategy strategy;
    int64_t overhead, slab;
  };
  constexpr int64_t kOneForward = int64_t{1} << 30;
  for (const auto& [strategy, overhead, slab] :
       {Case{model::MixedStrategy::kGatherBmm, kOneForward, 0}, Case{model::MixedStrategy::kSegments, kOneForward, 0},
        Case{model::MixedStrategy::kGatherBmm, 0, 0}, Case{model::MixedStrategy::kSegments, 0, 0},
        Case{model::MixedStrategy::kGatherBmm, kOneForward, 16}, Case{model::MixedStrategy::kSegments, 0, 16}}) {
    SCOPED_TRACE(absl::StrCat("strategy ", static_cast<int>(strategy), " overhead ", overhead, " slab ", slab));
    CountingObserver observer;
    InferenceEngine::Options o = BaseOptions();
    o.observer = &observer;
    o.strategy = strategy;
    o.split_overhead_tokens = overhead;
    o.slab_bottleneck = slab;
    o.max_batch_size = 6;             // exactly the rows below ...
    o.max_queue_delay_us = kForever;  // ... so they form one batch
    ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(std::move(o)));
    std::vector<absl::StatusOr<PredictResult>> results(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back(
          [&, t] { results[static_cast<size_t>(t)] = engine->Predict(Request(t, texts[static_cast<size_t>(t)])); });
    }
    for (std::thread& th : threads) th.join();
    EXPECT_EQ(engine->cache().slab() != nullptr, slab > 0);
    const std::vector<BatchStats> batches = observer.batches();
    ASSERT_EQ(batches.size(), 1u);
    EXPECT_EQ(batches[0].rows, 6);
    EXPECT_EQ(batches[0].distinct_tasks, 3);
    if (overhead > 0) {
      EXPECT_EQ(batches[0].forwards, 1);
      EXPECT_GT(batches[0].padding_ratio, 0.0);
    } else {
      EXPECT_GT(batches[0].forwards, 1);
      EXPECT_EQ(batches[0].padding_ratio, 0.0);
    }
    for (size_t t = 0; t < 3; ++t) {
      ASSERT_OK(results[t].status());
      for (size_t i = 0; i < texts[t].size(); ++i) {
        ASSERT_EQ(results[t]->texts[i].probabilities.size(), alone[t][i].size());
        for (size_t k = 0; k < alone[t][i].size(); ++k) {
          EXPECT_NEAR(results[t]->texts[i].probabilities[k], alone[t][i][k], 1e-5) << "task " << t << " row " << i;
        }
      }
    }
  }
}

TEST_F(InferenceEngineTest, AnExpiredDeadlineIsDroppedBeforeCompute) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  PredictRequest r = Request(0, {Text(1, 3), Text(2, 3)});
  r.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_THAT(engine->Predict(r), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(observer_.dropped(DropReason::kDeadline), 2);
  EXPECT_TRUE(observer_.batches().empty());
}

TEST_F(InferenceEngineTest, ADeadlineThatPassesWhileQueuedDropsTheRows) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  // Occupy the device so the batch waits behind it.
  absl::Notification started, release;
  ASSERT_OK(engine->executor().SubmitInference([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  PredictRequest r = Request(0, {Text(1, 3), Text(4, 5), Text(6, 2)});
  r.deadline = absl::Now() + absl::Milliseconds(100);
  absl::StatusOr<PredictResult> result;
  std::thread caller([&] { result = engine->Predict(r); });
  while (absl::Now() <= r.deadline) absl::SleepFor(absl::Milliseconds(20));
  release.Notify();
  caller.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(observer_.dropped(DropReason::kDeadline), 3);
  EXPECT_TRUE(observer_.batches().empty());  // nothing was computed
}

TEST_F(InferenceEngineTest, BadRequestsAreInvalidArgumentNamingTheField) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  struct Case {
    const char* name;
    PredictRequest request;
    const char* message;
  };
  PredictRequest no_texts = Request(0, {});
  PredictRequest empty_text = Request(0, {"w1", ""});
  PredictRequest bad_utf8 = Request(0, {"w1", "w2", "\xff\xfe"});
  PredictRequest pairs = Request(0, {"w1", "w2"});
  pairs.text_pairs = {"w3"};
  PredictRequest no_task = Request(0, {"w1"});
  no_task.task_id = "";
  PredictRequest negative = Request(0, {"w1"});
  negative.version = -1;
  const std::vector<Case> cases = {
      {"no texts", no_texts, "texts is empty"},
      {"empty text", empty_text, "texts[1] is empty"},
      {"bad utf8", bad_utf8, "texts[2] is not valid UTF-8"},
      {"pair count", pairs, "text_pairs has 1 entries"},
      {"no task", no_task, "task_id is empty"},
      {"negative version", negative, "version must not be negative"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(engine->Predict(c.request), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.name;
  }
}

TEST_F(InferenceEngineTest, UnknownTaskOrVersionIsNotFound) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  EXPECT_THAT(engine->Predict(Request(7, {"w1"})), StatusIs(absl::StatusCode::kNotFound));
  PredictRequest r = Request(0, {"w1"});
  r.version = 9;
  EXPECT_THAT(engine->Predict(r), StatusIs(absl::StatusCode::kNotFound));
  r.tenant = "other";  // another tenant's task does not exist for it
  r.version = 0;
  EXPECT_THAT(engine->Predict(r), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(InferenceEngineTest, DrainFinishesInFlightPredictsAndRefusesNewOnes) {
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(BaseOptions()));
  absl::Notification started, release;
  ASSERT_OK(engine->executor().SubmitInference([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  absl::StatusOr<PredictResult> in_flight;
  std::thread caller([&] { in_flight = engine->Predict(Request(0, {Text(1, 4)})); });
  // The Predict is queued behind the blocker once the batcher has handed it on.
  for (int i = 0; i < 20000 && engine->executor().stats().pending_inference == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(engine->executor().stats().pending_inference, 1);
  std::thread drainer([&] { engine->Drain(); });
  for (int i = 0; i < 20000 && engine->accepting(); ++i) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_THAT(engine->Predict(Request(0, {"w1"})), StatusIs(absl::StatusCode::kUnavailable));
  release.Notify();
  drainer.join();
  caller.join();
  EXPECT_OK(in_flight.status());
  // Training work still runs after a drain (only Shutdown stops the executor).
  EXPECT_OK(engine->executor().RunTraining([] { return absl::OkStatus(); }));
}

// Memory running out while a batch is computed: the batch's rows fail
// RESOURCE_EXHAUSTED (not UNKNOWN), the engine keeps
// serving, health turns NOT_SERVING after three such batches in a row and
// SERVING again with the first batch that succeeds.
TEST_F(InferenceEngineTest, BatchesThatRunOutOfMemoryFailAloneAndHealthRecovers) {
  std::atomic<bool> out_of_memory{true};
  std::vector<bool> health_changes;
  absl::Mutex mu;
  InferenceEngine::Options o = BaseOptions();
  o.before_batch_for_testing = [&] {
    if (out_of_memory.load()) throw std::bad_alloc();
  };
  o.on_health = [&](bool healthy) {
    absl::MutexLock lock(&mu);
    health_changes.push_back(healthy);
  };
  ASSERT_OK_AND_ASSIGN(auto engine, InferenceEngine::Create(o));
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(engine->Predict(Request(0, {Text(1, 3)})), StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_TRUE(engine->healthy()) << "after " << i + 1 << " failed batches";
  }
  EXPECT_THAT(engine->Predict(Request(0, {Text(1, 3)})), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_FALSE(engine->healthy());
  out_of_memory.store(false);
  ASSERT_OK(engine->Predict(Request(1, {Text(2, 4)})).status());
  EXPECT_TRUE(engine->healthy());
  absl::MutexLock lock(&mu);
  EXPECT_THAT(health_changes, ::testing::ElementsAre(false, true));
}

TEST_F(InferenceEngineTest, CreateRejectsMissingDependenciesAndBadSequenceLength) {
  InferenceEngine::Options o = BaseOptions();
  o.db = nullptr;
  EXPECT_THAT(InferenceEngine::Create(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  o = BaseOptions();
  o.max_seq_len = 2;
  EXPECT_THAT(InferenceEngine::Create(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  o.max_seq_len = 1000;  // past max_position_embeddings (64)
  EXPECT_THAT(InferenceEngine::Create(o).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd::serving
