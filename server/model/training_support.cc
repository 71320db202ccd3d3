#include "server/model/training_support.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "server/model/tensor_io.h"

namespace adapterd::model {

double LinearWarmupDecay(int64_t step, int64_t total_steps, int64_t warmup_steps, double base_lr) {
  if (step < warmup_steps)
    return base_lr * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
  const double rest =
      static_cast<double>(total_steps - step) / static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
  return base_lr * std::max(0.0, rest);
}

double LinearWarmupDecayFraction(double fraction, double warmup_fraction, double base_lr) {
  if (fraction < warmup_fraction) return base_lr * std::max(0.0, fraction) / warmup_fraction;
  return base_lr * std::max(0.0, 1.0 - fraction) / std::max(1e-12, 1.0 - warmup_fraction);
}

std::string CaptureCpuGeneratorState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Tensor s = gen.get_state();
  return std::string(static_cast<const char*>(s.data_ptr()), static_cast<size_t>(s.numel()));
}

absl::Status RestoreCpuGeneratorState(const std::string& bytes) {
  return GuardTorch("restore RNG state", [&]() {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    at::Tensor s = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
    std::memcpy(s.data_ptr(), bytes.data(), bytes.size());
    gen.set_state(s);
  });
}

}  // namespace adapterd::model
