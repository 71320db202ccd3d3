// End to end, with the real binaries: how calls end when a client or the
// server goes away, and how the server starts and stops.
//
//   - A client stream that never half-closes (the client process is
//     SIGKILLed, or the server shuts down under it) stores nothing: no
//     dataset, no task; a retry with the same id starts afresh.
//   - SIGTERM: open watches and Predicts during the drain end UNAVAILABLE
//     (never CANCELLED), and the process is gone within --drain_seconds even
//     with a stream held open and a training job running; the job resumes
//     after the restart as its second attempt. With no time at all for the
//     running step, the watchdog exits at the deadline and nothing is lost.
//   - SIGHUP reloads the tenants file (a revoked key stops working); keys
//     never reach the server's output.
//   - Start-up errors name the file once, and a config that disagrees with
//     its checkpoint is refused.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/commands.h"
#include "common/dataset_file.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kUnavailable = 14;  // grpc::StatusCode::UNAVAILABLE

class LifecycleTest : public ServerProcessTest {
 protected:
  // The value of a counter sample whose labels include every one of
  // `labels` ("name=\"value\""), or -1 when the scrape has none.
  double Counter(const std::string& name, const std::vector<std::string>& labels) {
    absl::StatusOr<HttpResponse> r = HttpGet(metrics_port_, "/metrics", absl::Seconds(10));
    if (!r.ok()) return -1;
    for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
      if (!absl::StartsWith(line, name + "{")) continue;
      bool all = true;
      for (const std::string& l : labels) all = all && line.find(l) != absl::string_view::npos;
      if (!all) continue;
      return std::stod(std::string(line.substr(line.rfind(' ') + 1)));
    }
    return -1;
  }

  // After a restart: `job_id` runs again as its second attempt; then it is
  // cancelled, so the server stops promptly.
  void ExpectResumedAsSecondAttemptThenCancel(const std::string& job_id) {
    nlohmann::json resumed;
    ASSERT_TRUE(PollUntil(
        [&] {
          resumed = CtlJson({"jobs", "get", job_id});
          return resumed.value("state", "") == "JOB_STATE_RUNNING" && resumed.value("attempts", 0) == 2;
        },
        absl::Minutes(2)))
        << resumed.dump();
    const CommandResult cancel = Ctl({"jobs", "cancel", job_id});
    EXPECT_EQ(cancel.exit_code, 0) << cancel.out << cancel.err << CtlJson({"jobs", "get", job_id}).dump()
                                   << server_->Log();
  }

  // "status N ..." lines a probe printed, as codes.
  static std::vector<int> Codes(const std::string& log) {
    std::vector<int> codes;
    std::smatch m;
    std::string rest = log;
    while (std::regex_search(rest, m, std::regex("status ([0-9]+)"))) {
      codes.push_back(std::stoi(m[1].str()));
      rest = m.suffix();
    }
    return codes;
  }
};

TEST_F(LifecycleTest, UploadWhoseClientIsKilledStoresNothingAndCanBeRetried) {
  ASSERT_NO_FATAL_FAILURE(StartServer());
  Process client = Probe({"upload", "ds-killed", "6", "hold"}, "probe-upload");
  ASSERT_TRUE(Logged(client, "holding")) << client.Log();
  client.Signal(SIGKILL);
  ASSERT_OK_AND_ASSIGN(int code, client.Wait(absl::Minutes(1)));
  EXPECT_EQ(code, 128 + SIGKILL);

  // The server ends the call once it sees the connection gone; the call
  // must end CANCELLED, not commit what had arrived.
  const std::vector<std::string> labels = {"method=\"UploadDataset\"", "code=\"CANCELLED\""};
  ASSERT_TRUE(PollUntil([&] { return Counter("adapterd_requests_total", labels) == 1; }, absl::Minutes(1)))
      << server_->Log();
  EXPECT_EQ(Counter("adapterd_requests_total", {"method=\"UploadDataset\"", "code=\"OK\""}), -1);
  CommandResult get = Ctl({"datasets", "get", "ds-killed"});
  EXPECT_EQ(get.exit_code, 4) << get.out << get.err;  // NOT_FOUND

  // A complete retry under the same id is not ALREADY_EXISTS and holds
  // every example.
  Process retry = Probe({"upload", "ds-killed", "6"}, "probe-retry");
  ASSERT_OK_AND_ASSIGN(int retry_code, retry.Wait(absl::Minutes(1)));
  EXPECT_EQ(retry_code, 0);
  EXPECT_THAT(retry.Log(), HasSubstr("status 0 "));
  const nlohmann::json ds = CtlJson({"datasets", "get", "ds-killed"});
  EXPECT_EQ(ds.value("num_examples", ""), "300") << ds.dump();
  EXPECT_EQ(StopServer(), 0);
}

