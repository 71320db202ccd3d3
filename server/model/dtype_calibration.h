// Which dtype computes the encoder faster on this machine, measured: the
// start-up calibration behind `--dtype auto` on CPUs with native bf16 dot
// products (docs/PERFORMANCE.md, "`--dtype auto` measures").
//
// A CPU flag does not settle it: on a 2-core AMD EPYC with AVX512-BF16 a bf16
// encoder serves 2.1x fp32's throughput, while on an Intel Xeon with the same
// flag (no AMX) oneDNN's bf16 matmul ran at 0.61x fp32. So the calibration
// builds a short encoder in fp32 and in bf16 from the real encoder's first
// layers (its embeddings, layer 0, its pooler; the word table cut to
// kCalibrationVocab rows, since a gather costs the same over any table) and
// times the plain forward of a serving-sized batch (rows x tokens, every
// token real) through the same code the server runs in each dtype: the
// encoder's products and attention in cpu_kernels, its fp32 residual stream
// and LayerNorms. The adapters' products (a few percent of a layer at
// bottleneck 64) are left out. One warm-up forward per dtype (oneDNN builds
// its primitives then), then timed forwards in pairs, alternating which dtype
// goes first so that a slower second half of the run weighs on both; each
// dtype's time is the median of its forwards. The repetitions are scaled to
// `budget_seconds` from the first pair, within [min_reps, max_reps].
//
// On one thread by default (`threads`; LibTorch's pool is set back after):
// the question is which dtype's kernels are faster on this CPU, and a
// multi-threaded forward on a busy machine mostly measures its threads'
// waits at each operator's barrier, which cost both dtypes alike. On the
// 2-core EPYC while other builds ran, two threads measured bf16 at 0.94-1.13x
// fp32 and one thread 1.76-1.77x in the same minutes (docs/PERFORMANCE.md,
// "`--dtype auto` measures"). One thread does not see how each dtype scales
// with threads; the margin below covers a small difference.
//
// Cost: the two encoders' weights (one layer twice, the bf16 copy converted)
// and 2 x (1 + reps) forwards; docs/PERFORMANCE.md has the seconds at BERT-base
// and BERT-large.
//
// The decision is a pure function of the two timings (ChooseFasterDtype), so
// the serving rule (server/server_options.h, ResolveServingDtype) and a later
// bf16 training path can share it and tests can check it without a clock.
//
// Errors: INVALID_ARGUMENT for options the weights cannot satisfy (more
// layers than the encoder has, more tokens than its positions, nonpositive
// sizes or repetitions); what BertEncoder::Create and Forward return.
// LibTorch exceptions do not escape.
//
// Thread safety: CalibrateDtypes reads `weights` (never writes them) and runs
// the forwards on the calling thread; with `threads` > 0 it resizes LibTorch's
// intra-op pool (process-wide) for its duration and sets it back: call it
// before serving starts, after SetComputeThreads, while nothing else computes.
// The clock is called only from the calling thread. Pure functions otherwise.
#ifndef ADAPTERD_SERVER_MODEL_DTYPE_CALIBRATION_H_
#define ADAPTERD_SERVER_MODEL_DTYPE_CALIBRATION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace adapterd::model {

struct BertConfig;
struct EncoderWeights;

// Rows of the word-embedding table the calibration encoders keep.
inline constexpr int64_t kCalibrationVocab = 1024;

// bf16 serves only when it is at least this much faster than fp32
// (fp32 seconds / bf16 seconds). bf16 costs accuracy headroom (it keeps fp32's
// label on 99.7-99.9% of test texts, not 100%), so a gain within a short
// calibration's noise on a shared machine (runs here differ by up to ~10%)
// does not pay for it; a real bf16 speedup (2.1x on AVX512-BF16 EPYC, more
// with AMX) clears it by far, and a slow bf16 kernel (0.61x) never does.
inline constexpr double kMinBf16Speedup = 1.10;

// One calibration: seconds per row (one text of `tokens` tokens through
// `layers` layers) of each dtype, and what was timed.
struct DtypeTimings {
  double fp32_seconds_per_row = 0;
  double bf16_seconds_per_row = 0;
  int64_t rows = 0;
  int64_t tokens = 0;
  int64_t layers = 0;
  int threads = 0;           // LibTorch intra-op threads the forwards ran on
  int reps = 0;              // timed forwards per dtype (after one warm-up)
  double total_seconds = 0;  // the whole calibration, building the encoders included

  // fp32 time / bf16 time: above 1 when bf16 is faster; 0 without timings.
  double Bf16Speedup() const;
};

// "bf16" when timings.Bf16Speedup() >= min_speedup, else "fp32".
std::string ChooseFasterDtype(const DtypeTimings& timings, double min_speedup = kMinBf16Speedup);

struct DtypeCalibrationOptions {
  int64_t rows = 8;     // a serving batch
  int64_t tokens = 64;  // per row; at most the encoder's positions
  int64_t layers = 1;   // encoder layers in each timed forward
  // The timed forwards (both dtypes) aim to fit this, judged from the first
  // pair; the warm-ups and building the encoders come on top.
  double budget_seconds = 0.5;
  int min_reps = 3;
  int max_reps = 9;
  // LibTorch intra-op threads while timing (restored after); 0 = as set now.
  int threads = 1;
  // Seconds on a monotonic clock, read just before and just after each timed
  // forward; empty = std::chrono::steady_clock. Tests inject a fake one.
  std::function<double()> clock;
};

// Times the encoder `weights` (a `config` encoder, any dtype, on the CPU)
// in fp32 and in bf16 as above.
absl::StatusOr<DtypeTimings> CalibrateDtypes(const BertConfig& config, const EncoderWeights& weights,
                                             const DtypeCalibrationOptions& options = {});

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_DTYPE_CALIBRATION_H_
