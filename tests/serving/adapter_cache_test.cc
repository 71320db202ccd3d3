// AdapterCache over a real RocksDB: LRU by bytes in each tier, single flight,
// pinning, invalidation, and the error cases.
#include "server/serving/adapter_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "server/model/adapter_slab.h"
#include "server/model/bert_encoder.h"
#include "storage/database.h"
#include "tests/serving/serving_fixture.h"

namespace adapterd::serving {
namespace {

using ::adapterd::serving::testing::AdapterBytes;
using ::adapterd::serving::testing::CountingObserver;
using ::adapterd::serving::testing::FixtureEncoder;
using ::adapterd::serving::testing::OpenDb;
using ::adapterd::serving::testing::Promote;
using ::adapterd::serving::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AdapterCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = FixtureEncoder();
    ASSERT_NE(encoder_, nullptr);
    ASSERT_OK_AND_ASSIGN(db_, OpenDb(dir_));
    // Three same-shaped tasks: every entry has the same size in each tier.
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(std::string bytes, AdapterBytes(*encoder_, 2, 100 + i));
      ASSERT_OK(Promote(*db_, "acme", Task(i), 2, std::move(bytes)).status());
    }
    // Device bytes of one entry, measured through a throwaway cache.
    ASSERT_OK_AND_ASSIGN(auto probe, MakeCache(1 << 30, 1 << 30));
    ASSERT_OK_AND_ASSIGN(auto a, probe->Get("acme", Task(0)));
    device_bytes_ = a->bytes;
    ASSERT_GT(device_bytes_, 0);
    // The host tier holds serving forms (adapter_loading.h), not the files.
    form_bytes_ = probe->host_stats().bytes;
    ASSERT_GT(form_bytes_, 0);
  }

  static std::string Task(int i) { return "task" + std::to_string(i); }

  // Device bytes of one entry with tensors of its own (no slab).
  int64_t OwnBytes() {
    auto cache = MakeCache(1 << 30, 1 << 30, /*slab_bottleneck=*/0);
    EXPECT_TRUE(cache.ok());
    auto a = (*cache)->Get("acme", Task(0));
    EXPECT_TRUE(a.ok());
    return (*a)->bytes;
  }

  // The bytes of one slab slot at bottleneck 8 (the tasks' own).
  int64_t SlotBytes() const { return model::AdapterSlab::SlotBytes(encoder_->config(), 8, encoder_->dtype()); }

  // A value that tells tasks apart: the sum of every tensor of the set.
  static double Signature(const model::AdapterSet& set) {
    double sum = 0;
    for (const auto& [name, t] : set.Named()) sum += t.sum().item<double>();
    return sum;
  }

  absl::StatusOr<std::unique_ptr<AdapterCache>> MakeCache(int64_t host_budget, int64_t device_budget,
                                                          int64_t slab_bottleneck = 64) {
    AdapterCache::Options o;
    o.slab_bottleneck = slab_bottleneck;
    o.encoder = encoder_.get();
    o.db = db_.get();
    o.host_budget_bytes = host_budget;
    o.device_budget_bytes = device_budget;
    o.observer = &observer_;
    return AdapterCache::Create(std::move(o));
  }

  TempDir dir_;
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<storage::Database> db_;
  CountingObserver observer_;
  int64_t form_bytes_ = 0;
  int64_t device_bytes_ = 0;
};

TEST_F(AdapterCacheTest, HitAfterMissReturnsTheSameAdapter) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  const int64_t loads = observer_.loads(CacheTier::kHost);
  ASSERT_OK_AND_ASSIGN(auto first, cache->Get("acme", Task(1)));
  ASSERT_OK_AND_ASSIGN(auto second, cache->Get("acme", Task(1)));
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(observer_.loads(CacheTier::kHost), loads + 1);
  EXPECT_EQ(first->version, 1);
  EXPECT_THAT(first->labels, ElementsAre("label0", "label1"));
  EXPECT_EQ(first->set->device(), encoder_->device());
  EXPECT_EQ(first->set->dtype(), encoder_->dtype());
  // An explicit version is the same entry.
  ASSERT_OK_AND_ASSIGN(auto explicit_version, cache->Get("acme", Task(1), 1));
  EXPECT_EQ(explicit_version.get(), first.get());
  EXPECT_EQ(cache->device_stats().entries, 1);
  EXPECT_EQ(cache->device_stats().bytes, device_bytes_);
  EXPECT_EQ(cache->host_stats().bytes, form_bytes_);
}

