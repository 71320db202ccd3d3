#include "tests/client/client_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace adapterd::client::testing {
namespace {

bool DroppedFromChildEnv(std::string_view name) {
  if (name.starts_with("ADAPTERD_")) return true;
  std::string lower;
  for (char c : name) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return lower.ends_with("_proxy");
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
                                     const std::map<std::string, std::string>& env, int timeout_seconds) {
  return ::adapterd::testing::RunProgram(
      argv, {.timeout = absl::Seconds(timeout_seconds), .env = env, .drop_env = DroppedFromChildEnv});
}

std::string AdapterctlPath() {
  if (const char* dir = std::getenv("ADAPTERD_BINARY_DIR"); dir != nullptr && *dir != '\0') {
    return absl::StrCat(dir, "/client/adapterctl");
  }
  return ADAPTERD_ADAPTERCTL_PATH;
}

}  // namespace adapterd::client::testing