// An upload of dataset d in 3 chunks, the server SIGKILLed after 2: after
// the restart d is NOT_FOUND, a new 1-chunk upload of d succeeds, and
// training on it reads only the new upload's chunk. Here the crash's state is
// made exactly (chunks 0..2 of the id, no record) under the id `adapterctl
// train` gives its data, then the user's flow runs against the real binary.
TEST_F(LifecycleTest, ChunksOfAnUploadACrashCutShortNeverPoisonItsId) {
  const std::string data = Example("sentiment_train.csv");
  ASSERT_OK_AND_ASSIGN(const std::string bytes, ReadFileToString(data));
  const std::string id = client::DatasetIdForFile(bytes);
  ASSERT_OK_AND_ASSIGN(const std::vector<v1::Example> examples, ParseDataset(bytes, DatasetFormat::kCsv, data));
  {
    storage::Database::Options o;
    o.path = dir_.Sub("data/db");
    ASSERT_OK_AND_ASSIGN(auto db, storage::Database::Open(o));
    for (int c = 0; c < 3; ++c) {
      storage::v1::DatasetChunk chunk;
      storage::v1::Example* e = chunk.add_examples();
      e->set_text(absl::StrCat("dead upload ", c));
      e->set_label("dead");
      ASSERT_OK(db->datasets().PutChunk("default", id, c, chunk));
    }
  }
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_THAT(server_->Log(), HasSubstr("removed the chunks of 1 dataset uploads that never finished"));
  const CommandResult train =
      Ctl({"train", "--task", "after-crash", "--data", data, "--epochs", "1", "--seed", "4"}, "", 600);
  EXPECT_EQ(train.exit_code, 0) << train.err << train.out;
  const nlohmann::json ds = CtlJson({"datasets", "get", id});
  EXPECT_EQ(ds.value("num_examples", ""), std::to_string(examples.size())) << ds.dump();
  EXPECT_EQ(StopServer(), 0);
}

