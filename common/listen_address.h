// Listen addresses of the HTTP endpoints (/metrics, the REST gateway):
// "host:port" as an IPv4 socket address.
//
// Thread safety: pure function.
#ifndef ADAPTERD_COMMON_LISTEN_ADDRESS_H_
#define ADAPTERD_COMMON_LISTEN_ADDRESS_H_

#include <netinet/in.h>

#include <string_view>

#include "absl/status/statusor.h"

namespace adapterd {

// `address` is "host:port": host an IPv4 address, 0.0.0.0 (or empty: every
// interface) or localhost; port 0..65535 (0 = any free). INVALID_ARGUMENT
// otherwise, starting with "<what> address '<address>'".
absl::StatusOr<sockaddr_in> ParseIpv4ListenAddress(std::string_view address, std::string_view what);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_LISTEN_ADDRESS_H_
