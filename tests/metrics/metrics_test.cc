// The metrics registry, its text format, the /metrics endpoint over real
// HTTP on 127.0.0.1, and adapterd's metric set checked by promtool.
#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/testing/status_matchers.h"
#include "server/metrics/metrics_server.h"
#include "server/metrics/server_metrics.h"
#include "tests/e2e/e2e_util.h"

namespace adapterd::metrics {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(Metrics, CounterOnlyGoesUp) {
  Counter c;
  c.Increment();
  c.Increment(2.5);
  c.Increment(-4);  // ignored
  EXPECT_DOUBLE_EQ(c.Value(), 3.5);
}

TEST(Metrics, GaugeSetsIncrementsAndDecrements) {
  Gauge g;
  g.Set(10);
  g.Increment(2);
  g.Decrement(5);
  EXPECT_DOUBLE_EQ(g.Value(), 7);
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInclusiveUpperBounds) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, 7.0}) h.Observe(v);
  const Histogram::Snapshot s = h.Collect();
  EXPECT_THAT(s.cumulative, ::testing::ElementsAre(2, 4, 5, 6));
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 15.0);
}

TEST(Metrics, SerializesTheExactTextFormat) {
  Registry r;
  auto& requests = r.AddCounter("app_requests_total", "Requests.\nBy code.");
  requests.Add({{"code", "OK"}, {"method", "Get"}}).Increment(3);
  requests.Add({{"code", "NOT_FOUND"}, {"method", "Get"}}).Increment();
  r.AddGauge("app_temperature", "A \\ gauge.").Add({{"room", "a\"b\nc\\d"}}).Set(-1.5);
  auto& latency = r.AddHistogram("app_latency_seconds", "Latency.", {0.1, 1});
  latency.Add({}).Observe(0.05);
  latency.Add({}).Observe(0.5);
  latency.Add({}).Observe(10);
  EXPECT_EQ(r.Serialize(),
            "# HELP app_requests_total Requests.\\nBy code.\n"
            "# TYPE app_requests_total counter\n"
            "app_requests_total{code=\"NOT_FOUND\",method=\"Get\"} 1\n"
            "app_requests_total{code=\"OK\",method=\"Get\"} 3\n"
            "# HELP app_temperature A \\\\ gauge.\n"
            "# TYPE app_temperature gauge\n"
            "app_temperature{room=\"a\\\"b\\nc\\\\d\"} -1.5\n"
            "# HELP app_latency_seconds Latency.\n"
            "# TYPE app_latency_seconds histogram\n"
            "app_latency_seconds_bucket{le=\"0.1\"} 1\n"
            "app_latency_seconds_bucket{le=\"1\"} 2\n"
            "app_latency_seconds_bucket{le=\"+Inf\"} 3\n"
            "app_latency_seconds_sum 10.55\n"
            "app_latency_seconds_count 3\n");
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.1), "0.1");
}

TEST(Metrics, CollectCallbacksRunOnEverySerialize) {
  Registry r;
  auto& g = r.AddGauge("app_depth", "Depth.");
  int calls = 0;
  r.AddCollectCallback([&] { g.Add({}).Set(++calls); });
  EXPECT_THAT(r.Serialize(), HasSubstr("app_depth 1\n"));
  EXPECT_THAT(r.Serialize(), HasSubstr("app_depth 2\n"));
}

TEST(Metrics, ConcurrentIncrementsSumExactly) {
  Registry r;
  auto& family = r.AddCounter("app_events_total", "Events.");
  auto& hist = r.AddHistogram("app_sizes", "Sizes.", {10});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        family.Add({{"kind", "a"}}).Increment();
        hist.Add({}).Observe(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_DOUBLE_EQ(family.Add({{"kind", "a"}}).Value(), 40000);
  EXPECT_EQ(hist.Add({}).Collect().count, 40000u);
}

TEST(MetricsDeathTest, DuplicateOrInvalidNamesAbort) {
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("app_x_total", "x");
        r.AddGauge("app_x_total", "again");
      },
      "registered twice");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("9starts_with_digit", "x");
      },
      "invalid metric name");
  EXPECT_DEATH(
      {
        Registry r;
        r.AddCounter("app_y_total", "y").Add({{"__reserved", "v"}});
      },
      "invalid label name");
}

