// UsageLedger: the API's admission control (server/api/usage_ledger.h).
#include "server/api/usage_ledger.h"

#include <atomic>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace adapterd::api {
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
}  // namespace adapterd::api
