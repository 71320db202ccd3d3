// DynamicBatcher: batch formation (size, delay), length grouping, deadline
// drops, split requests and shutdown. No model: rows carry token ids only.
#include "server/serving/dynamic_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "tests/serving/serving_fixture.h"

namespace adapterd::serving {
namespace {

using ::adapterd::serving::testing::CountingObserver;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr int64_t kForever = int64_t{3600} * 1000 * 1000;  // a delay no test waits for

BatchRow Row(int64_t length, std::shared_ptr<PendingRequest> request, int64_t index,
             absl::Time deadline = absl::InfiniteFuture()) {
  BatchRow row;
  row.input_ids.assign(static_cast<size_t>(length), 7);
  row.token_type_ids.assign(static_cast<size_t>(length), 0);
  row.deadline = deadline;
  row.request = std::move(request);
  row.index = index;
  return row;
}

// Records batches; completes their rows and calls `done` only when told.
class Recorder {
 public:
  DynamicBatcher::RunBatchFn Fn() {
    return [this](std::vector<BatchRow> rows, std::function<void()> done) {
      absl::MutexLock lock(&mu_);
      batches_.push_back(std::move(rows));
      done_.push_back(std::move(done));
    };
  }
  // Waits until `n` batches were formed; a test failure after 30 s (a batch
  // that never comes fails the test instead of hanging it).
  void WaitForBatches(size_t n) {
    std::pair<Recorder*, size_t> arg(this, n);
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(
                                  +[](std::pair<Recorder*, size_t>* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return a->first->batches_.size() >= a->second;
                                  },
                                  &arg),
                              absl::Seconds(30))) {
      ADD_FAILURE() << "waited 30 s for batch " << n << "; " << batches_.size() << " formed";
    }
  }
  // Completes every row of batch `i` (value = its length) and releases its
  // slot; nothing for a batch never formed.
  void Finish(size_t i) {
    std::function<void()> done;
    {
      absl::MutexLock lock(&mu_);
      if (i >= batches_.size()) return;
      for (BatchRow& row : batches_[i]) row.request->Complete(row.index, {static_cast<float>(row.length())});
      done = std::move(done_[i]);
    }
    done();
  }
  // The rows' lengths of batch `i` (none for a batch never formed).
  std::vector<int64_t> Lengths(size_t i) {
    absl::MutexLock lock(&mu_);
    std::vector<int64_t> out;
    if (i >= batches_.size()) return out;
    for (const BatchRow& row : batches_[i]) out.push_back(row.length());
    return out;
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return batches_.size();
  }

 private:
  absl::Mutex mu_;  // protects both vectors
  std::vector<std::vector<BatchRow>> batches_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> done_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<DynamicBatcher> MakeBatcher(Recorder& recorder, int64_t max_batch, int64_t delay_us, int inflight = 1,
                                            ServingObserver* observer = nullptr) {
  DynamicBatcher::Options o;
  o.max_batch_size = max_batch;
  o.max_queue_delay_us = delay_us;
  o.max_inflight_batches = inflight;
  o.observer = observer;
  auto b = DynamicBatcher::Create(o, recorder.Fn());
  return b.ok() ? *std::move(b) : nullptr;
}

// Fills one batch of `n` rows of `length` and waits until it is formed: with
// one in-flight slot, rows queued after it wait until Finish(0).
void HoldTheOnlySlot(DynamicBatcher& batcher, Recorder& recorder, int n, int64_t length) {
  auto hold = std::make_shared<PendingRequest>(n);
  std::vector<BatchRow> rows;
  for (int i = 0; i < n; ++i) rows.push_back(Row(length, hold, i));
  ASSERT_OK(batcher.Enqueue(std::move(rows)));
  recorder.WaitForBatches(1);
}

// The tenant whose adapter a row carries (the batcher shares batches by it).
std::shared_ptr<const LoadedAdapter> AdapterOf(const std::string& tenant) {
  auto adapter = std::make_shared<LoadedAdapter>();
  adapter->tenant = tenant;
  return adapter;
}

TEST(DynamicBatcher, FormsABatchWhenMaxBatchSizeRowsWait) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 3, kForever);
  ASSERT_NE(batcher, nullptr);
  auto request = std::make_shared<PendingRequest>(3);
  std::vector<BatchRow> rows;
  for (int i = 0; i < 3; ++i) rows.push_back(Row(4 + i, request, i));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  recorder.WaitForBatches(1);
  EXPECT_THAT(recorder.Lengths(0), UnorderedElementsAre(4, 5, 6));
  recorder.Finish(0);
  ASSERT_OK_AND_ASSIGN(auto results, request->Wait());
  EXPECT_THAT(results, ElementsAre(ElementsAre(4.f), ElementsAre(5.f), ElementsAre(6.f)));
}

