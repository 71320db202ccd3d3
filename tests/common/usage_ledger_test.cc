// UsageLedger: the API's admission control (common/usage_ledger.h).
#include "common/usage_ledger.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(UsageLedger, HoldsCountPerTenantAndInTotalAndGiveBackOnDestruction) {
  UsageLedger streams("open streams", /*total_limit=*/3);
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold a1, streams.Take("acme", 1, /*tenant_limit=*/2));
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold a2, streams.Take("acme", 1, 2));
  EXPECT_THAT(streams.Take("acme", 1, 2).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("tenant 'acme'")));
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold b1, streams.Take("beta", 1, 2));
  EXPECT_THAT(streams.Take("beta", 1, 2).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("the server would hold 4 open streams")));
  EXPECT_EQ(streams.total(), 3);
  { UsageLedger::Hold gone = std::move(a1); }
  EXPECT_EQ(streams.used("acme"), 1);
  ASSERT_OK(streams.Take("beta", 1, 2).status());  // destroyed at once
  EXPECT_EQ(streams.total(), 2);
  EXPECT_EQ(streams.refusals(), 2);  // the two refused Takes above, and nothing else
}

// At N and N+1: a hold may reach the limit exactly, and one unit more is
// refused, whichever limit (the tenant's or the total) is the tighter.
TEST(UsageLedger, AHoldReachesItsLimitExactlyAndNotOneUnitMore) {
  UsageLedger bytes("bytes", /*total_limit=*/10);
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold a, bytes.Take("", 10, UsageLedger::kUnlimited));
  EXPECT_THAT(bytes.Take("", 1, UsageLedger::kUnlimited).status(), StatusIs(absl::StatusCode::kResourceExhausted));
  UsageLedger tenant_bound("bytes", UsageLedger::kUnlimited);
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold b, tenant_bound.Take("t", 7, 7));
  EXPECT_THAT(b.Grow(1, 7), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(b.amount(), 7);  // a refused Grow changes nothing
  EXPECT_EQ(bytes.refusals() + tenant_bound.refusals(), 2);
}

TEST(UsageLedger, AKeptHoldJoinsTheBaseUntilSubtracted) {
  UsageLedger bytes("bytes", UsageLedger::kUnlimited);
  int seeds = 0;
  auto seed = [&]() -> absl::StatusOr<int64_t> {
    ++seeds;
    return 100;
  };
  {
    ASSERT_OK_AND_ASSIGN(UsageLedger::Hold upload, bytes.Open("acme", seed));
    EXPECT_EQ(bytes.used("acme"), 100);
    ASSERT_OK(upload.Grow(50, /*tenant_limit=*/200));
    EXPECT_THAT(upload.Grow(51, 200), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("limit is 200")));
    EXPECT_EQ(upload.amount(), 50);
    upload.Keep();
  }
  EXPECT_EQ(bytes.used("acme"), 150);
  { ASSERT_OK_AND_ASSIGN(UsageLedger::Hold abandoned, bytes.Open("acme", nullptr)); }
  EXPECT_EQ(bytes.used("acme"), 150);
  bytes.Subtract("acme", 150);
  EXPECT_EQ(bytes.used("acme"), 0);
  bytes.Subtract("acme", 10);  // never below 0
  EXPECT_EQ(bytes.used("acme"), 0);
  bytes.Subtract("never-seen", 10);
  EXPECT_EQ(bytes.total(), 0);
  // Each Open with a seed reads the base again: storage is the truth.
  ASSERT_OK_AND_ASSIGN(UsageLedger::Hold again, bytes.Open("acme", seed));
  EXPECT_EQ(bytes.used("acme"), 100);
  EXPECT_EQ(seeds, 2);
  EXPECT_THAT(bytes.Open("acme", []() -> absl::StatusOr<int64_t> { return absl::DataLossError("bad"); }).status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

TEST(UsageLedger, ConcurrentTakesNeverPassTheLimit) {
  UsageLedger streams("open streams", 8);
  std::atomic<int> admitted{0}, peak{0}, now{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        absl::StatusOr<UsageLedger::Hold> h = streams.Take("acme", 1, 5);
        if (!h.ok()) continue;
        const int n = ++now;
        int p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
        ++admitted;
        --now;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 5);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(streams.total(), 0);
}

}  // namespace
}  // namespace adapterd
