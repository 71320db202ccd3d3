// The start-up dtype calibration (server/model/dtype_calibration.h): the
// rule is a pure function of two timings; the calibration runs both dtypes
// on a tiny encoder and scales its repetitions by the clock it is given.
// Nothing here asserts on how long anything takes.
#include "server/model/dtype_calibration.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/bert_config.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/encoder_weights.h"
#include "tests/model/tiny_bert.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::AnyOf;
using ::testing::HasSubstr;

DtypeTimings Timings(double fp32, double bf16) {
  DtypeTimings t;
  t.fp32_seconds_per_row = fp32;
  t.bf16_seconds_per_row = bf16;
  return t;
}

TEST(DtypeRule, Bf16OnlyWhenItIsClearlyFaster) {
  // The AMD EPYC of docs/PERFORMANCE.md: bf16 about 2.1x fp32.
  EXPECT_DOUBLE_EQ(Timings(2.1e-3, 1e-3).Bf16Speedup(), 2.1);
  EXPECT_EQ(ChooseFasterDtype(Timings(2.1e-3, 1e-3)), "bf16");
  // An Intel Xeon with AVX512-BF16 and no AMX: bf16 at 0.61x fp32.
  EXPECT_EQ(ChooseFasterDtype(Timings(6.1e-3, 10e-3)), "fp32");
  // Faster, but within the margin: not worth bf16's accuracy cost.
  EXPECT_EQ(ChooseFasterDtype(Timings(1.05e-3, 1e-3)), "fp32");
  EXPECT_EQ(ChooseFasterDtype(Timings(1e-3, 1e-3)), "fp32");
  // At the margin, and the margin is the caller's to set.
  EXPECT_EQ(ChooseFasterDtype(Timings(kMinBf16Speedup * 1e-3, 1e-3)), "bf16");
  EXPECT_EQ(ChooseFasterDtype(Timings(1.05e-3, 1e-3), 1.0), "bf16");
  EXPECT_EQ(ChooseFasterDtype(Timings(2.1e-3, 1e-3), 3.0), "fp32");
  // No measurement is no evidence for bf16.
  EXPECT_EQ(Timings(0, 0).Bf16Speedup(), 0);
  EXPECT_EQ(ChooseFasterDtype(Timings(0, 0)), "fp32");
  EXPECT_EQ(ChooseFasterDtype(Timings(1e-3, 0)), "fp32");
}

class DtypeCalibrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = testing::TinyBertConfig(/*words=*/40, /*hidden_size=*/64);
    ASSERT_OK_AND_ASSIGN(weights_, RandomEncoderWeights(config_, /*seed=*/7));
  }
  BertConfig config_;
  EncoderWeights weights_;
};

TEST_F(DtypeCalibrationTest, TimesBothDtypesOnTheRealClock) {
  const at::Tensor qkv_before = weights_.layers[0].qkv_weight.clone();
  at::set_num_threads(2);
  DtypeCalibrationOptions o;
  o.rows = 4;
  o.tokens = 16;
  o.layers = 2;
  ASSERT_OK_AND_ASSIGN(DtypeTimings t, CalibrateDtypes(config_, weights_, o));
  EXPECT_GT(t.fp32_seconds_per_row, 0);
  EXPECT_GT(t.bf16_seconds_per_row, 0);
  EXPECT_GT(t.Bf16Speedup(), 0);
  EXPECT_EQ(t.rows, 4);
  EXPECT_EQ(t.tokens, 16);
  EXPECT_EQ(t.layers, 2);
  EXPECT_GE(t.reps, o.min_reps);
  EXPECT_LE(t.reps, o.max_reps);
  // The whole calibration holds its timed forwards.
  EXPECT_GE(t.total_seconds, (t.fp32_seconds_per_row + t.bf16_seconds_per_row) * 4);
  EXPECT_THAT(ChooseFasterDtype(t), AnyOf("fp32", "bf16"));
  // The caller's weights are read, never converted or written.
  EXPECT_EQ(weights_.layers[0].qkv_weight.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(weights_.layers[0].qkv_weight, qkv_before));
  EXPECT_EQ(weights_.word_embeddings.size(0), config_.vocab_size);
  // Timed on one thread, and the pool set back for serving.
  EXPECT_EQ(t.threads, 1);
  EXPECT_EQ(at::get_num_threads(), 2);
}

// A clock that advances 1 ms per reading: every timed forward measures 1 ms,
// so the repetitions follow from the budget alone.
struct TickingClock {
  int readings = 0;
  double operator()() { return 1e-3 * ++readings; }
};

TEST_F(DtypeCalibrationTest, ScalesItsRepetitionsToTheBudgetByTheClockItIsGiven) {
  auto run = [&](double budget, int* readings) -> DtypeTimings {
    auto clock = std::make_shared<TickingClock>();
    DtypeCalibrationOptions o;
    o.rows = 2;
    o.tokens = 8;
    o.budget_seconds = budget;
    o.min_reps = 2;
    o.max_reps = 7;
    o.clock = [clock] { return (*clock)(); };
    absl::StatusOr<DtypeTimings> t = CalibrateDtypes(config_, weights_, o);
    EXPECT_OK(t.status());
    *readings = clock->readings;
    return t.value_or(DtypeTimings{});
  };
  int readings = 0;
  // A pair of forwards costs 2 ms by this clock: 10 ms fits 5 pairs.
  DtypeTimings t = run(0.010, &readings);
  EXPECT_EQ(t.reps, 5);
  EXPECT_EQ(readings, 2 * 2 * 5);  // before and after each timed forward, both dtypes
  EXPECT_DOUBLE_EQ(t.fp32_seconds_per_row, 1e-3 / 2);
  EXPECT_DOUBLE_EQ(t.bf16_seconds_per_row, 1e-3 / 2);
  EXPECT_EQ(ChooseFasterDtype(t), "fp32");  // equal times: no reason for bf16
  // Clamped to [min_reps, max_reps].
  EXPECT_EQ(run(0.0, &readings).reps, 2);
  EXPECT_EQ(run(100.0, &readings).reps, 7);
}

TEST_F(DtypeCalibrationTest, RefusesWhatTheEncoderCannotRun) {
  DtypeCalibrationOptions o;
  o.layers = 3;  // the tiny encoder has 2
  EXPECT_THAT(CalibrateDtypes(config_, weights_, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 layers")));
  o = {};
  o.tokens = config_.max_position_embeddings + 1;
  EXPECT_THAT(CalibrateDtypes(config_, weights_, o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("positions")));
  o = {};
  o.min_reps = 0;
  EXPECT_THAT(CalibrateDtypes(config_, weights_, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = {};
  o.rows = 0;
  EXPECT_THAT(CalibrateDtypes(config_, weights_, o), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd::model