TEST(DynamicBatcher, FormsAPartialBatchAfterTheQueueDelay) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 8, 200);
  auto request = std::make_shared<PendingRequest>(1);
  std::vector<BatchRow> rows;
  rows.push_back(Row(3, request, 0));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  recorder.WaitForBatches(1);
  EXPECT_THAT(recorder.Lengths(0), ElementsAre(3));
  recorder.Finish(0);
  EXPECT_OK(request->Wait().status());
}

TEST(DynamicBatcher, GroupsRowsOfSimilarLengthAroundTheOldest) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 3, kForever, /*inflight=*/1);
  HoldTheOnlySlot(*batcher, recorder, 3, 1);
  std::vector<BatchRow> rows;

  // Queued while the slot is taken, oldest first.
  const std::vector<int64_t> lengths = {6, 1, 20, 7, 2, 19, 5};
  auto second = std::make_shared<PendingRequest>(static_cast<int64_t>(lengths.size()));
  rows.clear();
  for (size_t i = 0; i < lengths.size(); ++i) rows.push_back(Row(lengths[i], second, static_cast<int64_t>(i)));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  ASSERT_EQ(batcher->queued_rows(), 7);
  recorder.Finish(0);

  // The oldest (6) with its nearest lengths, then the next oldest (1) with its.
  recorder.WaitForBatches(2);
  EXPECT_THAT(recorder.Lengths(1), UnorderedElementsAre(5, 6, 7));
  recorder.Finish(1);
  recorder.WaitForBatches(3);
  EXPECT_THAT(recorder.Lengths(2), UnorderedElementsAre(1, 2, 19));
  recorder.Finish(2);
  // The last row waits for the (endless) delay until shutdown flushes it.
  EXPECT_EQ(batcher->queued_rows(), 1);
  std::thread finisher([&] {
    recorder.WaitForBatches(4);
    recorder.Finish(3);
  });
  batcher->Shutdown();
  finisher.join();
  EXPECT_THAT(recorder.Lengths(3), ElementsAre(20));
  ASSERT_OK_AND_ASSIGN(auto results, second->Wait());
  for (size_t i = 0; i < lengths.size(); ++i) EXPECT_EQ(results[i][0], static_cast<float>(lengths[i]));
}

// Fair sharing: rows of equal length, queued while the only in-flight slot
// is taken, a large request first, then small ones. The tenants, then the
// requests within a tenant, share each batch max-min fairly, so every small
// request's row is in the next batch, not after the large request's.
TEST(DynamicBatcher, ALargeRequestSharesEachBatchWithOtherTenantsAndRequests) {
  Recorder recorder;
  // A short delay: the large request's last, partial batch is formed after it.
  auto batcher = MakeBatcher(recorder, 4, /*delay_us=*/1000, /*inflight=*/1);
  HoldTheOnlySlot(*batcher, recorder, 4, 5);  // the rest queue behind it
  auto enqueue = [&](const std::string& tenant, int n) {
    auto request = std::make_shared<PendingRequest>(n);
    std::vector<BatchRow> rows;
    for (int i = 0; i < n; ++i) {
      rows.push_back(Row(5, request, i));
      rows.back().adapter = AdapterOf(tenant);
    }
    EXPECT_OK(batcher->Enqueue(std::move(rows)));
    return request;
  };
  auto large = enqueue("acme", 20);
  auto small_same_tenant = enqueue("acme", 1);
  auto small_other_tenant = enqueue("beta", 1);
  recorder.Finish(0);
  recorder.WaitForBatches(2);
  // beta: 1 row (all it has); acme: 3, shared by its two requests as 2 + 1.
  recorder.Finish(1);
  // Done now (checked without waiting: oldest-first left them queued).
  ASSERT_TRUE(small_same_tenant->done());
  ASSERT_TRUE(small_other_tenant->done());
  EXPECT_FALSE(large->done());
  // Alone again, the large request takes whole batches: 18 rows left.
  for (size_t i = 2; i < 7; ++i) {
    recorder.WaitForBatches(i + 1);
    EXPECT_EQ(recorder.Lengths(i).size(), i < 6 ? 4u : 2u) << "batch " << i;
    recorder.Finish(i);
  }
  ASSERT_OK(large->Wait().status());
}

