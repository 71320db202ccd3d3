// The tests' loopback HTTP client (common/testing/http_client.h): SampleValue
// on expositions, and requests against sockets this test holds on 127.0.0.1:
// one bound but not listening (nothing listens), one listening but never
// answering, and a one-shot server that records the request and sends a
// canned answer (whole, garbled or cut short).
#include "common/testing/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace adapterd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;

TEST(SampleValue, ReadsASeriesByItsNameAndLabelsExactly) {
  const std::string exposition =
      "# HELP adapterd_serving Whether the server serves.\n"
      "# TYPE adapterd_serving gauge\n"
      "adapterd_serving 1\n"
      "adapterd_serving_since_seconds 12.5\n"
      "adapterd_process_heap_bytes{state=\"in_use\"} 4096\n"
      "adapterd_process_heap_bytes{state=\"free\"} 1.5e3 1700000000000\n"
      "adapterd_broken NaNx\n";
  EXPECT_THAT(SampleValue(exposition, "adapterd_serving"), Optional(1.0));
  EXPECT_THAT(SampleValue(exposition, "adapterd_serving_since_seconds"), Optional(12.5));
  EXPECT_THAT(SampleValue(exposition, "adapterd_process_heap_bytes{state=\"in_use\"}"), Optional(4096.0));
  // A timestamp after the value is not part of it.
  EXPECT_THAT(SampleValue(exposition, "adapterd_process_heap_bytes{state=\"free\"}"), Optional(1500.0));
  EXPECT_EQ(SampleValue(exposition, "adapterd_process_heap_bytes"), std::nullopt);  // labels are part of the name
  EXPECT_EQ(SampleValue(exposition, "adapterd_missing"), std::nullopt);
  EXPECT_EQ(SampleValue(exposition, "adapterd_broken"), std::nullopt);
  EXPECT_EQ(SampleValue("", "adapterd_serving"), std::nullopt);
}

