// HttpGateway's own machinery, in-process and under concurrency (this test
// runs under ThreadSanitizer too): a real gRPC server holding a scripted
// adapterd.v1.Adapterd service, the gateway on a free loopback port over its
// in-process channel, and real HTTP connections. Concurrent calls each get
// their own answer; event streams run to their end, end when the client
// leaves (the gRPC watch is cancelled) and end UNAVAILABLE when the gateway
// stops; an upload whose client disconnects mid-body cancels its gRPC stream;
// requests the gateway refuses before their gRPC call are reported once each.
// What the real service does with the calls is http_api_test's.
#include "server/http/http_gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/dataset_file.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace adapterd::http {
namespace {

using ::adapterd::testing::HttpRequest;
using ::adapterd::testing::HttpResponse;
using ::testing::HasSubstr;
using ::testing::Not;

// Predict answers one prediction per text, labelled with the text; a watch
// sends `kWatchMessages` messages 20 ms apart, then ends (or notices the
// cancellation); an upload counts the examples it received.
class ScriptedService final : public v1::Adapterd::Service {
 public:
  static constexpr int kWatchMessages = 5;

  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override {
    for (const std::string& text : request->texts()) response->add_predictions()->set_label(text);
    // The gateway's metadata reaches the call.
    const auto& md = ctx->client_metadata();
    const auto task = md.find("x-task-id");
    response->set_version(
        task != md.end() && std::string(task->second.data(), task->second.size()) == request->task_id() ? 1 : 0);
    return grpc::Status::OK;
  }

  grpc::Status WatchTrainingJob(grpc::ServerContext* ctx, const v1::WatchTrainingJobRequest* request,
                                grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) override {
    if (request->job_id() == "flood") return Flood(ctx, writer);
    const int64_t endless = request->job_id() == "endless" ? 1000000 : kWatchMessages;
    for (int64_t i = request->after_seq(); i < endless; ++i) {
      if (ctx->IsCancelled()) {
        watches_cancelled.fetch_add(1);
        return grpc::Status::CANCELLED;
      }
      v1::WatchTrainingJobResponse m;
      m.mutable_job()->set_job_id(request->job_id());
      m.add_events()->set_seq(i + 1);
      if (!writer->Write(m)) {
        watches_cancelled.fetch_add(1);
        return grpc::Status::CANCELLED;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return grpc::Status::OK;
  }

  // 100,000 events of 10 kB, as fast as the reader takes them.
  grpc::Status Flood(grpc::ServerContext* ctx, grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) {
    v1::WatchTrainingJobResponse m;
    m.mutable_job()->set_error_message(std::string(10000, 'x'));
    for (int64_t i = 0; i < 100000 && !ctx->IsCancelled(); ++i) {
      m.clear_events();
      m.add_events()->set_seq(i + 1);
      if (!writer->Write(m)) return grpc::Status::CANCELLED;
      flood_written.fetch_add(1);
    }
    return grpc::Status::OK;
  }

  grpc::Status UploadDataset(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                             v1::Dataset* response) override {
    // The gateway sends the body as a file's bytes: read here with the
    // server's reader, as api::DatasetUpload does.
    v1::UploadDatasetRequest m;
    if (!reader->Read(&m) || m.metadata().file_format() == v1::DATASET_FORMAT_UNSPECIFIED) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "the gateway sends a file"};
    }
    DatasetFileReader file(FromApiFormat(m.metadata().file_format()), m.metadata().file_name(), 1 << 20, 1 << 20);
    int64_t examples = 0;
    absl::Status read;
    while (reader->Read(&m)) {
      absl::StatusOr<std::vector<v1::Example>> got = file.Feed(m.file_bytes());
      if (got.ok()) examples += static_cast<int64_t>(got->size());
      if (read.ok()) read = got.status();
    }
    if (ctx->IsCancelled()) {
      uploads_cancelled.fetch_add(1);
      return grpc::Status::CANCELLED;
    }
    absl::StatusOr<std::vector<v1::Example>> rest = file.Finish();
    if (read.ok()) read = rest.status();
    if (!read.ok()) return {grpc::StatusCode::INVALID_ARGUMENT, std::string(read.message())};
    uploads_committed.fetch_add(1);
    response->set_num_examples(examples + static_cast<int64_t>(rest->size()));
    return grpc::Status::OK;
  }

