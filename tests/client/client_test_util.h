// Helpers of the client tests: temp dirs and files, a free-but-closed
// loopback port, and running the built adapterctl binary with a time bound
// and a clean environment.
//
// Thread safety: none needed (used from the test thread).
#ifndef ADAPTERD_TESTS_CLIENT_CLIENT_TEST_UTIL_H_
#define ADAPTERD_TESTS_CLIENT_CLIENT_TEST_UTIL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/testing/subprocess.h"
#include "common/testing/temp_dir.h"

namespace adapterd::client::testing {

using ::adapterd::testing::TempDir;

// A TCP port on 127.0.0.1 that is bound (so nobody else gets it) but not
// listening: connecting to it is refused at once. Released on destruction.
class ClosedPort {
 public:
  ClosedPort();
  ~ClosedPort();
  ClosedPort(const ClosedPort&) = delete;
  ClosedPort& operator=(const ClosedPort&) = delete;
  int port() const { return port_; }  // 0 if binding failed

 private:
  int fd_ = -1;
  int port_ = 0;
};

using ::adapterd::testing::RunResult;

// Runs `argv` (argv[0] = the program path; common/testing/subprocess.h) with
// an empty stdin, the test's environment minus ADAPTERD_* and proxy
// variables, plus `env`; killed after `timeout_seconds` (exit code 137).
absl::StatusOr<RunResult> RunProgram(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env, int timeout_seconds);

// The built adapterctl: $ADAPTERD_BINARY_DIR/client/adapterctl (ctest sets
// ADAPTERD_BINARY_DIR), else the path CMake compiled in.
std::string AdapterctlPath();

}  // namespace adapterd::client::testing

#endif  // ADAPTERD_TESTS_CLIENT_CLIENT_TEST_UTIL_H_