// Weighted sharing: two tenants flood the queue, one of batch_weight 3 (rows
// of length 3) and one of weight 1 (length 7): each batch holds them 3 : 1.
// Once the heavier one has no rows left, the other takes whole batches.
TEST(DynamicBatcher, TenantsShareEachBatchInProportionToTheirWeights) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 8, /*delay_us=*/1000, /*inflight=*/1);
  HoldTheOnlySlot(*batcher, recorder, 8, 5);
  auto enqueue = [&](const std::string& tenant, int64_t weight, int64_t length, int n) {
    auto request = std::make_shared<PendingRequest>(n);
    std::vector<BatchRow> rows;
    for (int i = 0; i < n; ++i) {
      rows.push_back(Row(length, request, i));
      rows.back().adapter = AdapterOf(tenant);
      rows.back().tenant_weight = weight;
    }
    EXPECT_OK(batcher->Enqueue(std::move(rows)));
    return request;
  };
  auto light = enqueue("light", 1, 7, 16);
  auto heavy = enqueue("heavy", 3, 3, 12);
  recorder.Finish(0);
  for (size_t i = 1; i <= 2; ++i) {  // 6 + 2 twice: heavy's 12 rows are done
    recorder.WaitForBatches(i + 1);
    EXPECT_THAT(recorder.Lengths(i), UnorderedElementsAre(3, 3, 3, 3, 3, 3, 7, 7)) << "batch " << i;
    recorder.Finish(i);
  }
  ASSERT_OK(heavy->Wait().status());
  recorder.WaitForBatches(4);
  EXPECT_THAT(recorder.Lengths(3), ::testing::Each(7));
  EXPECT_EQ(recorder.Lengths(3).size(), 8u);
  recorder.Finish(3);
  recorder.WaitForBatches(5);  // light's last 4, after the delay
  EXPECT_EQ(recorder.Lengths(4).size(), 4u);
  recorder.Finish(4);
  ASSERT_OK(light->Wait().status());
}

// More tenants waiting than rows in a batch: one row each, the tenants
// waiting longest first, so none is passed over for long.
TEST(DynamicBatcher, MoreTenantsThanRowsAreServedOldestFirst) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 2, kForever, /*inflight=*/1);
  HoldTheOnlySlot(*batcher, recorder, 2, 5);
  std::vector<std::shared_ptr<PendingRequest>> requests;
  for (const char* tenant : {"t0", "t1", "t2", "t3"}) {
    auto request = std::make_shared<PendingRequest>(2);
    std::vector<BatchRow> two;
    for (int i = 0; i < 2; ++i) {
      two.push_back(Row(tenant[1] - '0' + 1, request, i));  // each tenant's own length
      two.back().adapter = AdapterOf(tenant);
    }
    ASSERT_OK(batcher->Enqueue(std::move(two)));
    requests.push_back(request);
  }
  recorder.Finish(0);
  recorder.WaitForBatches(2);
  EXPECT_THAT(recorder.Lengths(1), UnorderedElementsAre(1, 2));  // t0 and t1: one row each
  recorder.Finish(1);
  recorder.WaitForBatches(3);
  EXPECT_THAT(recorder.Lengths(2), UnorderedElementsAre(1, 2));  // still the oldest: t0 and t1 again
  recorder.Finish(2);
  recorder.WaitForBatches(4);
  EXPECT_THAT(recorder.Lengths(3), UnorderedElementsAre(3, 4));
  recorder.Finish(3);
  std::thread finisher([&] {
    recorder.WaitForBatches(5);
    recorder.Finish(4);
  });
  batcher->Shutdown();
  finisher.join();
  for (auto& r : requests) EXPECT_OK(r->Wait().status());
}