TEST(MetricsServer, ServesMetricsOverHttpOnLoopback) {
  Registry r;
  r.AddCounter("app_hits_total", "Hits.").Add({}).Increment(5);
  ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0", &r));
  ASSERT_GT(server->port(), 0);
  ASSERT_OK_AND_ASSIGN(e2e::HttpResponse ok, e2e::HttpGet(server->port(), "/metrics", absl::Seconds(30)));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(ok.body, r.Serialize());
  ASSERT_OK_AND_ASSIGN(e2e::HttpResponse missing, e2e::HttpGet(server->port(), "/other", absl::Seconds(30)));
  EXPECT_EQ(missing.status, 404);

  // The port is taken now: a second server fails cleanly.
  EXPECT_THAT(MetricsServer::Start("127.0.0.1:" + std::to_string(server->port()), &r).status(),
              StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(MetricsServer::Start("no-port", &r).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MetricsServer::Start("not-an-ip:80", &r).status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A TCP connection to 127.0.0.1:port that sends nothing; -1 on failure.
int ConnectIdle(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// More idle connections than the old limit (64) held open: a scrape still
// gets through at once.
TEST(MetricsServer, IdleConnectionsDoNotStarveTheScraper) {
  Registry r;
  r.AddCounter("app_hits_total", "Hits.").Add({}).Increment(1);
  ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0", &r));
  constexpr int kIdle = 160;
  static_assert(kIdle < kMetricsMaxConnections);
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = ConnectIdle(server->port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  absl::StatusOr<e2e::HttpResponse> scrape = e2e::HttpGet(server->port(), "/metrics", absl::Seconds(5));
  for (int fd : idle) ::close(fd);
  ASSERT_OK(scrape.status());
  EXPECT_EQ(scrape->status, 200);
  EXPECT_THAT(scrape->body, HasSubstr("app_hits_total 1"));
}

// With more idle connections held than the limit, a scrape does not wait
// for one to time out: a new connection at the limit evicts the connection
// idle longest. The idle
// timeout here is far longer than the scrape's deadline, so the scrape can
// only succeed through eviction.
TEST(MetricsServer, MoreIdleConnectionsThanTheLimitNeverHoldUpAScrape) {
  Registry r;
  r.AddCounter("app_hits_total", "Hits.").Add({}).Increment(1);
  MetricsServer::Options o;
  o.max_connections = 32;
  o.idle_timeout_seconds = 600;
  ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0", &r, o));
  std::vector<int> idle;
  for (int i = 0; i < 3 * o.max_connections; ++i) {
    const int fd = ConnectIdle(server->port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<e2e::HttpResponse> scrape = e2e::HttpGet(server->port(), "/metrics", absl::Seconds(20));
    ASSERT_OK(scrape.status()) << "round " << round;
    EXPECT_EQ(scrape->status, 200);
    EXPECT_THAT(scrape->body, HasSubstr("app_hits_total 1"));
  }
  // The oldest idle connections were the ones closed.
  pollfd p{idle.front(), POLLIN, 0};
  char byte = 0;
  EXPECT_EQ(::poll(&p, 1, 10000), 1);
  EXPECT_EQ(::recv(idle.front(), &byte, 1, 0), 0) << "the oldest idle connection is still open";
  for (int fd : idle) ::close(fd);
}

// An idle connection is closed by the server after the idle budget, so idle
// clients release their slots by themselves.
TEST(MetricsServer, ClosesIdleConnections) {
  Registry r;
  ASSERT_OK_AND_ASSIGN(auto server, MetricsServer::Start("127.0.0.1:0", &r));
  const int fd = ConnectIdle(server->port());
  ASSERT_GE(fd, 0) << std::strerror(errno);
  // Wait for end of file, bounded well past the budget (the old budget of
  // 30 s would fail this).
  pollfd p{fd, POLLIN, 0};
  const int ready = ::poll(&p, 1, (kMetricsIdleTimeoutSeconds + 7) * 1000);
  char byte = 0;
  const ssize_t got = ready == 1 ? ::recv(fd, &byte, 1, 0) : -2;
  ::close(fd);
  EXPECT_EQ(ready, 1) << "the server kept an idle connection open";
  EXPECT_EQ(got, 0) << "expected end of file";
}

// Every adapterd metric, with a child of every family, passes promtool.
TEST(ServerMetrics, EveryMetricPassesPromtoolAndAvoidsUnboundedLabels) {
  Registry r;
  ServerMetrics m(r);
  m.requests_total.Add({{"method", "Predict"}, {"code", "OK"}, {"tenant", "default"}}).Increment();
  m.request_duration_seconds.Add({{"method", "Predict"}, {"tenant", "default"}}).Observe(0.01);
  m.training_queue_depth.Add({{"tenant", "default"}}).Set(2);
  m.backups_total.Add({{"result", "ok"}}).Increment();
  m.process_cpu_seconds_total.Add({}).Increment(0.5);
  m.process_resident_memory_bytes.Add({}).Set(1 << 20);
  m.predict_texts_total.Add({{"tenant", "default"}}).Increment(3);
  m.batch_size.Add({}).Observe(8);
  m.adapter_cache_budget_bytes.Add({{"tier", "host"}}).Set(1 << 20);
  m.adapter_load_seconds.Add({{"tier", "device"}}).Observe(0.002);
  m.training_jobs.Add({{"state", "RUNNING"}}).Set(1);
  m.device_memory_bytes.Add({{"device", "cpu"}, {"kind", "encoder"}}).Set(1e6);
  m.model_info
      .Add({{"fingerprint", "sha256:ab"}, {"device", "cpu"}, {"dtype", "fp32"}, {"layers", "2"}, {"hidden", "128"}})
      .Set(1);
  m.dtype_calibration_seconds.Add({{"dtype", "bf16"}}).Set(0.0004);
  const std::string text = r.Serialize();
  EXPECT_THAT(text, HasSubstr("adapterd_build_info{version=\""));
  EXPECT_THAT(text, HasSubstr("adapterd_training_steps_total 0\n"));
  EXPECT_THAT(text, HasSubstr("adapterd_backups_total{result=\"error\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("adapterd_serving 0\n"));
  ASSERT_OK_AND_ASSIGN(e2e::CommandResult lint,
                       e2e::RunCommand({"/usr/bin/promtool", "check", "metrics"}, absl::Minutes(1), text));
  EXPECT_EQ(lint.exit_code, 0) << "promtool (scripts/install-deps.sh installs the prometheus package):\n"
                               << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "");
  for (const FamilyBase* f : r.families()) {
    // adapterd's own, or the process metrics every Prometheus client exports
    // under these names.
    EXPECT_TRUE(f->name().rfind("adapterd_", 0) == 0 || f->name().rfind("process_", 0) == 0) << f->name();
    for (const std::string& label : f->LabelNames()) {
      EXPECT_THAT(label, ::testing::Not(::testing::AnyOf("task", "task_id", "job", "job_id", "request_id")))
          << f->name();
    }
  }
}

}  // namespace
}  // namespace adapterd::metrics
