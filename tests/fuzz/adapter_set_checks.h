// What the LibTorch-linked harnesses (adapter_import, adapterhub_import)
// share: their start-up (one compute thread; seed writing), and the check
// that an AdapterSet they produced serialises in adapterd's format and reads
// back with bit-identical tensors.
#ifndef ADAPTERD_TESTS_FUZZ_ADAPTER_SET_CHECKS_H_
#define ADAPTERD_TESTS_FUZZ_ADAPTER_SET_CHECKS_H_

#include <ATen/ATen.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/tensor_io.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::model::fuzz {

// LLVMFuzzerInitialize's work: one compute thread, and with
// ADAPTERD_FUZZ_WRITE_SEEDS=DIR in the environment, write_seeds(DIR), then
// exit.
inline void InitializeHarness(void (*write_seeds)(const std::string& dir)) {
  SetComputeThreads(1);
  if (const char* dir = std::getenv("ADAPTERD_FUZZ_WRITE_SEEDS"); dir != nullptr && *dir != '\0') {
    write_seeds(dir);
    std::exit(0);
  }
}

inline bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Serialises `set` (F32, with `extra`) and reads it back in `dtype` without
// the finite check (bit-identical NaNs are fine here); aborts unless every
// tensor comes back bit for bit. Returns the file's info.
inline AdapterFileInfo CheckSerialisesAndReadsBack(const AdapterSet& set, const BertConfig& config,
                                                   std::string_view fingerprint,
                                                   const std::map<std::string, std::string>& extra,
                                                   c10::ScalarType dtype) {
  absl::StatusOr<std::string> file = SerializeAdapterSet(set, fingerprint, extra, DType::kF32);
  FUZZ_CHECK(file.ok()) << "the set does not serialise: " << file.status();
  absl::StatusOr<AdapterFileInfo> info = ReadAdapterInfo(*file);
  FUZZ_CHECK(info.ok()) << "the serialised file's info does not read: " << info.status();
  AdapterLoadOptions options;
  options.check_finite = false;
  options.dtype = dtype;
  absl::StatusOr<std::unique_ptr<AdapterSet>> back =
      DeserializeAdapterSet(*file, config, fingerprint, at::kCPU, options);
  FUZZ_CHECK(back.ok()) << "the serialised file does not read back: " << back.status();
  const auto a = set.Named(), b = (*back)->Named();
  FUZZ_CHECK(a.size() == b.size()) << "tensor count changed through adapterd's format";
  for (size_t i = 0; i < a.size(); ++i) {
    FUZZ_CHECK(a[i].first == b[i].first && SameBytes(a[i].second, b[i].second))
        << "tensor '" << a[i].first << "' changed through adapterd's format";
  }
  return *std::move(info);
}

}  // namespace adapterd::model::fuzz

#endif  // ADAPTERD_TESTS_FUZZ_ADAPTER_SET_CHECKS_H_
