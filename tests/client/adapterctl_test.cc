// The built adapterctl binary: help, usage errors, exit codes, the global
// flags and environment, against FakeAdapterd or a refused port on
// 127.0.0.1. Every run is bounded (RunProgram's alarm, and --timeout).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "client/commands.h"
#include "common/testing/status_matchers.h"
#include "tests/client/client_test_util.h"
#include "tests/client/fake_adapterd.h"

namespace adapterd::client {
namespace {

using ::adapterd::client::testing::ClosedPort;
using ::adapterd::client::testing::FakeServer;
using ::adapterd::client::testing::RunProgram;
using ::adapterd::client::testing::RunResult;
using ::adapterd::client::testing::TempDir;
using ::testing::HasSubstr;

constexpr int kRunTimeoutSeconds = 60;

class AdapterctlTest : public ::testing::Test {
 protected:
  RunResult Run(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
    args.insert(args.begin(), testing::AdapterctlPath());
    absl::StatusOr<RunResult> result = RunProgram(args, env, kRunTimeoutSeconds);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : RunResult{};
  }

  TempDir dir_;
};

TEST_F(AdapterctlTest, HelpListsTheCommandsAndTheExitCodes) {
  const RunResult help = Run({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* word : {"datasets", "train", "jobs", "tasks", "predict", "health", "--server", "--api-key",
                           "ADAPTERD_API_KEY", "--timeout", "--json"}) {
    EXPECT_THAT(help.out, HasSubstr(word)) << word;
  }
  EXPECT_THAT(help.out, HasSubstr(kExitCodesHelp));

  const RunResult train = Run({"train", "--help"});
  EXPECT_EQ(train.exit_code, 0) << train.err;
  for (const char* flag :
       {"--task", "--data", "--validation", "--detach", "--epochs", "--learning-rate", "--batch-size", "--seed"}) {
    EXPECT_THAT(train.out, HasSubstr(flag)) << flag;
  }
  const RunResult jobs = Run({"jobs", "--help"});
  EXPECT_EQ(jobs.exit_code, 0);
  for (const char* sub : {"list", "get", "cancel", "watch"}) EXPECT_THAT(jobs.out, HasSubstr(sub)) << sub;
  const RunResult tasks = Run({"tasks", "--help"});
  EXPECT_EQ(tasks.exit_code, 0);
  for (const char* sub : {"list", "get", "delete", "export", "import"}) {
    EXPECT_THAT(tasks.out, HasSubstr(sub)) << sub;
  }
}

TEST_F(AdapterctlTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(Run({"--no-such-flag", "health"}).exit_code, kExitUsage);
  EXPECT_EQ(Run({}).exit_code, kExitUsage);                             // no command
  EXPECT_EQ(Run({"frobnicate"}).exit_code, kExitUsage);                 // unknown command
  EXPECT_EQ(Run({"predict", "text"}).exit_code, kExitUsage);            // --task is required
  EXPECT_EQ(Run({"jobs"}).exit_code, kExitUsage);                       // needs a subcommand
  EXPECT_EQ(Run({"--timeout", "-1", "health"}).exit_code, kExitUsage);  // must be positive
  const RunResult bad = Run({"train", "--task", "t", "--data", "x.csv", "--epochs", "many"});
  EXPECT_EQ(bad.exit_code, kExitUsage);
  EXPECT_THAT(bad.err, HasSubstr("--epochs"));
  const RunResult kind = Run({"train", "--task", "t", "--data", "x.csv", "--kind", "poetry"});
  EXPECT_EQ(kind.exit_code, kExitUsage);
  EXPECT_THAT(kind.err, HasSubstr("--kind"));
}

TEST_F(AdapterctlTest, HealthAgainstARefusedPortExitsUnavailable) {
  ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  const std::string server = absl::StrCat("127.0.0.1:", closed.port());
  const RunResult r = Run({"--server", server, "--timeout", "5", "health"});
  EXPECT_EQ(r.exit_code, kExitUnavailable) << r.err;
  EXPECT_THAT(r.err, HasSubstr(server));
  // ADAPTERD_SERVER works as well as --server.
  const RunResult by_env = Run({"--timeout", "5", "health"}, {{"ADAPTERD_SERVER", server}});
  EXPECT_EQ(by_env.exit_code, kExitUnavailable) << by_env.err;
}

TEST_F(AdapterctlTest, HealthExitCodeFollowsTheServingStatus) {
  ASSERT_OK_AND_ASSIGN(auto server, FakeServer::Start());
  RunResult serving = Run({"--server", server->address(), "--timeout", "10", "health"});
  EXPECT_EQ(serving.exit_code, 0) << serving.err;
  EXPECT_EQ(serving.out, "SERVING\n");
  server->SetServing(false);
  RunResult not_serving = Run({"--server", server->address(), "--timeout", "10", "health"});
  EXPECT_EQ(not_serving.exit_code, kExitError) << not_serving.err;
  EXPECT_EQ(not_serving.out, "NOT_SERVING\n");
}

TEST_F(AdapterctlTest, PredictSendsTheKeyFromTheEnvironmentAndPrintsJson) {
  ASSERT_OK_AND_ASSIGN(auto server, FakeServer::Start());
  const RunResult r = Run({"--server", server->address(), "--timeout", "10", "predict", "--task", "sentiment", "--json",
                           "a good day", "a bad day"},
                          {{"ADAPTERD_API_KEY", "env-key"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << r.out;
  ASSERT_EQ(doc["predictions"].size(), 2u);
  EXPECT_EQ(doc["predictions"][0]["label"], "positive");
  EXPECT_EQ(doc["predictions"][1]["label"], "negative");
  const auto calls = server->fake().CallsOf("Predict");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].Metadata("authorization"), std::optional<std::string>("Bearer env-key"));
  EXPECT_EQ(calls[0].Metadata("x-task-id"), std::optional<std::string>("sentiment"));
  EXPECT_LE(calls[0].deadline_left, absl::Milliseconds(10500));  // --timeout (30 s by default)

  // --api-key wins over the environment; no key, no header.
  ASSERT_EQ(Run({"--server", server->address(), "--api-key", "flag-key", "predict", "--task", "t", "x"},
                {{"ADAPTERD_API_KEY", "env-key"}})
                .exit_code,
            0);
  ASSERT_EQ(Run({"--server", server->address(), "predict", "--task", "t", "x"}).exit_code, 0);
  const auto all = server->fake().CallsOf("Predict");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].Metadata("authorization"), std::optional<std::string>("Bearer flag-key"));
  EXPECT_EQ(all[2].Metadata("authorization"), std::nullopt);
}

TEST_F(AdapterctlTest, ServerErrorsBecomeExitCodesAndMessages) {
  ASSERT_OK_AND_ASSIGN(auto server, FakeServer::Start());
  server->fake().FailWith("GetTask", grpc::Status(grpc::StatusCode::NOT_FOUND, "task nope not found"));
  const RunResult r = Run({"--server", server->address(), "tasks", "get", "nope"});
  EXPECT_EQ(r.exit_code, kExitNotFound);
  EXPECT_EQ(r.err, "adapterctl: not found: task nope not found\n");
}

// The file goes to the server as its bytes; the reader there (the fake reads
// with the same one) names the bad line, and nothing is stored.
TEST_F(AdapterctlTest, UploadingABadFileNamesTheLineAndStoresNothing) {
  ASSERT_OK_AND_ASSIGN(auto server, FakeServer::Start());
  const std::string bad = dir_.Write("bad.jsonl", "{\"text\":\"a\",\"label\":\"x\"}\n{\"text\":7,\"label\":\"x\"}\n");
  const RunResult r = Run({"--server", server->address(), "datasets", "upload", bad});
  EXPECT_EQ(r.exit_code, kExitInvalidArgument);
  EXPECT_THAT(r.err, HasSubstr("bad.jsonl: line 2: \"text\" must be a string"));
  EXPECT_TRUE(server->fake().dataset_ids().empty());

  // A number too large for a double, even in a field adapterctl ignores, is
  // a bad line like any other, never an abort of the process.
  const std::string huge = dir_.Write("huge.jsonl",
                                      "{\"text\":\"a\",\"label\":\"x\"}\n"
                                      "{\"text\":\"a\",\"label\":\"x\",\"n\":1e400}\n");
  const RunResult overflow = Run({"--server", server->address(), "datasets", "upload", huge});
  EXPECT_EQ(overflow.exit_code, kExitInvalidArgument) << overflow.err;
  EXPECT_THAT(overflow.err, HasSubstr("huge.jsonl: line 2: invalid JSON: number overflow"));
  EXPECT_TRUE(server->fake().dataset_ids().empty());

  const std::string good = dir_.Write("good.csv", "text,label\nhello,x\n");
  const RunResult ok = Run({"--server", server->address(), "datasets", "upload", good, "--id", "greetings"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("greetings"));
  EXPECT_EQ(server->fake().dataset_ids(), std::vector<std::string>{"greetings"});
}

}  // namespace
}  // namespace adapterd::client