  std::atomic<int> watches_cancelled{0};
  std::atomic<int64_t> flood_written{0};
  std::atomic<int> uploads_cancelled{0};
  std::atomic<int> uploads_committed{0};
};

class HttpGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    HttpGatewayOptions options;
    options.listen_address = "127.0.0.1:0";
    options.keepalive = absl::Milliseconds(100);
    HttpGateway::Hooks hooks;
    hooks.on_refusal = [this](const char* rpc, absl::StatusCode code, absl::Duration elapsed) {
      EXPECT_GE(elapsed, absl::ZeroDuration());
      absl::MutexLock lock(&mu_);
      refusals_.push_back(absl::StrCat(rpc, " ", absl::StatusCodeToString(code)));
    };
    auto gateway = HttpGateway::Start(options, server_->InProcessChannel(grpc::ChannelArguments()), std::move(hooks));
    ASSERT_OK(gateway.status());
    gateway_ = *std::move(gateway);
  }
  void TearDown() override {
    if (gateway_) gateway_->Stop();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // An open connection that sent `request`; -1 on failure.
  int Send(const std::string& request) { return Send(gateway_->port(), request); }
  // The same, to the gateway on `port`.
  static int Send(int port, const std::string& request) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Reads from `fd` until `what` has arrived or 10 s pass.
  static std::string ReadUntil(int fd, const std::string& what) {
    std::string got;
    const absl::Time end = absl::Now() + absl::Seconds(10);
    char buf[4096];
    while (got.find(what) == std::string::npos && absl::Now() < end) {
      timeval tv{0, 100000};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0) break;
      if (n > 0) got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }

  std::vector<std::string> Refusals() {
    absl::MutexLock lock(&mu_);
    return refusals_;
  }

  ScriptedService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HttpGateway> gateway_;
  absl::Mutex mu_;
  std::vector<std::string> refusals_ ABSL_GUARDED_BY(mu_);  // "rpc CODE", as Hooks::on_refusal reported them
};

// gRPC's own refusal of a message over the size limit is a size, not a
// rate limit: 413 naming the limit, never 429 (which clients retry).
TEST_F(HttpGatewayTest, AResponseOverTheMessageLimitIs413NotARateLimit) {
  grpc::ChannelArguments small;
  small.SetMaxReceiveMessageSize(200);
  HttpGatewayOptions options;
  options.listen_address = "127.0.0.1:0";
  options.max_body_bytes = 200;
  ASSERT_OK_AND_ASSIGN(auto gateway, HttpGateway::Start(options, server_->InProcessChannel(small), {}));
  auto predict = [&](int texts) {
    nlohmann::json body = {{"texts", nlohmann::json::array()}};
    for (int i = 0; i < texts; ++i) body["texts"].push_back(absl::StrCat("t", i));
    return HttpRequest(gateway->port(), "POST", "/v1/tasks/t:predict", body.dump(),
                       {{"Content-Type", "application/json"}}, absl::Seconds(30));
  };
  ASSERT_OK_AND_ASSIGN(HttpResponse fits, predict(2));
  EXPECT_EQ(fits.status, 200) << fits.body;
  ASSERT_OK_AND_ASSIGN(HttpResponse over, predict(30));  // a 150-byte body, a larger answer
  EXPECT_EQ(over.status, 413) << over.body;
  const nlohmann::json status = nlohmann::json::parse(over.body, nullptr, false);
  EXPECT_EQ(status["code"], 8);
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("--max_message_bytes (200 bytes)"));
  gateway->Stop();
}

// --http_max_connections_per_ip: with N open from one address, the N-th was
// served and the N+1-th is closed unanswered; once one closes, a new one is
// served again.
TEST_F(HttpGatewayTest, ConnectionsPastThePerAddressLimitAreClosedUntilOneEnds) {
  constexpr int kPerIp = 3;
  HttpGatewayOptions options;
  options.listen_address = "127.0.0.1:0";
  options.max_connections_per_ip = kPerIp;
  ASSERT_OK_AND_ASSIGN(auto gateway,
                       HttpGateway::Start(options, server_->InProcessChannel(grpc::ChannelArguments()), {}));
  // -1 when the gateway closed the connection before the request was sent.
  const auto connect = [&](const std::string& request) { return Send(gateway->port(), request); };
  const std::string whole = "GET /v1/nosuch HTTP/1.1\r\nHost: x\r\n\r\n";
  // N-1 connections holding half a request each, then the N-th, served.
  std::vector<int> held;
  for (int i = 0; i < kPerIp - 1; ++i) held.push_back(connect("GET /v1/nosuch HTTP/1.1\r\n"));
  const int nth = connect(whole);
  ASSERT_GE(nth, 0);
  EXPECT_THAT(ReadUntil(nth, "HTTP/1.1 404"), HasSubstr("HTTP/1.1 404"));
  held.push_back(nth);  // kept open (keep-alive)
  // The N+1-th: closed without an answer.
  const int over = connect(whole);
  if (over >= 0) {
    EXPECT_THAT(ReadUntil(over, "HTTP/1.1"), Not(HasSubstr("HTTP/1.1")));
    ::close(over);
  }
  // One ends: a new connection is served again (the gateway notices the
  // close on its own time, so a few attempts, bounded).
  ::close(held.front());
  held.erase(held.begin());
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    const int again = connect(whole);
    served = again >= 0 && ReadUntil(again, "HTTP/1.1 404").find("HTTP/1.1 404") != std::string::npos;
    if (again >= 0) ::close(again);
    if (!served) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(served);
  for (int fd : held) ::close(fd);
  gateway->Stop();
}

