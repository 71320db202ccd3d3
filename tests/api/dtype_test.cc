// --dtype auto as a server runs it: on a CPU with native bf16 it
// times fp32 against bf16 on the loaded encoder, exports both timings on
// /metrics (adapterd_dtype_calibration_seconds) and serves the dtype the rule
// picks from them (adapterd_model_info's dtype); nothing is measured where
// the flag rule decides. Nothing here asserts on how long anything takes.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/cpu_features.h"
#include "common/testing/http_client.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/dtype_calibration.h"
#include "tests/api/api_test_util.h"

namespace adapterd::testing {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kFp32Series[] = "adapterd_dtype_calibration_seconds{dtype=\"fp32\"}";
constexpr char kBf16Series[] = "adapterd_dtype_calibration_seconds{dtype=\"bf16\"}";

class DtypeTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK(WriteFixtureModel(dir_.Sub("model"))); }

  // Starts a server with `edit` applied to the test options and returns its
  // /metrics text.
  std::string Scrape(const std::function<void(ServerOptions&)>& edit) {
    ServerOptions o = TestServerOptions(dir_.Sub("data"), dir_.Sub("model"));
    edit(o);
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
    EXPECT_OK(server.status());
    if (!server.ok()) return "";
    absl::StatusOr<HttpResponse> m = HttpGet((*server)->metrics_port(), "/metrics", absl::Seconds(30));
    EXPECT_OK(m.status());
    return m.ok() ? m->body : "";
  }

  // The dtype label of the adapterd_model_info series.
  static std::string ServedDtype(const std::string& metrics) {
    for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
      if (!absl::StartsWith(line, "adapterd_model_info{")) continue;
      const size_t at = line.find("dtype=\"");
      if (at == absl::string_view::npos) return "";
      const absl::string_view rest = line.substr(at + 7);
      return std::string(rest.substr(0, rest.find('"')));
    }
    return "";
  }

  TempDir dir_;
};

TEST_F(DtypeTest, AutoServesTheDtypeItsExportedCalibrationFavours) {
  const std::string metrics = Scrape([](ServerOptions& o) { o.model.dtype_calibration = true; });
  const std::optional<double> fp32 = SampleValue(metrics, kFp32Series);
  const std::optional<double> bf16 = SampleValue(metrics, kBf16Series);
  if (CurrentFastBf16Feature().empty()) {
    // No native bf16: fp32 unmeasured.
    EXPECT_FALSE(fp32.has_value());
    EXPECT_FALSE(bf16.has_value());
    EXPECT_EQ(ServedDtype(metrics), "fp32");
    return;
  }
  ASSERT_TRUE(fp32.has_value()) << metrics;
  ASSERT_TRUE(bf16.has_value()) << metrics;
  EXPECT_GT(*fp32, 0);
  EXPECT_GT(*bf16, 0);
  model::DtypeTimings t;
  t.fp32_seconds_per_row = *fp32;
  t.bf16_seconds_per_row = *bf16;
  EXPECT_EQ(ServedDtype(metrics), model::ChooseFasterDtype(t));
}

TEST_F(DtypeTest, AnExplicitDtypeOrCalibrationOffMeasuresNothing) {
  std::string metrics = Scrape([](ServerOptions& o) {
    o.model.dtype = "fp32";
    o.model.dtype_calibration = true;
  });
  EXPECT_FALSE(SampleValue(metrics, kFp32Series).has_value());
  EXPECT_EQ(ServedDtype(metrics), "fp32");
  metrics = Scrape([](ServerOptions& o) {
    o.model.dtype = "bf16";
    o.model.dtype_calibration = true;
  });
  EXPECT_FALSE(SampleValue(metrics, kBf16Series).has_value());
  EXPECT_EQ(ServedDtype(metrics), "bf16");
  metrics = Scrape([](ServerOptions&) {});  // TestServerOptions: dtype_calibration false
  EXPECT_FALSE(SampleValue(metrics, kFp32Series).has_value());
  EXPECT_EQ(ServedDtype(metrics), CurrentFastBf16Feature().empty() ? "fp32" : "bf16");
  EXPECT_THAT(metrics, HasSubstr("# TYPE adapterd_dtype_calibration_seconds gauge"));
}

// --training_dtype serving on a bf16 server: no fp32 copy of the encoder is
// loaded (the encoder's memory is a third of what --training_dtype fp32
// holds: 2 bytes a weight against 2 + 4), a job trains on the bf16 encoder
// (mixed precision) to SUCCEEDED, and its task serves. fp16 is refused at
// start-up (no loss scaling).
TEST_F(DtypeTest, TrainingInTheServingDtypeLoadsNoFp32CopyAndTrains) {
  constexpr char kEncoderBytes[] = "adapterd_device_memory_bytes{device=\"cpu\",kind=\"encoder\"}";
  const std::optional<double> with_copy = SampleValue(Scrape([](ServerOptions& o) {
                                                        o.model.dtype = "bf16";
                                                        o.training.dtype = "fp32";
                                                      }),
                                                      kEncoderBytes);
  ServerOptions o = TestServerOptions(dir_.Sub("data"), dir_.Sub("model"));
  o.model.dtype = "bf16";
  o.training.dtype = "serving";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Server> server, Server::Start(o));
  ASSERT_OK_AND_ASSIGN(HttpResponse m, HttpGet(server->metrics_port(), "/metrics", absl::Seconds(30)));
  const std::optional<double> without = SampleValue(m.body, kEncoderBytes);
  ASSERT_TRUE(with_copy.has_value());
  ASSERT_TRUE(without.has_value()) << m.body;
  EXPECT_DOUBLE_EQ(*with_copy, 3 * *without);

  auto stub = NewStub(server->grpc_port());
  v1::Dataset ds;
  ASSERT_TRUE(Upload(*stub, PresenceUpload("presence", 160, 7, 11, 4), &ds).ok());
  ASSERT_OK_AND_ASSIGN(v1::TrainingJob job, TrainToEnd(*stub, SmallJob("train-bf16", "task-bf16", "presence")));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error_message();
  v1::PredictRequest predict;
  predict.set_task_id("task-bf16");
  predict.add_texts("w7 w1 w2");
  v1::PredictResponse resp;
  auto ctx = Ctx();
  ASSERT_TRUE(stub->Predict(ctx.get(), predict, &resp).ok());
  ASSERT_EQ(resp.predictions_size(), 1);
  server.reset();

  o.model.dtype = "fp16";
  EXPECT_THAT(Server::Start(o).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fp16 training needs loss scaling")));
}

}  // namespace
}  // namespace adapterd::testing
