// Bridges between LibTorch and the rest of adapterd:
//   - safetensors views <-> at::Tensor;
//   - LibTorch exceptions -> absl::Status (the module edge, in one place).
//
// Includes only ATen's core tensor header, not <torch/torch.h>.
// Thread safety: free functions, no shared state.
#ifndef ADAPTERD_SERVER_MODEL_TENSOR_IO_H_
#define ADAPTERD_SERVER_MODEL_TENSOR_IO_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/safetensors.h"

namespace adapterd::model {

// Maps a safetensors dtype to a torch scalar type (INVALID_ARGUMENT if torch
// has none, e.g. none here) and back.
absl::StatusOr<c10::ScalarType> ToScalarType(DType dtype);
absl::StatusOr<DType> FromScalarType(c10::ScalarType type);

// Turns a borrowed view into a tensor on `device` with `dtype`. The result
// never aliases the view's bytes unless `allow_alias` is set, the view is
// already of that dtype, the device is CPU and the bytes are suitably
// aligned; then it borrows them and keeps `holder` alive.
absl::StatusOr<at::Tensor> ViewToTensor(const TensorView& view, const std::shared_ptr<const void>& holder,
                                        c10::Device device, c10::ScalarType dtype, bool allow_alias = false);

// Adds a tensor (moved to CPU, made contiguous, cast to `dtype`) to a writer.
absl::Status AddTensor(SafetensorsWriter& writer, std::string name, const at::Tensor& tensor, DType dtype);

// OK when every element of `tensor` is finite (integer tensors always are);
// otherwise INVALID_ARGUMENT "<what> holds NaN or infinite values".
absl::Status CheckFinite(const at::Tensor& tensor, std::string_view what);

// Converts an exception escaping LibTorch into a Status:
// INVALID_ARGUMENT for c10::Error (shape/dtype misuse), RESOURCE_EXHAUSTED for
// out-of-memory, INTERNAL otherwise. `context` prefixes the message.
absl::Status TorchExceptionToStatus(const std::exception& e, std::string_view context);

// Runs `fn` and converts any exception into a Status. `fn` returns
// absl::Status or absl::StatusOr<T> (or void).
template <typename Fn>
auto GuardTorch(std::string_view context, Fn&& fn) -> decltype(auto) {
  using R = std::invoke_result_t<Fn>;
  try {
    if constexpr (std::is_void_v<R>) {
      std::forward<Fn>(fn)();
      return absl::OkStatus();
    } else {
      return R(std::forward<Fn>(fn)());
    }
  } catch (const std::exception& e) {
    if constexpr (std::is_void_v<R>) {
      return TorchExceptionToStatus(e, context);
    } else {
      return R(TorchExceptionToStatus(e, context));
    }
  }
}

// Parses "float32"/"fp32", "bfloat16"/"bf16", "float16"/"fp16".
absl::StatusOr<c10::ScalarType> ParseFloatDType(std::string_view name);
// Parses "cpu", "cuda", "cuda:N", or "auto" (cuda when available).
absl::StatusOr<c10::Device> ParseDevice(std::string_view name);

// Sets the CPU threads LibTorch computes with: `threads`, or for 0 one per
// hardware thread (std::thread::hardware_concurrency; LibTorch's own default
// counts physical cores, which is 1 on the 2-vCPU development VM). Two pools
// are sized: LibTorch's intra-op (OpenMP) pool, and OpenBLAS's own pthread
// pool when LibTorch's BLAS is OpenBLAS (Debian's is; its fp32 GEMMs run
// there). at::set_num_threads leaves OpenBLAS's pool at one thread per CPU,
// so a "one thread" process computed on two, and two such processes slowed
// each other down (docs/PERFORMANCE.md). With more than one thread, libgomp's
// idle workers spin while OpenBLAS works unless OMP_WAIT_POLICY=PASSIVE;
// libgomp reads that only at load, so the launch scripts export it.
// Returns the count set. Process-global: call once at start-up, before any
// parallel work.
int SetComputeThreads(int threads);

// OpenBLAS's thread count, or -1 when LibTorch's BLAS is not OpenBLAS.
int BlasThreads();

// Sets OpenBLAS's pool alone (no-op when LibTorch's BLAS is not OpenBLAS).
// The server sets 1 when its products run in oneDNN (cpu_kernels.h): OpenBLAS
// then computes only ATen's leftovers (the products of adapters being
// trained, attention's backward) on the calling thread, and no second pool
// competes with OpenMP's workers, which may then spin between operators
// (docs/PERFORMANCE.md, "Wait policy"). Values below 1 mean 1.
// Process-global, like SetComputeThreads: call at start-up.
void SetBlasThreads(int threads);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_TENSOR_IO_H_
