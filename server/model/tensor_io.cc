#include "server/model/tensor_io.h"

#include <dlfcn.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace adapterd::model {

absl::StatusOr<c10::ScalarType> ToScalarType(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return at::kDouble;
    case DType::kF32:
      return at::kFloat;
    case DType::kF16:
      return at::kHalf;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kI64:
      return at::kLong;
    case DType::kI32:
      return at::kInt;
    case DType::kI16:
      return at::kShort;
    case DType::kI8:
      return at::kChar;
    case DType::kU8:
      return at::kByte;
    case DType::kBool:
      return at::kBool;
  }
  return absl::InvalidArgumentError("unknown dtype");
}

absl::StatusOr<DType> FromScalarType(c10::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return DType::kF64;
    case at::kFloat:
      return DType::kF32;
    case at::kHalf:
      return DType::kF16;
    case at::kBFloat16:
      return DType::kBF16;
    case at::kLong:
      return DType::kI64;
    case at::kInt:
      return DType::kI32;
    case at::kShort:
      return DType::kI16;
    case at::kChar:
      return DType::kI8;
    case at::kByte:
      return DType::kU8;
    case at::kBool:
      return DType::kBool;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("torch dtype ", c10::toString(type), " has no safetensors equivalent"));
  }
}

absl::StatusOr<at::Tensor> ViewToTensor(const TensorView& view, const std::shared_ptr<const void>& holder,
                                        c10::Device device, c10::ScalarType dtype, bool allow_alias) {
  ASSIGN_OR_RETURN(c10::ScalarType src_type, ToScalarType(view.dtype));
  return GuardTorch("tensor from safetensors", [&]() -> absl::StatusOr<at::Tensor> {
    auto opts = at::TensorOptions().dtype(src_type).device(at::kCPU);
    const size_t align = DTypeSize(view.dtype);
    void* ptr = const_cast<std::byte*>(view.data.data());
    const bool aligned = reinterpret_cast<uintptr_t>(ptr) % align == 0;
    if (view.numel() == 0) {
      return at::empty(view.shape, opts.dtype(dtype).device(device));
    }
    if (!aligned) {
      // Copy to an aligned buffer first: kernels may assume natural alignment.
      at::Tensor t = at::empty(view.shape, opts);
      std::memcpy(t.data_ptr(), ptr, view.data.size());
      return t.to(device, dtype);
    }
    std::shared_ptr<const void> keep = holder;
    at::Tensor borrowed = at::from_blob(
        ptr, view.shape, [keep](void*) mutable { keep.reset(); }, opts);
    if (allow_alias && device.is_cpu() && dtype == src_type) return borrowed;
    // .to() on the same dtype/device would alias; force one owned copy.
    return borrowed.to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
  });
}

absl::Status AddTensor(SafetensorsWriter& writer, std::string name, const at::Tensor& tensor, DType dtype) {
  ASSIGN_OR_RETURN(c10::ScalarType st, ToScalarType(dtype));
  ASSIGN_OR_RETURN(at::Tensor cpu, GuardTorch("serialise tensor", [&]() -> absl::StatusOr<at::Tensor> {
                     return tensor.detach().to(at::kCPU, st).contiguous();
                   }));
  std::vector<int64_t> shape(cpu.sizes().begin(), cpu.sizes().end());
  auto* bytes = static_cast<const std::byte*>(cpu.data_ptr());
  return writer.Add(std::move(name), dtype, std::move(shape),
                    {bytes, static_cast<size_t>(cpu.numel()) * cpu.element_size()});
}

absl::Status CheckFinite(const at::Tensor& tensor, std::string_view what) {
  ASSIGN_OR_RETURN(const bool finite, GuardTorch("check finite", [&]() -> absl::StatusOr<bool> {
                     if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type())) return true;
                     // One reduction instead of an n-byte mask: a NaN or an
                     // infinity makes the sum NaN or infinite whatever the
                     // order, so a finite sum proves every element finite.
                     // Only a sum that overflows from finite elements needs
                     // the element-wise look.
                     const at::Tensor sum = tensor.scalar_type() == at::kDouble ? tensor.sum() : tensor.sum(at::kFloat);
                     if (std::isfinite(sum.item<double>())) return true;
                     return at::isfinite(tensor).all().item<bool>();
                   }));
  if (finite) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), " holds NaN or infinite values"));
}

absl::Status TorchExceptionToStatus(const std::exception& e, std::string_view context) {
  std::string what = e.what();
  // c10 messages carry a C++ backtrace after the first line; keep the first.
  if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  std::string msg = absl::StrCat(std::string(context), ": ", what);
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr || dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::ResourceExhaustedError(msg);
  }
  if (dynamic_cast<const c10::Error*>(&e) != nullptr) return absl::InvalidArgumentError(msg);
  return absl::InternalError(msg);
}

absl::StatusOr<c10::ScalarType> ParseFloatDType(std::string_view name) {
  if (name == "float32" || name == "fp32" || name == "f32") return at::kFloat;
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "f16") return at::kHalf;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", std::string(name), "' (float32, bfloat16, float16)"));
}

namespace {

// OpenBLAS's thread-count entry points, looked up at run time: LibTorch may
// be linked against another BLAS (MKL in PyTorch's wheels), and then there is
// no such pool to size.
template <typename Fn>
Fn OpenBlasSymbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

int SetComputeThreads(int threads) {
  const int n = threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  if (auto set = OpenBlasSymbol<void (*)(int)>("openblas_set_num_threads")) set(n);
  return n;
}

void SetBlasThreads(int threads) {
  if (auto set = OpenBlasSymbol<void (*)(int)>("openblas_set_num_threads")) set(std::max(1, threads));
}

int BlasThreads() {
  auto get = OpenBlasSymbol<int (*)()>("openblas_get_num_threads");
  return get != nullptr ? get() : -1;
}

absl::StatusOr<c10::Device> ParseDevice(std::string_view name) {
  if (name == "cpu") return c10::Device(at::kCPU);
  if (name == "auto") {
    return at::hasCUDA() ? c10::Device(at::kCUDA, 0) : c10::Device(at::kCPU);
  }
  if (name == "cuda" || name.starts_with("cuda:")) {
    if (!at::hasCUDA()) {
      return absl::FailedPreconditionError("device 'cuda' requested but LibTorch has no CUDA device");
    }
    int index = 0;
    if (name.size() > 5 && !absl::SimpleAtoi(std::string(name.substr(5)), &index)) {
      return absl::InvalidArgumentError(absl::StrCat("bad device '", std::string(name), "'"));
    }
    return c10::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown device '", std::string(name), "' (auto, cpu, cuda[:N])"));
}

}  // namespace adapterd::model
