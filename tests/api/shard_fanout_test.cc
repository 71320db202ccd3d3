// MergeShardPages: the page arithmetic of list calls across replicas
// (server/api/shard_fanout.h). The end-to-end fan-out, with real replicas
// behind nginx, is tests/e2e/sharding_e2e_test.cc.
#include "server/api/shard_fanout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace adapterd::api {
namespace {

using ::testing::ElementsAre;

const std::string& Id(const std::string& s) { return s; }

// Replicas that list their ids in order and resume after a raw token, as the
// stores do.
struct FakeShards {
  std::vector<std::vector<std::string>> shards;
  std::vector<ShardPage<std::string>> Pages(const std::string& after, int page_size) const {
    std::vector<ShardPage<std::string>> pages;
    for (const auto& shard : shards) {
      ShardPage<std::string> p;
      for (const std::string& id : shard) {
        if (!after.empty() && id <= after) continue;
        if (static_cast<int>(p.items.size()) == page_size) {
          p.more = true;
          break;
        }
        p.items.push_back(id);
      }
      pages.push_back(p);
    }
    return pages;
  }
};

TEST(MergeShardPages, TakesTheSmallestIdsAndNamesTheLastAsTheToken) {
  std::vector<ShardPage<std::string>> pages = {{{"a", "d", "e"}, true}, {{"b", "c"}, false}, {{}, false}};
  std::vector<std::string> out;
  const std::string next = MergeShardPages<std::string>(pages, 3, Id, &out);
  EXPECT_THAT(out, ElementsAre("a", "b", "c"));
  EXPECT_EQ(next, "c");
}

TEST(MergeShardPages, LastPageHasNoToken) {
  std::vector<ShardPage<std::string>> pages = {{{"a"}, false}, {{"b"}, false}};
  std::vector<std::string> out;
  EXPECT_EQ(MergeShardPages<std::string>(pages, 2, Id, &out), "");
  EXPECT_THAT(out, ElementsAre("a", "b"));
  out.clear();
  EXPECT_EQ(MergeShardPages<std::string>({{{}, false}, {{}, false}}, 5, Id, &out), "");
  EXPECT_TRUE(out.empty());
}

TEST(MergeShardPages, PagingThroughReplicasVisitsEveryIdOnceInOrder) {
  // Uneven shards (one empty, one holding most ids), every page size.
  FakeShards f;
  f.shards.resize(4);
  std::set<std::string> all;
  for (int i = 0; i < 97; ++i) {
    const std::string id = absl::StrFormat("task-%03d", (i * 37) % 97);
    f.shards[i % 5 == 0 ? 0 : (i % 3 == 0 ? 1 : 2)].push_back(id);
    all.insert(id);
  }
  for (auto& s : f.shards) std::sort(s.begin(), s.end());
  for (int page_size : {1, 2, 7, 50, 96, 97, 1000}) {
    std::vector<std::string> seen;
    std::string token;
    int pages = 0;
    do {
      std::vector<std::string> out;
      token = MergeShardPages<std::string>(f.Pages(token, page_size), page_size, Id, &out);
      ASSERT_LE(static_cast<int>(out.size()), page_size);
      if (!token.empty()) {
        ASSERT_EQ(static_cast<int>(out.size()), page_size) << "only the last page may be short";
      }
      seen.insert(seen.end(), out.begin(), out.end());
      ASSERT_LT(++pages, 200) << "paging does not end";
    } while (!token.empty());
    EXPECT_EQ(seen, std::vector<std::string>(all.begin(), all.end())) << "page_size " << page_size;
  }
}

}  // namespace
}  // namespace adapterd::api