TEST_F(AdapterCacheTest, DeviceTierEvictsLeastRecentlyUsedByBytes) {
  // The device tier fits two of the three adapters; the host tier all three.
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, device_bytes_ * 5 / 2));
  for (int i = 0; i < 2; ++i) ASSERT_OK(cache->Get("acme", Task(i)).status());
  ASSERT_OK(cache->Get("acme", Task(0)).status());  // task1 is now the LRU
  ASSERT_OK(cache->Get("acme", Task(2)).status());
  EXPECT_EQ(observer_.evictions(CacheTier::kDevice), 1);
  EXPECT_EQ(cache->device_stats().entries, 2);
  EXPECT_LE(cache->device_stats().bytes, device_bytes_ * 5 / 2);

  const int64_t device_loads = observer_.loads(CacheTier::kDevice);
  const int64_t host_loads = observer_.loads(CacheTier::kHost);
  ASSERT_OK(cache->Get("acme", Task(0)).status());  // still cached
  ASSERT_OK(cache->Get("acme", Task(2)).status());
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), device_loads);
  // task1 was evicted from the device tier only: deserialised again, no RocksDB read.
  ASSERT_OK(cache->Get("acme", Task(1), 1).status());
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), device_loads + 1);
  EXPECT_EQ(observer_.loads(CacheTier::kHost), host_loads);
  EXPECT_GE(observer_.hits(CacheTier::kHost), 1);
}

TEST_F(AdapterCacheTest, HostTierEvictsLeastRecentlyUsedByBytes) {
  // Host tier fits two serving forms; the device tier caches nothing.
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(form_bytes_ * 5 / 2, 0));
  for (int i = 0; i < 3; ++i) ASSERT_OK(cache->Get("acme", Task(i), 1).status());
  EXPECT_EQ(observer_.evictions(CacheTier::kHost), 1);
  EXPECT_EQ(cache->host_stats().entries, 2);
  EXPECT_EQ(cache->device_stats().entries, 0);  // bigger than its budget: served, not cached
  const int64_t host_loads = observer_.loads(CacheTier::kHost);
  ASSERT_OK(cache->Get("acme", Task(1), 1).status());
  ASSERT_OK(cache->Get("acme", Task(2), 1).status());
  EXPECT_EQ(observer_.loads(CacheTier::kHost), host_loads);
  ASSERT_OK(cache->Get("acme", Task(0), 1).status());  // the evicted one
  EXPECT_EQ(observer_.loads(CacheTier::kHost), host_loads + 1);
}

TEST_F(AdapterCacheTest, ConcurrentGetsOfAColdKeyLoadOnce) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  constexpr int kThreads = 8;
  const int64_t loads = observer_.loads(CacheTier::kHost);
  const int64_t device_loads = observer_.loads(CacheTier::kDevice);
  absl::Notification go;
  std::vector<std::shared_ptr<const LoadedAdapter>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      auto a = cache->Get("acme", Task(2));
      if (a.ok()) got[static_cast<size_t>(i)] = *a;
    });
  }
  go.Notify();
  for (auto& t : threads) t.join();
  EXPECT_EQ(observer_.loads(CacheTier::kHost), loads + 1);
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), device_loads + 1);
  for (const auto& a : got) {
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a.get(), got[0].get());
  }
}

TEST_F(AdapterCacheTest, ConcurrentGetsShareAFailure) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  constexpr int kThreads = 6;
  absl::Notification go;
  std::vector<absl::Status> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      go.WaitForNotification();
      got[static_cast<size_t>(i)] = cache->Get("acme", "missing").status();
    });
  }
  go.Notify();
  for (auto& t : threads) t.join();
  for (const absl::Status& s : got) EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing")));
}