TEST_F(HttpGatewayTest, ConcurrentCallsEachGetTheirOwnAnswer) {
  constexpr int kThreads = 6;
  constexpr int kCalls = 15;
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string text = absl::StrCat("text-", t, "-", i);
        auto r = HttpRequest(gateway_->port(), "POST", absl::StrCat("/v1/tasks/task-", t, ":predict"),
                             nlohmann::json({{"texts", {text}}}).dump(), {{"Content-Type", "application/json"}},
                             absl::Seconds(30));
        if (!r.ok() || r->status != 200) continue;
        const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
        if (j["predictions"][0]["label"] == text && j["version"] == "1") right.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), kThreads * kCalls);
}

TEST_F(HttpGatewayTest, EventStreamsRunToTheirEndConcurrently) {
  constexpr int kStreams = 4;
  std::vector<std::string> bodies(kStreams);
  std::vector<std::thread> threads;
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {
      auto r = HttpRequest(gateway_->port(), "GET", absl::StrCat("/v1/trainingJobs/job-", s, ":watch"), "", {},
                           absl::Seconds(30));
      if (r.ok() && r->status == 200) bodies[s] = r->body;
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kStreams; ++s) {
    std::vector<int64_t> ids;
    size_t at = 0;
    while ((at = bodies[s].find("\nid: ", at)) != std::string::npos) {
      at += 5;
      ids.push_back(std::stoll(bodies[s].substr(at, bodies[s].find('\n', at) - at)));
    }
    EXPECT_EQ(ids, (std::vector<int64_t>{1, 2, 3, 4, 5})) << bodies[s];
    EXPECT_THAT(bodies[s], HasSubstr("event: end\ndata: {\"code\":0,")) << bodies[s];
    EXPECT_THAT(bodies[s], HasSubstr(absl::StrCat("\"jobId\":\"job-", s, "\"")));
  }
  // Resuming after seq 3 sends only what follows.
  auto r = HttpRequest(gateway_->port(), "GET", "/v1/trainingJobs/job-0:watch", "", {{"Last-Event-ID", "3"}},
                       absl::Seconds(30));
  ASSERT_OK(r.status());
  EXPECT_THAT(r->body, Not(HasSubstr("id: 3\n")));
  EXPECT_THAT(r->body, HasSubstr("id: 4\n"));
}

