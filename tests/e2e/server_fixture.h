// The end-to-end tests' fixture: the real `adapterd` as a child process on
// 127.0.0.1 (free ports read from its log) over a temp data dir, a tiny model
// generated once per suite by the real `adapterd-make-model`, and the real
// `adapterctl` to drive it. Test binaries that include this define
// ADAPTERD_SOURCE_DIR_E2E, ADAPTERD_BIN, ADAPTERCTL_BIN and MAKE_MODEL_BIN
// (tests/e2e/CMakeLists.txt, adapterd_e2e_test()).
#ifndef ADAPTERD_TESTS_E2E_SERVER_FIXTURE_H_
#define ADAPTERD_TESTS_E2E_SERVER_FIXTURE_H_

#include <signal.h>

#include <algorithm>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/e2e/e2e_util.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::e2e {

using ::adapterd::storage::testing::TempDir;

inline const std::string kSourceDir = ADAPTERD_SOURCE_DIR_E2E;
inline const std::string kAdapterd = ADAPTERD_BIN;
inline const std::string kAdapterctl = ADAPTERCTL_BIN;
inline const std::string kMakeModel = MAKE_MODEL_BIN;
inline const std::string kRpcProbe = RPC_PROBE_BIN;

// Parses "<what> on port N" from a log; 0 if absent.
inline int PortFromLog(const std::string& log, const std::string& what) {
  std::smatch m;
  if (std::regex_search(log, m, std::regex(what + " on port ([0-9]+)"))) {
    int port = 0;
    if (absl::SimpleAtoi(m[1].str(), &port)) return port;
  }
  return 0;
}

class ServerProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_root_ = new TempDir();
    auto r = RunCommand(
        {kMakeModel, "--out", model_root_->Sub("model"), "--preset", "tiny", "--seed", "5", "--init_range", "0.2"},
        absl::Minutes(5));
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->exit_code, 0) << r->err;
  }
  static void TearDownTestSuite() {
    delete model_root_;
    model_root_ = nullptr;
  }

  // Starts adapterd on free ports over `data_dir` and waits until it is
  // SERVING (both ports are read from its log). The model is the generated
  // tiny one unless `model_dir` is given.
  void StartServer(const std::string& model_dir = "", const std::string& threads = "1") {
    std::vector<std::string> argv = {kAdapterd,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics_listen",
                                     "127.0.0.1:0",
                                     "--data_dir",
                                     dir_.Sub("data"),
                                     "--model_dir",
                                     model_dir.empty() ? model_root_->Sub("model") : model_dir,
                                     "--threads",
                                     threads,
                                     "--max_queue_delay_us",
                                     "500",
                                     "--drain_seconds",
                                     drain_seconds_};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
    argv.insert(argv.begin(), wrapper_.begin(), wrapper_.end());
    auto p = Process::Start(argv, dir_.Sub(absl::StrCat("adapterd.", ++starts_, ".log")));
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = std::make_unique<Process>(*std::move(p));
    const bool up = PollUntil(
        [&] {
          const std::string log = server_->Log();
          return !server_->running() || log.find("SERVING on port") != std::string::npos;
        },
        absl::Minutes(3));
    ASSERT_TRUE(up && server_->running()) << "adapterd did not start:\n" << server_->Log();
    const std::string log = server_->Log();
    grpc_port_ = PortFromLog(log, "SERVING");
    metrics_port_ = PortFromLog(log, "/metrics");
    ASSERT_GT(grpc_port_, 0) << log;
    ASSERT_GT(metrics_port_, 0) << log;
  }

  // SIGTERM, then the exit code (0 = clean shutdown).
  int StopServer() {
    server_->Signal(SIGTERM);
    absl::StatusOr<int> code = server_->Wait(absl::Minutes(2));
    EXPECT_TRUE(code.ok()) << code.status();
    return code.ok() ? *code : -1;
  }

  // `timeout_seconds` bounds each call, and `train`'s whole watch.
  CommandResult Ctl(std::vector<std::string> args, const std::string& stdin_text = "", int timeout_seconds = 120) {
    return CtlAt(grpc_port_, std::move(args), stdin_text, timeout_seconds);
  }
  // Ctl against the server on 127.0.0.1:`port`.
  CommandResult CtlAt(int port, std::vector<std::string> args, const std::string& stdin_text = "",
                      int timeout_seconds = 120) {
    std::vector<std::string> argv = {kAdapterctl, "--server", absl::StrCat("127.0.0.1:", port), "--timeout",
                                     absl::StrCat(timeout_seconds)};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<CommandResult> r = RunCommand(argv, absl::Seconds(std::max(300, timeout_seconds + 60)), stdin_text);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : CommandResult{};
  }

  // Runs `adapterctl --json ...`, expecting success, and parses stdout.
  nlohmann::json CtlJson(std::vector<std::string> args) { return CtlJsonAt(grpc_port_, std::move(args)); }
  nlohmann::json CtlJsonAt(int port, std::vector<std::string> args) {
    args.insert(args.begin(), "--json");
    CommandResult r = CtlAt(port, args);
    EXPECT_EQ(r.exit_code, 0) << "adapterctl " << args[1] << ": " << r.err << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  std::string Example(const std::string& name) const { return kSourceDir + "/examples/" + name; }

  // adapterctl arguments predicting two fixed texts with every label's score
  // (scores compared bit for bit across restarts, moves and restores).
  static std::vector<std::string> PredictArgs(const std::string& task) {
    return {"predict", "--task", task, "--all-scores", "great and fast, I love it", "broken, rude and slow"};
  }

  // Starts tests/e2e/rpc_probe against the server with `args`; its output
  // goes to <name>.log.
  Process Probe(const std::vector<std::string>& args, const std::string& name) {
    std::vector<std::string> argv = {kRpcProbe, absl::StrCat(grpc_port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<Process> p = Process::Start(argv, dir_.Sub(name + ".log"));
    EXPECT_TRUE(p.ok()) << p.status();
    return *std::move(p);
  }

  // Waits (at most `timeout`) until `p` has logged `line`.
  static bool Logged(Process& p, const std::string& line, absl::Duration timeout = absl::Minutes(2)) {
    return PollUntil([&] { return p.Log().find(line) != std::string::npos; }, timeout);
  }

  static inline TempDir* model_root_ = nullptr;
  // --drain_seconds of the servers StartServer() starts.
  std::string drain_seconds_ = "10";
  // More flags for the servers StartServer() starts.
  std::vector<std::string> extra_args_;
  // A command the servers StartServer() starts run under (its argv, which
  // ends by exec'ing the rest), e.g. unshare(1); empty = none.
  std::vector<std::string> wrapper_;
  TempDir dir_;
  std::unique_ptr<Process> server_;
  int starts_ = 0;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace adapterd::e2e

#endif  // ADAPTERD_TESTS_E2E_SERVER_FIXTURE_H_