TEST_F(AdapterCacheTest, PinnedEntrySurvivesPressure) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, device_bytes_ * 5 / 2));
  cache->Pin("acme", Task(0));
  ASSERT_OK_AND_ASSIGN(auto pinned, cache->Get("acme", Task(0)));
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK(cache->Get("acme", Task(1)).status());
    ASSERT_OK(cache->Get("acme", Task(2)).status());
  }
  EXPECT_EQ(cache->device_stats().pinned_bytes, device_bytes_);
  const int64_t device_loads = observer_.loads(CacheTier::kDevice);
  ASSERT_OK_AND_ASSIGN(auto again, cache->Get("acme", Task(0)));
  EXPECT_EQ(again.get(), pinned.get());
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), device_loads);

  // Unpinned, it is an ordinary LRU entry again.
  cache->Unpin("acme", Task(0));
  ASSERT_OK(cache->Get("acme", Task(1)).status());
  ASSERT_OK(cache->Get("acme", Task(2)).status());
  EXPECT_EQ(cache->device_stats().pinned_bytes, 0);
  // Task 1 and 2 were used after it, and only two entries fit: task 0 was
  // evicted, so getting it loads it again.
  const int64_t before = observer_.loads(CacheTier::kDevice);
  ASSERT_OK_AND_ASSIGN(auto reloaded, cache->Get("acme", Task(0)));
  EXPECT_EQ(observer_.loads(CacheTier::kDevice), before + 1);
  EXPECT_NE(reloaded.get(), pinned.get());
}

TEST_F(AdapterCacheTest, PinnedBytesOverBudgetStayCachedAndOthersAreServedUncached) {
  // A budget under one entry (and so under one slab slot: no slab).
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, OwnBytes() / 2));
  ASSERT_EQ(cache->slab(), nullptr);
  cache->Pin("acme", Task(0));
  ASSERT_OK_AND_ASSIGN(auto pinned, cache->Get("acme", Task(0)));
  ASSERT_OK(cache->Get("acme", Task(1)).status());
  EXPECT_EQ(cache->device_stats().entries, 1);
  EXPECT_EQ(cache->device_stats().bytes, OwnBytes());
  ASSERT_OK_AND_ASSIGN(auto again, cache->Get("acme", Task(0)));
  EXPECT_EQ(again.get(), pinned.get());
}

// The device tier keeps adapters in the resident slab (model/adapter_slab.h):
// an entry is one slot, and evicting an entry no batch holds frees its slot
// for the next load.
TEST_F(AdapterCacheTest, AdaptersLiveInSlabSlotsAndEvictionFreesThem) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 2 * SlotBytes(), /*slab_bottleneck=*/8));
  ASSERT_NE(cache->slab(), nullptr);
  EXPECT_EQ(cache->slab()->capacity(), 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto a, cache->Get("acme", Task(i)));
    EXPECT_EQ(a->set->slab(), cache->slab());
    EXPECT_EQ(a->bytes, SlotBytes());
  }
  EXPECT_EQ(cache->slab()->used(), 2);
  ASSERT_OK_AND_ASSIGN(auto third, cache->Get("acme", Task(2)));
  EXPECT_EQ(third->set->slab(), cache->slab());  // task0's slot, freed by its eviction
  EXPECT_EQ(observer_.evictions(CacheTier::kDevice), 1);
  EXPECT_EQ(cache->slab()->used(), 2);
  EXPECT_EQ(cache->device_stats().bytes, 2 * SlotBytes());
}

// An evicted adapter that a batch still holds keeps its slot and its
// weights: the next load, finding no free slot, serves from tensors of its
// own; the slot comes free when the holder lets go.
TEST_F(AdapterCacheTest, AHeldAdapterKeepsItsSlotAndWeightsWhileOthersLoad) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, SlotBytes(), /*slab_bottleneck=*/8));
  ASSERT_OK_AND_ASSIGN(auto held, cache->Get("acme", Task(0)));
  ASSERT_EQ(held->set->slab(), cache->slab());
  const double before = Signature(*held->set);
  ASSERT_OK_AND_ASSIGN(auto other, cache->Get("acme", Task(1)));  // evicts task0, which `held` keeps
  EXPECT_EQ(other->set->slab(), nullptr);
  EXPECT_EQ(Signature(*held->set), before);
  EXPECT_EQ(cache->slab()->used(), 1);
  const int64_t slot = held->set->slab_slot();
  held.reset();
  other.reset();
  EXPECT_EQ(cache->slab()->used(), 0);
  ASSERT_OK_AND_ASSIGN(auto next, cache->Get("acme", Task(2)));
  EXPECT_EQ(next->set->slab_slot(), slot);
}

