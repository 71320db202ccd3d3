// Running a program to completion from a test: its exit code, stdout and
// stderr. The one subprocess runner of the test suites (the e2e tests'
// RunCommand and the client tests' RunProgram are thin wrappers over it).
//
// The child gets `stdin_text` on stdin (an empty stdin when empty), the
// test's environment minus the variables `drop_env` selects, plus `env`.
// After `timeout` it is killed (SIGKILL, exit code 137), so a call never
// blocks much longer than that. Output goes through files in a private temp
// directory, removed before the call returns: a child that fills a pipe
// cannot stall, and a child that leaves a daemon behind cannot hold the
// call open.
//
// Exit codes: the program's own, or 128 + the signal that ended it.
//
// Thread safety: safe to call from several threads; each call has its own
// files. The child is started with posix_spawn, so a multi-threaded test
// process is fine.
#ifndef ADAPTERD_COMMON_TESTING_SUBPROCESS_H_
#define ADAPTERD_COMMON_TESTING_SUBPROCESS_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace adapterd::testing {

struct RunOptions {
  absl::Duration timeout = absl::Minutes(5);
  std::string stdin_text;
  // Added to (or replacing in) the child's environment.
  std::map<std::string, std::string> env;
  // Returns true for a variable name the child must not inherit.
  std::function<bool(std::string_view name)> drop_env;
};

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// INTERNAL when the program cannot be started (argv[0] is a path; no PATH
// search) or its output cannot be read back.
absl::StatusOr<RunResult> RunProgram(const std::vector<std::string>& argv, const RunOptions& options = {});

}  // namespace adapterd::testing

#endif  // ADAPTERD_COMMON_TESTING_SUBPROCESS_H_
