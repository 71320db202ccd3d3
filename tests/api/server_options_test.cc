// ServerOptions from the command line, a config file and ADAPTERD_<FLAG>
// environment variables (server/server_options.h).
#include "server/server_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/server.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Sets environment variables for one test and clears them after.
class ScopedEnv {
 public:
  void Set(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
    names_.push_back(name);
  }
  ~ScopedEnv() {
    for (const std::string& n : names_) ::unsetenv(n.c_str());
  }

 private:
  std::vector<std::string> names_;
};

absl::StatusOr<ServerOptions> Parse(std::vector<std::string> args, int* exit_code) {
  args.insert(args.begin(), "adapterd");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseServerFlags(static_cast<int>(argv.size()), argv.data(), exit_code);
}

TEST(ServerOptions, EveryFlagHasItsEnvironmentVariable) {
  EXPECT_EQ(EnvName("listen"), "ADAPTERD_LISTEN");
  EXPECT_EQ(EnvName("metrics_listen"), "ADAPTERD_METRICS_LISTEN");
  EXPECT_EQ(EnvName("backup_interval_seconds"), "ADAPTERD_BACKUP_INTERVAL_SECONDS");
}

TEST(ServerOptions, TheEnvironmentConfiguresAServerWithNoArguments) {
  ScopedEnv env;
  env.Set("ADAPTERD_MODEL_DIR", "/opt/adapterd/models/m");
  env.Set("ADAPTERD_LISTEN", "0.0.0.0:8500");
  env.Set("ADAPTERD_METRICS_LISTEN", "0.0.0.0:9500");
  env.Set("ADAPTERD_DATA_DIR", "/data");
  env.Set("ADAPTERD_THREADS", "3");
  env.Set("ADAPTERD_DTYPE_CALIBRATION", "false");
  env.Set("ADAPTERD_PEERS", "a-0.a:8500,a-1.a:8500");
  env.Set("ADAPTERD_PEER_SECRET_FILE", "/etc/adapterd/peer-secret");
  env.Set("ADAPTERD_PIN", "t1/x,t2/y");
  env.Set("ADAPTERD_BACKUP_DIR", "/backups");
  env.Set("ADAPTERD_MAX_TASKS", "77");
  int code = -1;
  ASSERT_OK_AND_ASSIGN(ServerOptions o, Parse({}, &code));
  EXPECT_EQ(code, 0);
  EXPECT_EQ(o.model.model_dir, "/opt/adapterd/models/m");
  EXPECT_EQ(o.grpc.listen_address, "0.0.0.0:8500");
  EXPECT_EQ(o.process.metrics_address, "0.0.0.0:9500");
  EXPECT_EQ(o.storage.data_dir, "/data");
  EXPECT_EQ(o.model.threads, 3);
  EXPECT_FALSE(o.model.dtype_calibration);
  EXPECT_THAT(o.grpc.peers, ElementsAre("a-0.a:8500", "a-1.a:8500"));
  EXPECT_THAT(o.serving.pinned_tasks, ElementsAre("t1/x", "t2/y"));
  EXPECT_EQ(o.grpc.peer_secret_file, "/etc/adapterd/peer-secret");
  EXPECT_EQ(o.backups.dir, "/backups");
  EXPECT_EQ(o.tenancy.defaults.max_tasks, 77);
}

TEST(ServerOptions, TheCommandLineWinsOverTheConfigFileWhichWinsOverTheEnvironment) {
  ScopedEnv env;
  env.Set("ADAPTERD_MODEL_DIR", "/env/model");
  env.Set("ADAPTERD_LISTEN", "127.0.0.1:1");
  env.Set("ADAPTERD_DATA_DIR", "/env/data");
  adapterd::testing::TempDir dir;
  const std::string config = dir.Write("adapterd.ini", "listen = 127.0.0.1:2\n");
  int code = -1;
  ASSERT_OK_AND_ASSIGN(ServerOptions o, Parse({"--config", config, "--data_dir", "/flag/data"}, &code));
  EXPECT_EQ(o.model.model_dir, "/env/model");
  EXPECT_EQ(o.grpc.listen_address, "127.0.0.1:2");
  EXPECT_EQ(o.storage.data_dir, "/flag/data");
}

