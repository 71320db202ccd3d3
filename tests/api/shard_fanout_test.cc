// MergeShardPages: the page arithmetic of list calls across replicas, and
// ShardFanout's calls to fake replicas on loopback gRPC servers: retries of a
// peer's UNAVAILABLE (server/api/shard_fanout.h). The end-to-end fan-out,
// with real replicas behind nginx, is tests/e2e/sharding_e2e_test.cc.
#include "server/api/shard_fanout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
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

// A replica that answers ListTasks with one task named after it, after
// failing its first `failures` calls with `code`.
class FakeReplica final : public v1::Adapterd::Service {
 public:
  FakeReplica(std::string name, int failures, grpc::StatusCode code)
      : name_(std::move(name)), failures_(failures), code_(code) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeReplica() override { server_->Shutdown(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int calls() const { return calls_.load(); }

  grpc::Status ListTasks(grpc::ServerContext*, const v1::ListTasksRequest*, v1::ListTasksResponse* response) override {
    if (calls_.fetch_add(1) < failures_) return grpc::Status(code_, "not now");
    response->add_tasks()->set_task_id(name_);
    return grpc::Status::OK;
  }

 private:
  const std::string name_;
  const int failures_;
  const grpc::StatusCode code_;
  std::atomic<int> calls_{0};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

ShardFanout FanoutTo(const std::vector<const FakeReplica*>& replicas) {
  ShardFanout::Options options;
  for (const FakeReplica* r : replicas) options.peers.push_back(r->address());
  options.peer_deadline = absl::Seconds(60);
  options.secret = "fanout-test-secret";
  return ShardFanout(std::move(options));
}

TEST(ShardFanout, RetriesAPeersUnavailableAndListsEveryReplica) {
  // A peer whose answer is UNAVAILABLE twice (a connection not yet back, a
  // replica still loading) is asked again: the list is whole, not an error.
  FakeReplica steady("task-a", 0, grpc::StatusCode::OK);
  FakeReplica flaky("task-b", 2, grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(steady.address() != "127.0.0.1:0" && flaky.address() != "127.0.0.1:0");
  const ShardFanout fanout = FanoutTo({&steady, &flaky});
  grpc::ServerContext ctx;
  absl::StatusOr<v1::ListTasksResponse> listed = fanout.ListTasks(ctx, "", v1::ListTasksRequest());
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->tasks_size(), 2) << listed->DebugString();
  EXPECT_EQ(listed->tasks(0).task_id(), "task-a");
  EXPECT_EQ(listed->tasks(1).task_id(), "task-b");
  EXPECT_EQ(flaky.calls(), 3);
  EXPECT_EQ(steady.calls(), 1);
}

TEST(ShardFanout, APeerThatStaysUnavailableFailsTheListNamingIt) {
  FakeReplica steady("task-a", 0, grpc::StatusCode::OK);
  FakeReplica down("task-b", 1000, grpc::StatusCode::UNAVAILABLE);
  const ShardFanout fanout = FanoutTo({&steady, &down});
  grpc::ServerContext ctx;
  absl::StatusOr<v1::ListTasksResponse> listed = fanout.ListTasks(ctx, "", v1::ListTasksRequest());
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(listed.status().message()), ::testing::HasSubstr(down.address() + " did not answer"));
  // Retried a bounded number of times (gRPC's cap is five attempts).
  EXPECT_GE(down.calls(), 2);
  EXPECT_LE(down.calls(), 5);
}

TEST(ShardFanout, ErrorsAboutTheRequestAreNotRetried) {
  FakeReplica refusing("task-a", 1000, grpc::StatusCode::INVALID_ARGUMENT);
  const ShardFanout fanout = FanoutTo({&refusing});
  grpc::ServerContext ctx;
  absl::StatusOr<v1::ListTasksResponse> listed = fanout.ListTasks(ctx, "", v1::ListTasksRequest());
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kInvalidArgument) << listed.status();
  EXPECT_EQ(refusing.calls(), 1);
}

}  // namespace
}  // namespace adapterd::api
