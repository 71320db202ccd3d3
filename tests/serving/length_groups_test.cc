// PlanLengthGroups (server/serving/length_groups.h): the partition of a
// batch's rows into forwards of similar length.
#include "server/serving/length_groups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

namespace adapterd::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// The cost the planner minimises, for any partition.
int64_t Cost(const std::vector<LengthGroup>& groups, int64_t overhead) {
  return PaddedTokens(groups) + overhead * static_cast<int64_t>(groups.size() - 1);
}

TEST(LengthGroups, ShortRowsBesideQaWindowsRunApart) {
  // 20 rows of a 32-word text (34 pieces) beside 12 QA windows of 128.
  std::vector<int64_t> lengths(20, 34);
  lengths.insert(lengths.begin() + 5, 12, 128);
  const std::vector<LengthGroup> groups = PlanLengthGroups(lengths, 64);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].rows.size(), 20u);
  EXPECT_EQ(groups[0].padded_length, 34);
  EXPECT_EQ(groups[1].rows.size(), 12u);
  EXPECT_EQ(groups[1].padded_length, 128);
  for (size_t i : groups[1].rows) EXPECT_EQ(lengths[i], 128);
  EXPECT_EQ(PaddedTokens(groups), 20 * 34 + 12 * 128);  // no padding left
}

TEST(LengthGroups, AForwardPricedAboveThePaddingKeepsOneGroup) {
  const std::vector<int64_t> lengths = {10, 12, 11, 40};
  const std::vector<LengthGroup> one = PlanLengthGroups(lengths, 1000);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].padded_length, 40);
  EXPECT_THAT(one[0].rows, UnorderedElementsAre(0, 1, 2, 3));
  // Splitting off the 40 saves 3 * 28 = 84 padded positions: worth it at
  // an overhead of 80, not at 84 (a tie keeps fewer forwards).
  EXPECT_EQ(PlanLengthGroups(lengths, 80).size(), 2u);
  EXPECT_EQ(PlanLengthGroups(lengths, 84).size(), 1u);
}

TEST(LengthGroups, EqualLengthsAndEdgeCases) {
  EXPECT_TRUE(PlanLengthGroups({}, 64).empty());
  const auto same = PlanLengthGroups({7, 7, 7}, 0);
  ASSERT_EQ(same.size(), 1u);  // splitting equal rows saves nothing
  EXPECT_THAT(same[0].rows, ElementsAre(0, 1, 2));
  // The quantum rounds each group's length up.
  const auto quantised = PlanLengthGroups({5, 17}, 1 << 20, 16);
  ASSERT_EQ(quantised.size(), 1u);
  EXPECT_EQ(quantised[0].padded_length, 32);
}

// Against every partition of the sorted rows into contiguous groups: the
// plan's cost is the least (and every row is in exactly one group).
TEST(LengthGroups, ThePlanIsTheCheapestPartition) {
  const std::vector<int64_t> lengths = {30, 3, 128, 9, 64, 33, 5, 120};
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t overhead : {0, 8, 40, 200, 5000}) {
    const std::vector<LengthGroup> plan = PlanLengthGroups(lengths, overhead);
    std::vector<size_t> seen;
    for (const LengthGroup& g : plan) {
      for (size_t i : g.rows) {
        seen.push_back(i);
        EXPECT_LE(lengths[i], g.padded_length);
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_THAT(seen, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
    // Brute force over the 2^7 ways to cut 8 sorted rows.
    int64_t best = std::numeric_limits<int64_t>::max();
    for (int mask = 0; mask < (1 << 7); ++mask) {
      int64_t cost = 0, start = 0;
      for (int64_t i = 0; i < 8; ++i) {
        if (i == 7 || (mask >> i) & 1) {
          cost += (i - start + 1) * sorted[static_cast<size_t>(i)] + (i == 7 ? 0 : overhead);
          start = i + 1;
        }
      }
      best = std::min(best, cost);
    }
    EXPECT_EQ(Cost(plan, overhead), best) << "overhead " << overhead;
  }
}

}  // namespace
}  // namespace adapterd::serving