TEST_F(HttpGatewayTest, AClientThatLeavesAWatchCancelsIt) {
  const int fd = Send("GET /v1/trainingJobs/endless:watch HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_GE(fd, 0);
  EXPECT_THAT(ReadUntil(fd, "id: 2\n"), HasSubstr("id: 2\n"));
  ::close(fd);
  // The gateway notices at its next write (an event or a keep-alive) and
  // cancels the gRPC watch.
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (service_.watches_cancelled.load() == 0 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(service_.watches_cancelled.load(), 1);
}

// An event stream whose client stops reading: the gateway queues at most
// 1 MiB for it and stops reading the watch, so the server's writes stall
// (gRPC flow control) instead of the gateway's memory growing with the
// backlog. 1 MiB of queue, the gRPC window and the sockets'
// buffers hold a few hundred of these 10 kB events, not thousands.
TEST_F(HttpGatewayTest, AStreamWhoseClientStopsReadingHoldsBackTheWatch) {
  const int fd = Send("GET /v1/trainingJobs/flood:watch HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_GE(fd, 0);
  int64_t written = -1;
  for (int i = 0; i < 50 && written != service_.flood_written.load(); ++i) {  // until the writes stall
    written = service_.flood_written.load();
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_LT(service_.flood_written.load(), 3000) << "events the watch wrote";
  ::close(fd);
}

TEST_F(HttpGatewayTest, StoppingEndsOpenStreamsUnavailable) {
  const int fd = Send("GET /v1/trainingJobs/endless:watch HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_GE(fd, 0);
  ASSERT_THAT(ReadUntil(fd, "id: 1\n"), HasSubstr("id: 1\n"));
  std::string rest;
  std::thread reader([&] { rest = ReadUntil(fd, "event: end"); });
  const absl::Time start = absl::Now();
  gateway_->Stop();
  reader.join();
  ::close(fd);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_TRUE(rest.find("event: end\ndata: {\"code\":14,") != std::string::npos)
      << rest.size() << " bytes after the first event, without an UNAVAILABLE end: "
      << rest.substr(rest.size() > 300 ? rest.size() - 300 : 0);
}

TEST_F(HttpGatewayTest, AnUploadWhoseClientDisconnectsIsCancelled) {
  std::string body = "text,label\n";
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&body, "an example ", i, ",x\n");
  const int fd = Send(absl::StrCat("POST /v1/datasets HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n",
                                   "Content-Length: ", body.size(), "\r\n\r\n", body.substr(0, body.size() / 2)));
  ASSERT_GE(fd, 0);
  absl::SleepFor(absl::Milliseconds(200));
  ::close(fd);
  const absl::Time end = absl::Now() + absl::Seconds(20);
  while (service_.uploads_cancelled.load() == 0 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(service_.uploads_cancelled.load(), 1);
  EXPECT_EQ(service_.uploads_committed.load(), 0);
  // The whole body commits, with every example.
  auto r =
      HttpRequest(gateway_->port(), "POST", "/v1/datasets", body, {{"Content-Type", "text/csv"}}, absl::Seconds(30));
  ASSERT_OK(r.status());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(r->body, HasSubstr("\"numExamples\":\"2000\""));
  EXPECT_EQ(service_.uploads_committed.load(), 1);
}

TEST_F(HttpGatewayTest, RequestsRefusedBeforeTheirGrpcCallAreReportedOnceEach) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 5;
  std::atomic<int> right{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto bad = HttpRequest(gateway_->port(), "POST", "/v1/tasks/t:predict", "{bad json",
                               {{"Content-Type", "application/json"}}, absl::Seconds(30));
        auto lost = HttpRequest(gateway_->port(), "GET", "/v1/nosuch", "", {}, absl::Seconds(30));
        if (bad.ok() && bad->status == 400 && lost.ok() && lost->status == 404) right.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), kThreads * kCalls);
  // Not refusals: an answer from the gRPC service (OK, or UNIMPLEMENTED from
  // the scripted service), the console, /healthz, and an upload refused
  // mid-body after its gRPC stream opened (the service sees it cancelled).
  auto ok = HttpRequest(gateway_->port(), "POST", "/v1/tasks/t:predict", R"({"texts": ["a"]})",
                        {{"Content-Type", "application/json"}}, absl::Seconds(30));
  ASSERT_OK(ok.status());
  EXPECT_EQ(ok->status, 200);
  auto unimplemented = HttpRequest(gateway_->port(), "GET", "/v1/tasks/t", "", {}, absl::Seconds(30));
  ASSERT_OK(unimplemented.status());
  EXPECT_EQ(unimplemented->status, 501);
  for (const char* path : {"/", "/healthz"}) {
    auto r = HttpRequest(gateway_->port(), "GET", path, "", {}, absl::Seconds(30));
    ASSERT_OK(r.status());
    EXPECT_EQ(r->status, 200) << path;
  }
  auto broken = HttpRequest(gateway_->port(), "POST", "/v1/datasets", "text,label\na,x\nb\n",
                            {{"Content-Type", "text/csv"}}, absl::Seconds(30));
  ASSERT_OK(broken.status());
  EXPECT_EQ(broken->status, 400) << broken->body;
  const std::vector<std::string> refusals = Refusals();
  EXPECT_EQ(std::count(refusals.begin(), refusals.end(), "Predict INVALID_ARGUMENT"), kThreads * kCalls);
  EXPECT_EQ(std::count(refusals.begin(), refusals.end(), "none NOT_FOUND"), kThreads * kCalls);
  EXPECT_EQ(refusals.size(), 2u * kThreads * kCalls);
}

}  // namespace
}  // namespace adapterd::http