TEST_F(LifecycleTest, SigtermEndsCallsUnavailableStoresNoPartialStreamAndStaysWithinTheDrain) {
  drain_seconds_ = "3";
  ASSERT_NO_FATAL_FAILURE(StartServer());
  CommandResult train =
      Ctl({"train", "--task", "sentiment", "--data", Example("sentiment_train.csv"), "--epochs", "1", "--seed", "7"});
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string exported = dir_.Sub("sentiment.safetensors");
  ASSERT_EQ(Ctl({"tasks", "export", "sentiment", "--out", exported}).exit_code, 0);

  // A job that runs far longer than the test, watched.
  const nlohmann::json job = CtlJson(
      {"train", "--detach", "--task", "long", "--data", Example("topics_train.csv"), "--epochs", "500", "--seed", "3"});
  const std::string job_id = job.value("job_id", "");
  ASSERT_FALSE(job_id.empty()) << job.dump();
  ASSERT_TRUE(PollUntil(
      [&] {
        return CtlJson({"jobs", "get", job_id}).value("state", "") == "JOB_STATE_RUNNING";
      },
      absl::Minutes(2)));
  Process watch = Probe({"watch", job_id}, "probe-watch");
  ASSERT_TRUE(Logged(watch, "event"));
  // Two client streams held open: every message sent, never half-closed.
  Process upload = Probe({"upload", "ds-term", "4", "hold"}, "probe-upload");
  Process import = Probe({"import", "sentiment-copy", exported, "hold"}, "probe-import");
  ASSERT_TRUE(Logged(upload, "holding"));
  ASSERT_TRUE(Logged(import, "holding"));
  // Predicts before, during and after the shutdown.
  Process predicts = Probe({"predict_loop", "sentiment", "20"}, "probe-predict");
  ASSERT_TRUE(Logged(predicts, "first ok")) << predicts.Log();

  const absl::Time sigterm = absl::Now();
  server_->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int exit_code, server_->Wait(absl::Minutes(1)));
  const absl::Duration took = absl::Now() - sigterm;
  std::cout << "shutdown with --drain_seconds 3 took " << absl::FormatDuration(took) << "\n";
  EXPECT_EQ(exit_code, 0) << server_->Log();
  // --drain_seconds 3 bounds the whole shutdown; the slack is for process
  // teardown and this test's polling, not for the drain.
  EXPECT_LT(took, absl::Seconds(3) + absl::Milliseconds(1500)) << server_->Log();
  EXPECT_THAT(server_->Log(), HasSubstr("SIGTERM received"));

  ASSERT_OK(watch.Wait(absl::Minutes(1)).status());
  EXPECT_THAT(Codes(watch.Log()), ::testing::ElementsAre(kUnavailable)) << watch.Log();
  ASSERT_OK(predicts.Wait(absl::Minutes(1)).status());
  EXPECT_THAT(predicts.Log(), AllOf(HasSubstr("ok "), Not(HasSubstr("ok 0\n")))) << predicts.Log();
  for (int code : Codes(predicts.Log())) EXPECT_EQ(code, kUnavailable) << predicts.Log();
  ASSERT_OK(upload.Wait(absl::Minutes(1)).status());
  ASSERT_OK(import.Wait(absl::Minutes(1)).status());
  EXPECT_THAT(Codes(upload.Log()), ::testing::Each(::testing::Ne(0))) << upload.Log();
  EXPECT_THAT(Codes(import.Log()), ::testing::Each(::testing::Ne(0))) << import.Log();

  // Nothing from the held streams was stored; the job resumes as its second
  // attempt.
  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_EQ(Ctl({"datasets", "get", "ds-term"}).exit_code, 4);
  EXPECT_EQ(Ctl({"tasks", "get", "sentiment-copy"}).exit_code, 4);
  ASSERT_NO_FATAL_FAILURE(ExpectResumedAsSecondAttemptThenCancel(job_id));
  EXPECT_EQ(StopServer(), 0);
}

