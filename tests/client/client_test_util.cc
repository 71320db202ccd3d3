#include "tests/client/client_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace adapterd::client::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool DroppedFromChildEnv(const std::string& entry) {
  const std::string name = entry.substr(0, entry.find('='));
  if (absl::StartsWith(name, "ADAPTERD_")) return true;
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return absl::EndsWith(lower, "_proxy");
}

}  // namespace

ClosedPort::ClosedPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);  // bound, never listen()ed: connects are refused
}

ClosedPort::~ClosedPort() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<RunResult> RunProgram(const std::vector<std::string>& argv,
                                     const std::map<std::string, std::string>& env,
                                     int timeout_seconds, const std::string& scratch_dir) {
  static int runs = 0;
  ++runs;
  const std::string out_path = absl::StrCat(scratch_dir, "/run", runs, ".out");
  const std::string err_path = absl::StrCat(scratch_dir, "/run", runs, ".err");

  // Everything the child needs is built before fork(): after it, the child
  // (of a multi-threaded process) only makes async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!DroppedFromChildEnv(*e)) env_strings.emplace_back(*e);
  }
  for (const auto& [key, value] : env) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argvp;
  for (auto& s : args) argvp.push_back(s.data());
  argvp.push_back(nullptr);

  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out_fd < 0 || err_fd < 0 || in_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open output files: ", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    ::dup2(in_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::alarm(static_cast<unsigned>(timeout_seconds));  // survives exec
    ::execve(argvp[0], argvp.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
  ::close(in_fd);
  int wait_status = 0;
  while (::waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  RunResult result;
  result.exit_code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status)
                                            : 128 + WTERMSIG(wait_status);
  result.out = ReadAll(out_path);
  result.err = ReadAll(err_path);
  return result;
}

std::string AdapterctlPath() {
  if (const char* dir = std::getenv("ADAPTERD_BINARY_DIR"); dir != nullptr && *dir != '\0') {
    return absl::StrCat(dir, "/client/adapterctl");
  }
  return ADAPTERD_ADAPTERCTL_PATH;
}

}  // namespace adapterd::client::testing
