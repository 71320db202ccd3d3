#include "server/metrics/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace adapterd::metrics {

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  return HttpRequest(port, "GET", path, "", {}, timeout);
}

absl::StatusOr<HttpResponse> HttpRequest(int port, const std::string& method, const std::string& path,
                                         const std::string& body, const HttpHeaders& headers, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ", std::strerror(errno)));
  }
  std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\nConnection: close\r\n");
  for (const auto& [name, value] : headers) absl::StrAppend(&request, name, ": ", value, "\r\n");
  if (!body.empty() || method != "GET") absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  absl::StrAppend(&request, "\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError("send failed");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[65536];
  while (true) {
    const int64_t left_ms = absl::ToInt64Milliseconds(end - absl::Now());
    if (left_ms <= 0) return absl::DeadlineExceededError(absl::StrCat(method, " ", path, " timed out"));
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left_ms));
    if (ready < 0) return absl::InternalError("poll failed");
    if (ready == 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) return absl::UnavailableError("recv failed");
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) return absl::DataLossError("malformed HTTP response");
  HttpResponse response;
  const std::vector<std::string> lines = absl::StrSplit(raw.substr(0, header_end), "\r\n");
  const std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("malformed status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) continue;
    if (absl::EqualsIgnoreCase(lines[i].substr(0, colon), "content-type")) {
      response.content_type = std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    }
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

std::optional<double> SampleValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double v = 0;
    // A sample may carry a timestamp after its value.
    if (absl::SimpleAtod(line.substr(0, line.find(' ')), &v)) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace adapterd::metrics
