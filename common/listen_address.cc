#include "common/listen_address.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace adapterd {

absl::StatusOr<sockaddr_in> ParseIpv4ListenAddress(std::string_view address, std::string_view what) {
  const size_t colon = address.rfind(':');
  int port = -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string_view::npos || !absl::SimpleAtoi(std::string(address.substr(colon + 1)), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(what), " address '", std::string(address), "' is not host:port"));
  }
  const std::string host(address.substr(0, colon));
  if (host.empty() || host == "0.0.0.0") {
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
  } else if (host == "localhost") {
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " address '", std::string(address),
                                                   "': host must be an IPv4 address, 0.0.0.0 or localhost"));
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

}  // namespace adapterd
