// What every LibTorch training loop in the project shares: the
// learning-rate schedule, and the CPU generator's state for checkpoints.
// Adapter training (server/training) and pretraining (tools/pretrain) both
// use them, and neither depends on the other.
//
// Thread safety: LinearWarmupDecay is pure. The generator functions lock
// the default CPU generator's mutex; a training loop that draws from it on
// several threads at once still gets no reproducibility from them.
#ifndef ADAPTERD_SERVER_MODEL_TRAINING_SUPPORT_H_
#define ADAPTERD_SERVER_MODEL_TRAINING_SUPPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace adapterd::model {

// HF get_linear_schedule_with_warmup: step/warmup during warmup, then
// (total - step) / (total - warmup), floored at 0; times base_lr.
double LinearWarmupDecay(int64_t step, int64_t total_steps, int64_t warmup_steps, double base_lr);
// The same schedule over a fraction of a budget (of time, say) rather than
// steps: base_lr * fraction / warmup_fraction during the warmup, then linear
// decay to 0 at fraction 1 (and 0 past it).
double LinearWarmupDecayFraction(double fraction, double warmup_fraction, double base_lr);

// The state of LibTorch's default CPU generator (dropout draws from it), as
// opaque bytes for checkpoints, and its restoration. Restoring bytes that
// did not come from CaptureCpuGeneratorState is INVALID_ARGUMENT/INTERNAL.
std::string CaptureCpuGeneratorState();
absl::Status RestoreCpuGeneratorState(const std::string& bytes);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TRAINING_SUPPORT_H_