TEST(DynamicBatcher, SplitsARequestAcrossBatches) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 2, kForever, /*inflight=*/3);
  auto request = std::make_shared<PendingRequest>(6);
  std::vector<BatchRow> rows;
  for (int i = 0; i < 6; ++i) rows.push_back(Row(i + 1, request, i));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  recorder.WaitForBatches(3);
  recorder.Finish(2);
  recorder.Finish(0);
  EXPECT_FALSE(request->done());
  recorder.Finish(1);
  ASSERT_OK_AND_ASSIGN(auto results, request->Wait());
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(results[i][0], static_cast<float>(i + 1));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(recorder.Lengths(i).size(), 2u);
}

TEST(DynamicBatcher, DropsExpiredRowsBeforeTheyAreBatched) {
  Recorder recorder;
  CountingObserver observer;
  auto batcher = MakeBatcher(recorder, 2, kForever, 1, &observer);
  auto expired = std::make_shared<PendingRequest>(1);
  auto live = std::make_shared<PendingRequest>(2);
  std::vector<BatchRow> rows;
  rows.push_back(Row(3, expired, 0, absl::InfinitePast()));
  rows.push_back(Row(4, live, 0));
  rows.push_back(Row(5, live, 1));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  EXPECT_THAT(expired->Wait(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  recorder.WaitForBatches(1);
  EXPECT_THAT(recorder.Lengths(0), UnorderedElementsAre(4, 5));
  recorder.Finish(0);
  EXPECT_OK(live->Wait().status());
  EXPECT_EQ(observer.dropped(DropReason::kDeadline), 1);
  EXPECT_EQ(recorder.size(), 1u);
}

TEST(DynamicBatcher, ShutdownFlushesQueuedRowsAndRejectsNewOnes) {
  Recorder recorder;
  auto batcher = MakeBatcher(recorder, 4, kForever);
  auto request = std::make_shared<PendingRequest>(1);
  std::vector<BatchRow> rows;
  rows.push_back(Row(2, request, 0));
  ASSERT_OK(batcher->Enqueue(std::move(rows)));
  std::thread finisher([&] {
    recorder.WaitForBatches(1);
    recorder.Finish(0);
  });
  batcher->Shutdown();
  finisher.join();
  EXPECT_OK(request->Wait().status());
  rows.clear();
  rows.push_back(Row(2, std::make_shared<PendingRequest>(1), 0));
  EXPECT_THAT(batcher->Enqueue(std::move(rows)), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(DynamicBatcher, CreateRejectsBadOptions) {
  DynamicBatcher::Options o;
  o.max_batch_size = 0;
  EXPECT_THAT(DynamicBatcher::Create(o, [](std::vector<BatchRow>, std::function<void()>) {}),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DynamicBatcher::Create({}, nullptr), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A request's rows taken text by text (InferenceEngine's incremental
// planning): a range's outputs come out only once every row of it is done;
// a waiter wakes for its range or for the finished count it asked for; a
// failure wakes it with the failure and withholds every output after.
TEST(PendingRequest, RangesAreTakenWhenDoneAndAFailureWakesTheWaiter) {
  PendingRequest r(4);
  EXPECT_FALSE(r.TakeIfDone(0, 2).has_value());
  r.Complete(1, {1.0f});
  EXPECT_FALSE(r.TakeIfDone(0, 2).has_value());
  r.Complete(0, {0.5f});
  EXPECT_EQ(r.finished(), 2);
  ASSERT_OK(r.WaitForRowsOrFinished(0, 2, 100));  // the range is done
  std::optional<std::vector<std::vector<float>>> taken = r.TakeIfDone(0, 2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_THAT(*taken, ElementsAre(ElementsAre(0.5f), ElementsAre(1.0f)));
  // Rows 2-3 are not done, but three finished rows are all this waiter needs.
  std::thread complete([&] { r.Complete(3, {3.0f}); });
  ASSERT_OK(r.WaitForRowsOrFinished(2, 2, 3));
  complete.join();
  EXPECT_EQ(r.finished(), 3);
  EXPECT_FALSE(r.TakeIfDone(2, 2).has_value());  // row 2 is not done
  std::thread fail([&] { r.Fail(2, absl::DeadlineExceededError("late")); });
  EXPECT_THAT(r.WaitForRowsOrFinished(2, 2, 100), StatusIs(absl::StatusCode::kDeadlineExceeded));
  fail.join();
  EXPECT_FALSE(r.TakeIfDone(3, 1).has_value());
  EXPECT_TRUE(r.done());
  EXPECT_THAT(r.Wait(), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

}  // namespace
}  // namespace adapterd::serving
