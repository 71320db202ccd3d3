#include "common/routing.h"

#include <gtest/gtest.h>

#include <string>

namespace adapterd {
namespace {

TEST(Routing, MintedIdsCarryTheirTask) {
  const std::string job = FormatMintedId("job", 0x18c2f3a4b5c6d, 0xabcdef12, "sentiment.v2_x-y");
  EXPECT_EQ(job, "job-18c2f3a4b5c6dcdef12.sentiment.v2_x-y");
  EXPECT_EQ(RoutingTaskOf(job), "sentiment.v2_x-y");
  const std::string ds = MintId("ds", 12345, "topics");
  EXPECT_EQ(ds.rfind("ds-", 0), 0u);
  EXPECT_EQ(RoutingTaskOf(ds), "topics");
}

TEST(Routing, IdsWithoutATaskRouteNowhere) {
  EXPECT_EQ(RoutingTaskOf(FormatMintedId("job", 1, 2, "")), "");
  EXPECT_EQ(RoutingTaskOf("job-0000000000001000002"), "");    // the old format
  EXPECT_EQ(RoutingTaskOf("my-dataset.csv"), "");             // client-chosen
  EXPECT_EQ(RoutingTaskOf("job-zzzzzzzzzzzzzzzzzzz.t"), "");  // not hex
  EXPECT_EQ(RoutingTaskOf("job-0000000000001000002."), "");   // empty task
  EXPECT_EQ(RoutingTaskOf("job-0000000000001000002xt"), "");  // no dot
  EXPECT_EQ(RoutingTaskOf(std::string("ds-0000000000001000002.a\nb")), "");
  EXPECT_EQ(RoutingTaskOf(""), "");
}

TEST(Routing, MintedIdsSortInCreationOrder) {
  const std::string a = FormatMintedId("job", 1000, 0xffffff, "zzz");
  const std::string b = FormatMintedId("job", 1001, 0, "aaa");
  EXPECT_LT(a, b);
}

TEST(Routing, LongestTaskFitsTheMintedLimit) {
  const std::string id = MintId("job", 1, std::string(128, 't'));
  EXPECT_LE(id.size(), kMaxMintedIdBytes);
  EXPECT_EQ(RoutingTaskOf(id), std::string(128, 't'));
}

TEST(Routing, ACallAboutATaskMustCarryThatTaskAsItsHeader) {
  const std::string same = "split-x", other = "split-y";
  EXPECT_TRUE(CheckRoutingHeader("split-x", &same).ok());
  const absl::Status missing = CheckRoutingHeader("split-x", nullptr);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.message().find("x-task-id: split-x"), std::string::npos) << missing;
  EXPECT_NE(missing.message().find("none was sent"), std::string::npos) << missing;
  const absl::Status wrong = CheckRoutingHeader("split-x", &other);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("got 'split-y'"), std::string::npos) << wrong;
}

}  // namespace
}  // namespace adapterd
