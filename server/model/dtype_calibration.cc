#include "server/model/dtype_calibration.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/bert_config.h"
#include "server/model/bert_encoder.h"
#include "server/model/encoder_weights.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

absl::Status CheckOptions(const BertConfig& config, const EncoderWeights& weights, const DtypeCalibrationOptions& o) {
  auto bad = [](const std::string& m) { return absl::InvalidArgumentError("dtype calibration: " + m); };
  if (o.rows < 1 || o.tokens < 1 || o.layers < 1) return bad("rows, tokens and layers must be at least 1");
  if (o.layers > static_cast<int64_t>(weights.layers.size()) || o.layers > config.num_hidden_layers) {
    return bad(absl::StrCat(o.layers, " layers asked of an encoder with ", weights.layers.size()));
  }
  if (o.tokens > config.max_position_embeddings) {
    return bad(
        absl::StrCat(o.tokens, " tokens asked of an encoder with ", config.max_position_embeddings, " positions"));
  }
  if (o.min_reps < 1 || o.max_reps < o.min_reps) return bad("need 1 <= min_reps <= max_reps");
  if (o.threads < 0) return bad("threads must be >= 0");
  if (!weights.word_embeddings.defined() || !weights.word_embeddings.device().is_cpu()) {
    return bad("the encoder's weights must be on the CPU");
  }
  return absl::OkStatus();
}

// The calibration encoder in `dtype`: `weights`' first `layers` layers, its
// embeddings (the word table cut to kCalibrationVocab rows) and pooler.
absl::StatusOr<std::unique_ptr<BertEncoder>> CalibrationEncoder(const BertConfig& config, const EncoderWeights& weights,
                                                                int64_t layers, c10::ScalarType dtype) {
  BertConfig c = config;
  c.num_hidden_layers = layers;
  c.vocab_size = std::min(config.vocab_size, kCalibrationVocab);
  EncoderWeights w = weights;
  w.layers.resize(static_cast<size_t>(layers));
  RETURN_IF_ERROR(GuardTorch("cut the calibration vocabulary",
                             [&] { w.word_embeddings = weights.word_embeddings.narrow(0, 0, c.vocab_size); }));
  BertEncoder::Options options;
  options.dtype = dtype;
  options.fingerprint = "dtype-calibration";
  return BertEncoder::Create(c, std::move(w), std::move(options));
}

// rows x tokens ids spread over the cut vocabulary, every token real (a
// defined mask, as serving passes).
absl::StatusOr<EncoderInput> CalibrationInput(int64_t rows, int64_t tokens, int64_t vocab) {
  return GuardTorch("build the calibration batch", [&]() -> absl::StatusOr<EncoderInput> {
    EncoderInput in;
    in.input_ids = at::arange(rows * tokens, at::kLong).mul_(7919).remainder_(vocab).view({rows, tokens});
    in.token_type_ids = at::zeros({rows, tokens}, at::kLong);
    in.attention_mask = at::ones({rows, tokens}, at::kLong);
    return in;
  });
}

}  // namespace

double DtypeTimings::Bf16Speedup() const {
  if (fp32_seconds_per_row <= 0 || bf16_seconds_per_row <= 0) return 0;
  return fp32_seconds_per_row / bf16_seconds_per_row;
}

std::string ChooseFasterDtype(const DtypeTimings& timings, double min_speedup) {
  return timings.Bf16Speedup() >= min_speedup ? "bf16" : "fp32";
}

absl::StatusOr<DtypeTimings> CalibrateDtypes(const BertConfig& config, const EncoderWeights& weights,
                                             const DtypeCalibrationOptions& options) {
  RETURN_IF_ERROR(CheckOptions(config, weights, options));
  const std::function<double()> clock = options.clock ? options.clock : SteadySeconds;
  const auto started = std::chrono::steady_clock::now();
  c10::InferenceMode inference_mode;
  // One thread by default (dtype_calibration.h says why); the pool as it was
  // on every return.
  struct PoolSize {
    int before = at::get_num_threads();
    ~PoolSize() { at::set_num_threads(before); }
  } pool;
  if (options.threads > 0) at::set_num_threads(options.threads);
  // [0] fp32, [1] bf16.
  const std::array<c10::ScalarType, 2> dtypes = {c10::kFloat, c10::kBFloat16};
  std::array<std::unique_ptr<BertEncoder>, 2> encoders;
  for (size_t d = 0; d < 2; ++d) {
    ASSIGN_OR_RETURN(encoders[d], CalibrationEncoder(config, weights, options.layers, dtypes[d]));
  }
  ASSIGN_OR_RETURN(const EncoderInput input,
                   CalibrationInput(options.rows, options.tokens, encoders[0]->config().vocab_size));
  auto forward = [&](size_t d) { return encoders[d]->Forward(input).status(); };
  auto timed = [&](size_t d) -> absl::StatusOr<double> {
    const double t0 = clock();
    RETURN_IF_ERROR(forward(d));
    return clock() - t0;
  };
  for (size_t d = 0; d < 2; ++d) RETURN_IF_ERROR(forward(d));  // warm-up: oneDNN builds its primitives

  std::array<std::vector<double>, 2> seconds;
  int reps = options.min_reps;
  for (int rep = 0; rep < reps; ++rep) {
    const size_t first = static_cast<size_t>(rep % 2);  // alternate which dtype goes first
    for (size_t d : {first, 1 - first}) {
      ASSIGN_OR_RETURN(const double s, timed(d));
      seconds[d].push_back(s);
    }
    if (rep == 0) {
      const double pair = seconds[0][0] + seconds[1][0];
      const double fit = pair > 0 ? std::floor(options.budget_seconds / pair) : options.max_reps;
      reps = static_cast<int>(std::clamp<double>(fit, options.min_reps, options.max_reps));
    }
  }
  DtypeTimings t;
  t.rows = options.rows;
  t.tokens = options.tokens;
  t.layers = options.layers;
  t.threads = at::get_num_threads();
  t.reps = reps;
  t.fp32_seconds_per_row = Median(seconds[0]) / static_cast<double>(options.rows);
  t.bf16_seconds_per_row = Median(seconds[1]) / static_cast<double>(options.rows);
  t.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return t;
}

}  // namespace adapterd::model