// Loads, evictions and slot reuse racing with holders that read their
// adapters: every adapter a Get returns holds its own task's weights for as
// long as it is held (run under ThreadSanitizer by scripts/sanitize.sh).
TEST_F(AdapterCacheTest, SlotsChurningUnderConcurrentGetsNeverServeAnotherTasksWeights) {
  std::vector<double> expected;
  {
    ASSERT_OK_AND_ASSIGN(auto own, MakeCache(1 << 30, 1 << 30, /*slab_bottleneck=*/0));
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(auto a, own->Get("acme", Task(i)));
      expected.push_back(Signature(*a->set));
    }
  }
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 2 * SlotBytes(), /*slab_bottleneck=*/8));
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const int task = (t + i) % 3;
        auto a = cache->Get("acme", Task(task));
        if (!a.ok()) {
          ++failed;
          continue;
        }
        if (std::abs(Signature(*(*a)->set) - expected[task]) > 1e-6 * (1 + std::abs(expected[task]))) ++wrong;
        if (i % 7 == 0) cache->Invalidate("acme", Task(task));
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(cache->slab()->used(), 2);
}

TEST_F(AdapterCacheTest, InvalidateThenGetSeesTheNewVersion) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  ASSERT_OK_AND_ASSIGN(auto v1, cache->Get("acme", Task(0)));
  EXPECT_EQ(v1->version, 1);
  ASSERT_OK_AND_ASSIGN(std::string bytes, AdapterBytes(*encoder_, 3, 999));
  ASSERT_OK_AND_ASSIGN(int64_t promoted, Promote(*db_, "acme", Task(0), 3, std::move(bytes)));
  ASSERT_EQ(promoted, 2);
  // Until invalidated, version 0 keeps resolving to what it saw.
  ASSERT_OK_AND_ASSIGN(auto stale, cache->Get("acme", Task(0)));
  EXPECT_EQ(stale->version, 1);

  cache->Invalidate("acme", Task(0));
  ASSERT_OK_AND_ASSIGN(auto v2, cache->Get("acme", Task(0)));
  EXPECT_EQ(v2->version, 2);
  EXPECT_EQ(v2->labels.size(), 3u);
  // The old adapter, held by an in-flight user, is still intact.
  EXPECT_EQ(v1->version, 1);
  EXPECT_EQ(v1->set->config().num_labels(), 2);
}

TEST_F(AdapterCacheTest, InvalidateAfterDeleteMakesTheTaskNotFound) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  ASSERT_OK(cache->Get("acme", Task(1)).status());
  ASSERT_OK(db_->tasks().Delete("acme", Task(1)));
  cache->Invalidate("acme", Task(1));
  EXPECT_THAT(cache->Get("acme", Task(1)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(cache->device_stats().entries, 0);
  EXPECT_EQ(cache->host_stats().entries, 0);
}

TEST_F(AdapterCacheTest, UnknownTaskOrVersionIsNotFound) {
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  EXPECT_THAT(cache->Get("acme", "nope"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(cache->Get("other", Task(0)), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(cache->Get("acme", Task(0), 7), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(AdapterCacheTest, PendingTaskIsFailedPrecondition) {
  storage::v1::TaskRecord t;
  t.set_tenant("acme");
  t.set_task_id("pending");
  t.add_labels("a");
  t.add_labels("b");
  ASSERT_OK(db_->tasks().Put(t));
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  EXPECT_THAT(cache->Get("acme", "pending"), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(AdapterCacheTest, AdapterOfAnotherEncoderIsFailedPrecondition) {
  ASSERT_OK_AND_ASSIGN(std::string bytes, AdapterBytes(*encoder_, 2, 5, 8, "sha256:another-encoder"));
  ASSERT_OK(Promote(*db_, "acme", "foreign", 2, std::move(bytes)).status());
  ASSERT_OK_AND_ASSIGN(auto cache, MakeCache(1 << 30, 1 << 30));
  EXPECT_THAT(cache->Get("acme", "foreign"), StatusIs(absl::StatusCode::kFailedPrecondition));
  // Failures are not cached.
  EXPECT_THAT(cache->Get("acme", "foreign"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(cache->device_stats().entries, 0);
}

TEST(AdapterCache, CreateRejectsMissingDependencies) {
  EXPECT_THAT(AdapterCache::Create({}), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd::serving