// A TCP socket bound to 127.0.0.1 on a port the kernel picks.
class LoopbackSocket {
 public:
  LoopbackSocket() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~LoopbackSocket() { ::close(fd_); }
  LoopbackSocket(const LoopbackSocket&) = delete;
  LoopbackSocket& operator=(const LoopbackSocket&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }
  void Listen() const { EXPECT_EQ(::listen(fd_, 4), 0); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(HttpGet, NothingListeningIsUnavailable) {
  // Bound, so that no one else takes the port, but not listening: a
  // connection is refused.
  LoopbackSocket socket;
  EXPECT_THAT(HttpGet(socket.port(), "/metrics", absl::Seconds(10)), StatusIs(absl::StatusCode::kUnavailable));
}

TEST(HttpGet, AServerThatNeverAnswersIsDeadlineExceeded) {
  LoopbackSocket socket;
  socket.Listen();  // the kernel completes the connection; no one reads it
  EXPECT_THAT(HttpGet(socket.port(), "/metrics", absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(HttpGet, BadArgumentsAreInvalid) {
  EXPECT_THAT(HttpGet(0, "/metrics", absl::Seconds(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HttpGet(70000, "/metrics", absl::Seconds(1)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(HttpGet(8080, "metrics", absl::Seconds(1)), StatusIs(absl::StatusCode::kInvalidArgument));
}

// Accepts one connection, reads one request (its headers and Content-Length
// bytes of body) into request(), sends `answer` and closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string answer) : answer_(std::move(answer)) {
    socket_.Listen();
    thread_ = std::thread([this] { Serve(); });
  }
  ~OneShotServer() { Join(); }
  OneShotServer(const OneShotServer&) = delete;
  OneShotServer& operator=(const OneShotServer&) = delete;

  int port() const { return socket_.port(); }
  // The request received, once the server is done (after the client's call
  // returned).
  const std::string& Request() {
    Join();
    return request_;
  }

 private:
  void Join() {
    // Wakes an accept() still waiting (a client that never connected): it
    // fails, and the thread ends.
    ::shutdown(socket_.fd(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }

  void Serve() {
    const int fd = ::accept4(socket_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    size_t want = std::string::npos;
    while (want == std::string::npos || request_.size() < want) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request_.append(buf, static_cast<size_t>(n));
      const size_t header_end = request_.find("\r\n\r\n");
      if (want != std::string::npos || header_end == std::string::npos) continue;
      size_t length = 0;
      const size_t at = request_.find("Content-Length: ");
      if (at != std::string::npos && at < header_end) {
        const size_t value = at + 16;
        (void)absl::SimpleAtoi(request_.substr(value, request_.find("\r\n", value) - value), &length);
      }
      want = header_end + 4 + length;
    }
    for (size_t sent = 0; sent < answer_.size();) {
      const ssize_t n = ::send(fd, answer_.data() + sent, answer_.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    ::close(fd);
  }

  LoopbackSocket socket_;
  std::string answer_;
  std::string request_;
  std::thread thread_;
};

TEST(HttpRequest, SendsTheMethodHeadersAndBodyAndReturnsStatusContentTypeAndBody) {
  OneShotServer server(
      "HTTP/1.1 201 Created\r\nContent-Type:  application/json \r\nContent-Length: 11\r\n\r\n"
      "{\"ok\":true}");
  ASSERT_OK_AND_ASSIGN(
      HttpResponse response,
      HttpRequest(server.port(), "PUT", "/v1/things/a%20b/../c?x=1", "hello",
                  {{"Content-Type", "text/plain"}, {"Last-Event-ID", "3"}, {"X-Empty", ""}}, absl::Seconds(30)));
  EXPECT_EQ(response.status, 201);
  EXPECT_EQ(response.content_type, "application/json");
  EXPECT_EQ(response.body, "{\"ok\":true}");
  const std::string request = server.Request();
  // The path as given (no dot segments removed), to 127.0.0.1 itself.
  EXPECT_TRUE(absl::StartsWith(request, "PUT /v1/things/a%20b/../c?x=1 HTTP/1.0\r\n")) << request;
  EXPECT_THAT(request, HasSubstr(absl::StrCat("\r\nHost: 127.0.0.1:", server.port(), "\r\n")));
  EXPECT_THAT(request, HasSubstr("\r\nContent-Type: text/plain\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nLast-Event-ID: 3\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nX-Empty:\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nContent-Length: 5\r\n"));
  EXPECT_TRUE(absl::EndsWith(request, "\r\n\r\nhello")) << request;
  // No header the caller did not ask for.
  EXPECT_THAT(request, Not(HasSubstr("Accept:")));
  EXPECT_THAT(request, Not(HasSubstr("Expect:")));
}

TEST(HttpRequest, AGetHasNoBodyAndAnyOtherMethodAContentLength) {
  {
    OneShotServer server("HTTP/1.0 200 OK\r\n\r\nbody until the close");
    ASSERT_OK_AND_ASSIGN(HttpResponse response, HttpGet(server.port(), "/metrics", absl::Seconds(30)));
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(response.content_type, "");
    EXPECT_EQ(response.body, "body until the close");
    const std::string request = server.Request();
    EXPECT_TRUE(absl::StartsWith(request, "GET /metrics HTTP/1.0\r\n")) << request;
    EXPECT_THAT(request, Not(HasSubstr("Content-Length")));
    EXPECT_THAT(request, Not(HasSubstr("Content-Type")));
  }
  {
    OneShotServer server("HTTP/1.0 204 No Content\r\n\r\n");
    ASSERT_OK_AND_ASSIGN(HttpResponse response,
                         HttpRequest(server.port(), "DELETE", "/v1/tasks/t", "", {}, absl::Seconds(30)));
    EXPECT_EQ(response.status, 204);
    const std::string request = server.Request();
    EXPECT_TRUE(absl::StartsWith(request, "DELETE /v1/tasks/t HTTP/1.0\r\n")) << request;
    EXPECT_THAT(request, HasSubstr("\r\nContent-Length: 0\r\n"));
    EXPECT_THAT(request, Not(HasSubstr("Content-Type")));
  }
}

TEST(HttpRequest, AProxyInTheEnvironmentIsIgnored) {
  // A proxy nothing listens on: a request through it would fail.
  LoopbackSocket dead;
  const std::string proxy = absl::StrCat("http://127.0.0.1:", dead.port());
  ASSERT_EQ(::setenv("http_proxy", proxy.c_str(), 1), 0);
  ASSERT_EQ(::setenv("HTTP_PROXY", proxy.c_str(), 1), 0);
  ASSERT_EQ(::setenv("no_proxy", "", 1), 0);
  OneShotServer server("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
  absl::StatusOr<HttpResponse> response = HttpGet(server.port(), "/", absl::Seconds(30));
  ::unsetenv("http_proxy");
  ::unsetenv("HTTP_PROXY");
  ::unsetenv("no_proxy");
  ASSERT_OK(response.status());
  EXPECT_EQ(response->body, "ok");
}

TEST(HttpRequest, AMalformedOrTruncatedResponseIsDataLoss) {
  {
    OneShotServer server("not HTTP at all\r\n\r\n");
    EXPECT_THAT(HttpGet(server.port(), "/", absl::Seconds(30)), StatusIs(absl::StatusCode::kDataLoss));
  }
  {
    OneShotServer server("");  // closed without a word
    EXPECT_THAT(HttpGet(server.port(), "/", absl::Seconds(30)), StatusIs(absl::StatusCode::kDataLoss));
  }
  {
    OneShotServer server("HTTP/1.0 200 OK\r\nContent-Length: 10\r\n\r\nabc");
    EXPECT_THAT(HttpGet(server.port(), "/", absl::Seconds(30)), StatusIs(absl::StatusCode::kDataLoss));
  }
}

}  // namespace
}  // namespace adapterd::testing
