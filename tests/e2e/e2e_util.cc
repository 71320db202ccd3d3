#include "tests/e2e/e2e_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace adapterd::e2e {
namespace {

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, stderr_fd, STDERR_FILENO);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": ", std::strerror(rc)));
  return pid;
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

absl::StatusOr<Process> Process::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("open ", log_path, ": ", std::strerror(errno)));
  absl::StatusOr<pid_t> pid = Spawn(argv, -1, fd, fd);
  ::close(fd);
  if (!pid.ok()) return pid.status();
  return Process(*pid, log_path);
}

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), log_path_(std::move(other.log_path_)), exit_code_(other.exit_code_) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    this->~Process();
    pid_ = std::exchange(other.pid_, -1);
    log_path_ = std::move(other.log_path_);
    exit_code_ = other.exit_code_;
  }
  return *this;
}

Process::~Process() {
  if (pid_ > 0 && !exit_code_.has_value()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

bool Process::running() {
  if (pid_ <= 0 || exit_code_.has_value()) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = DecodeWaitStatus(status);
    return false;
  }
  return r == 0;
}

void Process::Signal(int sig) const {
  if (pid_ > 0 && !exit_code_.has_value()) ::kill(pid_, sig);
}

absl::StatusOr<int> Process::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    if (!running()) {
      if (exit_code_.has_value()) return *exit_code_;
      return absl::InternalError("waitpid failed");
    }
    if (absl::Now() >= end) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string Process::Log() const { return ReadAll(log_path_); }

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout,
                                         const std::string& stdin_text) {
  return ::adapterd::testing::RunProgram(argv, {.timeout = timeout, .stdin_text = stdin_text});
}

bool PollUntil(const std::function<bool()>& done, absl::Duration timeout, absl::Duration interval) {
  const absl::Time end = absl::Now() + timeout;
  while (true) {
    if (done()) return true;
    if (absl::Now() >= end) return false;
    absl::SleepFor(interval);
  }
}

namespace {

// Binds 127.0.0.1:`port` (0: the kernel's pick) and returns the port bound,
// or 0 when it is taken.
int BindLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  ::close(fd);
  return ok ? static_cast<int>(ntohs(addr.sin_port)) : 0;
}

}  // namespace

absl::StatusOr<int> PickFreePort() {
  constexpr int kLowest = 10000;  // above the common registered service ports
  int ephemeral_low = 32768;      // Linux's default
  {
    std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    if (range >> low && low > 0) ephemeral_low = low;
  }
  if (ephemeral_low - kLowest < 1000) {  // an unusual range: the kernel's pick
    const int port = BindLoopback(0);
    if (port == 0) return absl::InternalError("bind to 127.0.0.1:0 failed");
    return port;
  }
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> draw(kLowest, ephemeral_low - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    if (const int port = BindLoopback(draw(rng)); port != 0) return port;
  }
  return absl::InternalError(absl::StrCat("no free port on 127.0.0.1 in [", kLowest, ", ", ephemeral_low, ")"));
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace adapterd::e2e