TEST(ServerOptions, BadValuesFromTheEnvironmentAreRefusedNamingTheFlag) {
  ScopedEnv env;
  env.Set("ADAPTERD_MODEL_DIR", "/m");
  env.Set("ADAPTERD_PEERS", "no-port");
  int code = 0;
  EXPECT_THAT(Parse({}, &code).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--peers")));
  EXPECT_EQ(code, 2);
  env.Set("ADAPTERD_PEERS", "");
  env.Set("ADAPTERD_BACKUP_INTERVAL_SECONDS", "0");
  EXPECT_THAT(Parse({}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--backup_interval_seconds")));
  env.Set("ADAPTERD_BACKUP_INTERVAL_SECONDS", "60");
  env.Set("ADAPTERD_HEAP_RELEASE_INTERVAL_SECONDS", "-1");
  EXPECT_THAT(Parse({}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--heap_release_interval_seconds")));
  env.Set("ADAPTERD_HEAP_RELEASE_INTERVAL_SECONDS", "0");  // never: allowed
  EXPECT_OK(Parse({}, &code).status());
}

// The backup directory may not be `<data_dir>/db` (or inside the data), and
// a replica answers a shard-local header only with the replicas' secret.
TEST(ServerOptions, BackupsLiveOutsideTheDataDirAndReplicasNeedTheirSharedSecret) {
  int code = 0;
  for (const char* inside : {"/data/db", "/data/backups", "/data", "/data/../data/x", "/"}) {
    EXPECT_THAT(Parse({"--model_dir", "/m", "--data_dir", "/data", "--backup_dir", inside}, &code).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside --data_dir")))
        << inside;
  }
  EXPECT_OK(Parse({"--model_dir", "/m", "--data_dir", "/data", "--backup_dir", "/data-backups"}, &code).status());
  EXPECT_THAT(Parse({"--model_dir", "/m", "--peers", "a:1,b:2"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--peer_secret_file")));
  EXPECT_OK(Parse({"--model_dir", "/m", "--peers", "a:1,b:2", "--peer_secret_file", "/s"}, &code).status());
  EXPECT_THAT(Parse({"--model_dir", "/m", "--max_client_streams", "0"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--max_client_streams")));
}

// A calibration that reports fixed timings (fp32 and bf16 seconds per row)
// and counts its calls.
struct FakeCalibration {
  double fp32 = 0, bf16 = 0;
  int calls = 0;
  DtypeCalibration Get() {
    return [this]() -> absl::StatusOr<model::DtypeTimings> {
      ++calls;
      model::DtypeTimings t;
      t.fp32_seconds_per_row = fp32;
      t.bf16_seconds_per_row = bf16;
      t.rows = 16;
      t.tokens = 64;
      t.layers = 1;
      t.threads = 1;
      t.reps = 3;
      return t;
    };
  }
};

ServingDtype Resolve(const std::string& requested, const std::string& device, const std::string& feature,
                     const DtypeCalibration& calibrate) {
  absl::StatusOr<ServingDtype> d = ResolveServingDtype(requested, device, feature, calibrate);
  EXPECT_OK(d.status());
  return d.value_or(ServingDtype{});
}

TEST(ServerOptions, DtypeAutoServesWhatIsMeasuredFasterOnCpusWithNativeBf16) {
  ::unsetenv("ADAPTERD_DTYPE_CALIBRATION");  // ctest sets it false for the suite (cmake/AdapterdHelpers.cmake)
  int code = -1;
  ASSERT_OK_AND_ASSIGN(ServerOptions o, Parse({"--model_dir", "/m"}, &code));
  EXPECT_EQ(o.model.dtype, "auto");  // the default
  EXPECT_TRUE(o.model.dtype_calibration);
  // bf16 measured 2x fp32 (the AMD EPYC here): bf16, with both timings and
  // the ratio in the reason.
  FakeCalibration fast{.fp32 = 2e-3, .bf16 = 1e-3};
  ServingDtype d = Resolve("auto", "cpu", "avx512_bf16", fast.Get());
  EXPECT_EQ(d.dtype, "bf16");
  EXPECT_THAT(d.reason, HasSubstr("bf16 measured 2.00x fp32 on this CPU (avx512_bf16)"));
  EXPECT_THAT(d.reason, HasSubstr("1.000 ms per row in bf16, 2.000 in fp32 (16 x 64 tokens through 1 layer(s) on 1 "
                                  "thread(s), median of 3"));
  ASSERT_TRUE(d.calibration.has_value());
  EXPECT_EQ(d.calibration->bf16_seconds_per_row, 1e-3);
  EXPECT_EQ(fast.calls, 1);
  // bf16 slower (an AVX512-BF16 Xeon without AMX, 0.61x), or faster within the margin:
  // fp32, though the CPU has the flag.
  FakeCalibration slow{.fp32 = 6.1e-3, .bf16 = 10e-3};
  d = Resolve("auto", "cpu", "avx512_bf16", slow.Get());
  EXPECT_EQ(d.dtype, "fp32");
  EXPECT_THAT(d.reason, HasSubstr("bf16 measured 0.61x fp32"));
  EXPECT_THAT(d.reason, HasSubstr("bf16 serves only from 1.10x"));
  FakeCalibration close{.fp32 = 1.05e-3, .bf16 = 1e-3};
  EXPECT_EQ(Resolve("auto", "cpu", "amx_bf16", close.Get()).dtype, "fp32");
  // A failed calibration fails the start-up rather than guess.
  EXPECT_THAT(ResolveServingDtype("auto", "cpu", "amx_bf16",
                                  [] { return absl::StatusOr<model::DtypeTimings>(absl::InternalError("boom")); }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("boom")));
  // --dtype_calibration=false: the flag alone, as before measuring.
  d = Resolve("auto", "cpu", "avx512_bf16", nullptr);
  EXPECT_EQ(d.dtype, "bf16");
  EXPECT_THAT(d.reason, HasSubstr("not measured"));
  EXPECT_FALSE(d.calibration.has_value());
  ASSERT_OK_AND_ASSIGN(o, Parse({"--model_dir", "/m", "--dtype_calibration=false"}, &code));
  EXPECT_FALSE(o.model.dtype_calibration);
}

TEST(ServerOptions, DtypeAutoMeasuresNothingWithoutNativeBf16OnCudaOrWhenExplicit) {
  int code = -1;
  // Each of these would be bf16 if measured (2x), and none is measured.
  FakeCalibration fast{.fp32 = 2e-3, .bf16 = 1e-3};
  ServingDtype d = Resolve("auto", "cpu", "", fast.Get());
  EXPECT_EQ(d.dtype, "fp32");
  EXPECT_THAT(d.reason, HasSubstr("no native bf16"));
  EXPECT_FALSE(d.calibration.has_value());
  EXPECT_EQ(Resolve("auto", "cuda:1", "", fast.Get()).dtype, "bf16");
  EXPECT_EQ(Resolve("auto", "cuda", "avx512_bf16", fast.Get()).dtype, "bf16");
  EXPECT_EQ(Resolve("fp32", "cuda", "amx_bf16", fast.Get()).dtype, "fp32");  // explicit wins
  EXPECT_EQ(Resolve("fp32", "cpu", "avx512_bf16", fast.Get()).dtype, "fp32");
  FakeCalibration slow{.fp32 = 6.1e-3, .bf16 = 10e-3};
  EXPECT_EQ(Resolve("bf16", "cpu", "avx512_bf16", slow.Get()).dtype, "bf16");  // even where slower
  EXPECT_EQ(Resolve("fp16", "cpu", "", slow.Get()).dtype, "fp16");
  EXPECT_EQ(fast.calls + slow.calls, 0);
  EXPECT_THAT(Parse({"--model_dir", "/m", "--dtype", "int8"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auto, fp32, bf16 or fp16")));
}

TEST(ServerOptions, ResidualStreamAutoIsTheServingDtypeOnCudaAndFp32OnCpus) {
  int code = -1;
  ASSERT_OK_AND_ASSIGN(ServerOptions o, Parse({"--model_dir", "/m"}, &code));
  EXPECT_EQ(o.model.residual_stream, "auto");  // the default
  EXPECT_TRUE(ResolveResidualStream("auto", "cuda", "bf16").reduced);
  EXPECT_TRUE(ResolveResidualStream("auto", "cuda:1", "fp16").reduced);
  EXPECT_FALSE(ResolveResidualStream("auto", "cpu", "bf16").reduced);
  EXPECT_THAT(ResolveResidualStream("auto", "cpu", "bf16").reason, HasSubstr("flips labels"));
  EXPECT_TRUE(ResolveResidualStream("serving", "cpu", "bf16").reduced);  // explicit wins
  EXPECT_FALSE(ResolveResidualStream("fp32", "cuda", "bf16").reduced);
  EXPECT_FALSE(ResolveResidualStream("serving", "cuda", "fp32").reduced);  // fp32 has one stream
  EXPECT_THAT(Parse({"--model_dir", "/m", "--residual_stream", "bf16"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("auto, fp32 or serving")));
}

TEST(ServerOptions, TrainingDtypeIsFp32OrTheServingDtypeButNeverFp16) {
  int code = -1;
  ASSERT_OK_AND_ASSIGN(ServerOptions o, Parse({"--model_dir", "/m"}, &code));
  EXPECT_EQ(o.training.dtype, "fp32");  // the default
  ASSERT_OK_AND_ASSIGN(o, Parse({"--model_dir", "/m", "--dtype", "bf16", "--training_dtype", "serving"}, &code));
  EXPECT_EQ(o.training.dtype, "serving");
  EXPECT_THAT(Parse({"--model_dir", "/m", "--training_dtype", "bf16"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fp32 or serving, not 'bf16'")));
  EXPECT_THAT(Parse({"--model_dir", "/m", "--dtype", "fp16", "--training_dtype", "serving"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fp16 training needs loss scaling")));
  ASSERT_OK(Parse({"--model_dir", "/m", "--dtype", "fp16"}, &code).status());  // fp32 training beside it
}

// Secure by default: both ports bind to loopback until configured otherwise,
// and TLS files come in the documented combinations only.
TEST(ServerOptions, PortsBindToLoopbackByDefaultAndTlsFlagsComeTogether) {
  int code = 0;
  auto o = Parse({"--model_dir", "/m"}, &code);
  ASSERT_OK(o.status());
  EXPECT_TRUE(o->grpc.listen_address.starts_with("127.0.0.1:")) << o->grpc.listen_address;
  EXPECT_TRUE(o->process.metrics_address.starts_with("127.0.0.1:")) << o->process.metrics_address;
  EXPECT_TRUE(o->grpc.tls_cert_file.empty());
  ServerOptions bad = *o;
  bad.grpc.tls_cert_file = "/c.pem";
  EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_key_file")));
  bad = *o;
  bad.grpc.tls_client_ca_file = "/ca.pem";
  EXPECT_THAT(bad.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("need --tls_cert_file")));
  ServerOptions good = *o;
  good.grpc.tls_cert_file = "/c.pem";
  good.grpc.tls_key_file = "/k.pem";
  good.grpc.tls_client_ca_file = "/ca.pem";
  EXPECT_OK(good.Validate());
}

TEST(ServerOptions, HttpIsOffByDefaultAndAReplicaGatewayCallsThroughTheRouter) {
  int code = 0;
  auto o = Parse({"--model_dir", "/m"}, &code);
  ASSERT_OK(o.status());
  EXPECT_EQ(o->http.gateway.listen_address, "");  // off
  EXPECT_EQ(o->http.grpc_target, "");             // this process
  o = Parse({"--model_dir", "/m", "--http_listen", "127.0.0.1:8080", "--http_max_connections", "8"}, &code);
  ASSERT_OK(o.status());
  EXPECT_EQ(o->http.gateway.listen_address, "127.0.0.1:8080");
  EXPECT_EQ(o->http.gateway.max_connections, 8);
  // A replica's gateway must call through the router: it does not own every task.
  EXPECT_THAT(
      Parse({"--model_dir", "/m", "--peers", "a:1,b:2", "--peer_secret_file", "/s", "--http_listen", ":8080"}, &code)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--http_grpc_target")));
  EXPECT_OK(Parse({"--model_dir", "/m", "--peers", "a:1,b:2", "--peer_secret_file", "/s", "--http_listen", ":8080",
                   "--http_grpc_target", "router:8500"},
                  &code)
                .status());
  EXPECT_THAT(Parse({"--model_dir", "/m", "--http_max_connections", "0"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--http_max_connections")));
}

TEST(ServerOptions, AdmissionFlagsReachTheirPartsAndAreAtLeastOne) {
  int code = 0;
  auto o = Parse({"--model_dir", "/m", "--http_max_buffered_bytes", "1", "--http_body_timeout_seconds", "1",
                  "--http_idle_timeout_seconds", "1", "--http_max_connections_per_ip", "0", "--max_windows_per_text",
                  "1", "--max_rows_per_predict", "1"},
                 &code);
  ASSERT_OK(o.status());
  EXPECT_EQ(o->http.gateway.max_buffered_bytes, 1);
  EXPECT_EQ(o->http.body_timeout_seconds, 1);
  EXPECT_EQ(o->serving.max_windows_per_text, 1);
  EXPECT_EQ(o->serving.max_rows_per_predict, 1);
  for (const char* flag : {"--http_max_buffered_bytes", "--http_body_timeout_seconds", "--http_idle_timeout_seconds",
                           "--max_windows_per_text", "--max_rows_per_predict"}) {
    EXPECT_THAT(Parse({"--model_dir", "/m", flag, "0"}, &code).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(flag)))
        << flag;
  }
  EXPECT_THAT(Parse({"--model_dir", "/m", "--http_max_connections_per_ip", "-1"}, &code).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--http_max_connections_per_ip")));
}

TEST(ServerOptions, ModelDirIsStillRequired) {
  int code = 0;
  EXPECT_FALSE(Parse({}, &code).ok());
  EXPECT_NE(code, 0);
}

}  // namespace

// --drain_seconds bounds the whole shutdown: the streams, calls and final
// deadlines come in that order inside it, and the refusals held while gRPC
// stops (2 x hold after the calls are done) fit in the last step.
TEST(ShutdownPlan, TheStepsAndTheHoldFitInTheDrain) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  for (int drain : {0, 1, 3, 10, 600}) {
    const ShutdownPlan plan = PlanShutdown(start, drain);
    EXPECT_EQ(plan.deadline, start + absl::Seconds(drain)) << drain;
    EXPECT_LE(start, plan.streams_deadline) << drain;
    EXPECT_LE(plan.streams_deadline, plan.calls_deadline) << drain;
    EXPECT_LE(plan.calls_deadline, plan.deadline) << drain;
    EXPECT_LE(plan.calls_deadline + 3 * plan.hold, plan.deadline) << drain;
    EXPECT_LE(plan.hold, absl::Milliseconds(100)) << drain;
  }
  EXPECT_EQ(PlanShutdown(start, 0).hold, absl::ZeroDuration());
  EXPECT_EQ(PlanShutdown(start, 10).hold, absl::Milliseconds(100));
  EXPECT_EQ(PlanShutdown(start, 10).calls_deadline, start + absl::Seconds(9));
  EXPECT_EQ(PlanShutdown(start, 2).streams_deadline, start + absl::Seconds(1));
}
}  // namespace adapterd
