// Helpers for end-to-end tests that drive the real binaries: child processes
// with their output in files, a command runner with a time limit, a loopback
// HTTP GET, and polling with a bound.
//
// Everything is bounded: no helper blocks longer than the timeout it is
// given. Network use is 127.0.0.1 only.
#ifndef ADAPTERD_TESTS_E2E_E2E_UTIL_H_
#define ADAPTERD_TESTS_E2E_E2E_UTIL_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/testing/http_client.h"
#include "common/testing/subprocess.h"

namespace adapterd::e2e {

// A child process; stdout and stderr go to `log_path` (appended). The
// destructor SIGKILLs it if it still runs.
class Process {
 public:
  static absl::StatusOr<Process> Start(const std::vector<std::string>& argv, const std::string& log_path);
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  bool running();
  void Signal(int sig) const;
  // Waits for exit; the exit code, 128+signal when killed, or
  // DEADLINE_EXCEEDED (the process is left running).
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // Everything the process has logged so far.
  std::string Log() const;

 private:
  Process(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_ = -1;
  std::string log_path_;
  std::optional<int> exit_code_;
};

using CommandResult = ::adapterd::testing::RunResult;
// Runs argv to completion (common/testing/subprocess.h: SIGKILL after
// `timeout`, then exit_code = 137), feeding it `stdin_text`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                                         const std::string& stdin_text = "");

// Reading /metrics back and calling the REST gateway:
// common/testing/http_client.h.
using ::adapterd::testing::HttpGet;
using ::adapterd::testing::HttpHeaders;
using ::adapterd::testing::HttpRequest;
using ::adapterd::testing::HttpResponse;
using ::adapterd::testing::SampleValue;

// Calls `done` every `interval` until it returns true or `timeout` passes.
bool PollUntil(const std::function<bool()>& done, absl::Duration timeout,
               absl::Duration interval = absl::Milliseconds(100));

// A TCP port on 127.0.0.1 that was free a moment ago, for a program that
// cannot report the port it bound (Prometheus, nginx) or whose port others
// must know before it starts. Drawn at random from below the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range): a port from
// bind(0) comes from that range, where any outgoing connection may take it
// as its source port before the program binds it (CI saw nginx fail so).
// tests/testing/free_port.py follows the same rule.
absl::StatusOr<int> PickFreePort();

// Percent-encodes a URL query value.
std::string UrlEncode(const std::string& s);

}  // namespace adapterd::e2e

#endif  // ADAPTERD_TESTS_E2E_E2E_UTIL_H_