// --drain_seconds 0 leaves no time for the running training step: the
// watchdog ends the process at once, and nothing is lost (the state is
// durable before the exit; the job resumes from its last checkpoint).
// SIGHUP re-reads the tenants file without a restart: a revoked key fails
// from the next call and its replacement works; a file that does not load
// leaves the previous table in force. No key ever reaches the server's output.
TEST_F(LifecycleTest, SighupReloadsTheTenantsFileAndKeysNeverReachTheLog) {
  const std::string file = dir_.Sub("tenants.json");
  const std::string old_key = "old-key-5f0c2a1e9d";
  const std::string new_key = "new-key-77b3e40c51";
  auto write = [&](const std::string& text) {
    std::ofstream(file, std::ios::trunc) << text;
    std::filesystem::permissions(file, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  };
  auto tenants = [](const std::string& key) {
    return absl::StrCat(R"({"tenants":[{"id":"acme","api_key_sha256":")", Sha256Hex(key), R"("}]})");
  };
  auto list_with = [&](const std::string& key) { return Ctl({"--api-key", key, "tasks", "list"}).exit_code; };
  auto reload = [&](const std::string& expect) {
    const size_t before = server_->Log().size();
    server_->Signal(SIGHUP);
    return PollUntil([&] { return server_->Log().find(expect, before) != std::string::npos; }, absl::Seconds(30));
  };
  write(tenants(old_key));
  extra_args_ = {"--tenants_file", file};
  StartServer();
  EXPECT_EQ(list_with(old_key), 0);
  EXPECT_EQ(list_with(new_key), 8);  // UNAUTHENTICATED

  write(tenants(new_key));
  ASSERT_TRUE(reload("tenants file reloaded")) << server_->Log();
  EXPECT_EQ(list_with(old_key), 8);
  EXPECT_EQ(list_with(new_key), 0);

  write("{ not json");
  ASSERT_TRUE(reload("tenants file NOT reloaded")) << server_->Log();
  EXPECT_EQ(list_with(new_key), 0);
  EXPECT_TRUE(server_->running());

  EXPECT_EQ(StopServer(), 0);
  const std::string log = server_->Log();
  EXPECT_THAT(log, AllOf(Not(HasSubstr(old_key)), Not(HasSubstr(new_key))));
}

// --log_format json: every line the real binary writes to stderr, from start
// to a clean stop, is one JSON object with a timestamp, a level, a source and
// a message; and what the tenants sent (their key, the texts and labels they
// trained on, the texts they predicted) appears nowhere in it, whether the
// calls succeeded or failed.
TEST_F(LifecycleTest, JsonLogIsOneObjectPerLineAndCarriesNoKeysTextsOrLabels) {
  const std::string key = "zq-key-8c1d5e0b7a42";
  const std::string tenants = dir_.Sub("tenants.json");
  std::ofstream(tenants) << R"({"tenants":[{"id":"acme","api_key_sha256":")" << Sha256Hex(key) << R"("}]})";
  std::filesystem::permissions(tenants, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::ostringstream csv;
  csv << "text,label\n";
  for (int i = 0; i < 24; ++i) {
    csv << "zq-text-" << i << (i % 2 ? " great fast" : " broken slow") << ","
        << (i % 2 ? "zq-label-up" : "zq-label-down") << "\n";
  }
  const std::string data = dir_.Write("secret.csv", csv.str());
  extra_args_ = {"--tenants_file", tenants, "--log_format", "json"};
  ASSERT_NO_FATAL_FAILURE(StartServer());

  EXPECT_EQ(Ctl({"--api-key", key, "train", "--task", "zq-task", "--data", data, "--epochs", "1"}).exit_code, 0);
  EXPECT_EQ(Ctl({"--api-key", key, "predict", "--task", "zq-task", "zq-predict-me please"}).exit_code, 0);
  EXPECT_NE(Ctl({"--api-key", key, "predict", "--task", "zq-missing-task", "zq-predict-me too"}).exit_code, 0);
  EXPECT_NE(Ctl({"--api-key", key + "-wrong", "tasks", "list"}).exit_code, 0);
  EXPECT_NE(Ctl({"--api-key", key, "datasets", "upload", "--id", "zq-bad",
                 dir_.Write("bad.csv", "text,label\n,zq-label-x\n")})
                .exit_code,
            0);
  EXPECT_EQ(StopServer(), 0);

  const std::string log = server_->Log();
  int lines = 0;
  std::vector<std::string> messages;
  const std::regex ts("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$");
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    ++lines;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    ASSERT_TRUE(j.contains("ts") && j["ts"].is_string() && std::regex_match(j["ts"].get<std::string>(), ts)) << line;
    EXPECT_THAT(j.value("level", ""), AnyOf("INFO", "WARNING", "ERROR")) << line;
    EXPECT_TRUE(j.contains("source") && j.contains("thread") && j["msg"].is_string()) << line;
    messages.push_back(j.value("msg", ""));
  }
  EXPECT_GE(lines, 5);
  EXPECT_THAT(messages, Contains(HasSubstr("SERVING on port")));
  EXPECT_THAT(messages, Contains("stopped cleanly"));
  for (const std::string& secret : {key, std::string("zq-text"), std::string("zq-label"), std::string("zq-predict")}) {
    EXPECT_THAT(log, Not(HasSubstr(secret)));
  }
}

TEST_F(LifecycleTest, AShutdownThatOutrunsTheDrainExitsAtTheDeadlineLosingNothing) {
  drain_seconds_ = "0";
  ASSERT_NO_FATAL_FAILURE(StartServer());
  ASSERT_EQ(Ctl({"train", "--task", "sentiment", "--data", Example("sentiment_train.csv"), "--epochs", "1"}).exit_code,
            0);
  const nlohmann::json before = CtlJson({"predict", "--task", "sentiment", "--all-scores", "a great fast screen"});
  const nlohmann::json job = CtlJson({"train", "--detach", "--task", "long", "--data", Example("topics_train.csv"),
                                      "--epochs", "500", "--seed", "3", "--checkpoint-every", "2"});
  const std::string job_id = job.value("job_id", "");
  ASSERT_TRUE(PollUntil(
      [&] {
        const nlohmann::json j = CtlJson({"jobs", "get", job_id});
        return j.contains("progress") && std::stoll(j["progress"].value("step", std::string("0"))) >= 4;
      },
      absl::Minutes(2)));
  server_->Signal(SIGTERM);
  ASSERT_OK_AND_ASSIGN(int exit_code, server_->Wait(absl::Minutes(1)));
  EXPECT_EQ(exit_code, 0);
  EXPECT_THAT(server_->Log(), HasSubstr("--drain_seconds passed before shutdown finished; exiting now"));

  ASSERT_NO_FATAL_FAILURE(StartServer());
  EXPECT_EQ(CtlJson({"predict", "--task", "sentiment", "--all-scores", "a great fast screen"})["predictions"],
            before["predictions"]);
  ASSERT_NO_FATAL_FAILURE(ExpectResumedAsSecondAttemptThenCancel(job_id));
  EXPECT_EQ(StopServer(), 0);
}

// A model directory copied from the generated one, for breaking.
class BrokenModelTest : public LifecycleTest {
 protected:
  std::string CopyModel() {
    const std::string dir = dir_.Sub("broken-model");
    std::filesystem::copy(model_root_->Sub("model"), dir);
    return dir;
  }
  // Runs adapterd on `model_dir`; it must fail to start.
  CommandResult StartFails(const std::string& model_dir, std::vector<std::string> extra_flags = {}) {
    std::vector<std::string> argv = {kAdapterd,    "--listen",       "127.0.0.1:0", "--metrics_listen", "",
                                     "--data_dir", dir_.Sub("data"), "--model_dir", model_dir,          "--threads",
                                     "1"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, absl::Minutes(2));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }
  static int Occurrences(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
};

TEST_F(BrokenModelTest, TruncatedWeightsFailWithThePathNamedOnce) {
  const std::string dir = CopyModel();
  const std::string weights = dir + "/model.safetensors";
  std::filesystem::resize_file(weights, 100);
  const CommandResult r = StartFails(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("failed to start"));
  EXPECT_EQ(Occurrences(r.err, weights), 1) << r.err;
}

// The server parses --device with the model's parser (one parser, so that
// "cuda" without an index means the same device everywhere).
// CI's LibTorch has no CUDA: asking for it is a clear start-up error.
TEST_F(BrokenModelTest, ACudaDeviceOnALibTorchWithoutCudaIsRefusedAtStart) {
  const CommandResult r = StartFails(CopyModel(), {"--device", "cuda"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("failed to start: FAILED_PRECONDITION: device 'cuda' requested but LibTorch has no "
                               "CUDA device"));
}

TEST_F(BrokenModelTest, ABadConfigFailsWithThePathNamedOnce) {
  const std::string dir = CopyModel();
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["hidden_size"] = "wide";
  std::ofstream(dir + "/config.json") << config.dump();
  const CommandResult r = StartFails(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir + "/config.json: 'hidden_size' must be an integer")) << r.err;
  EXPECT_EQ(Occurrences(r.err, "config.json"), 1) << r.err;
}

TEST_F(BrokenModelTest, FewerLayersInTheConfigThanTheCheckpointAreRefused) {
  const std::string dir = CopyModel();
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  ASSERT_GE(config["num_hidden_layers"].get<int>(), 2);
  config["num_hidden_layers"] = 1;
  std::ofstream(dir + "/config.json") << config.dump();
  const CommandResult r = StartFails(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("belongs to layer 1, but config.json's num_hidden_layers is 1")) << r.err;
  EXPECT_EQ(Occurrences(r.err, dir + "/model.safetensors"), 1) << r.err;
}

}  // namespace
}  // namespace adapterd::e2e
