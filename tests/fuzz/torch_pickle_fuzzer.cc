// Fuzzes the torch.save reader (server/model/torch_archive.h) with arbitrary
// bytes, two ways: as a data.pkl through UnpickleStateDict (the interpreter
// alone, storages served by the harness), and as a whole file through
// TorchArchive::FromBytes (libzip, then the interpreter). Imported
// AdapterHub adapters and pytorch_model.bin files go through it.
//
// Invariants of a successful parse:
//   - every name is non-empty valid UTF-8;
//   - every tensor's bytes are numel * DTypeSize of its dtype, and numel is
//     no more than the largest storage the harness served (no amplification:
//     a broadcast view cannot turn a small storage into a large copy);
//   - the interpreter asked for each storage key once.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "server/model/torch_archive.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::model {
namespace {

void CheckTensors(const std::map<std::string, TensorView, std::less<>>& tensors, int64_t largest_storage) {
  for (const auto& [name, view] : tensors) {
    FUZZ_CHECK(!name.empty() && IsValidUtf8(name)) << "a name is empty or not UTF-8";
    int64_t numel = 1;
    for (int64_t dim : view.shape) {
      FUZZ_CHECK(dim >= 0) << "tensor '" << name << "': negative dimension";
      numel *= dim;
    }
    FUZZ_CHECK(numel <= largest_storage) << "tensor '" << name << "': " << numel
                                         << " elements from a storage of at most " << largest_storage;
    FUZZ_CHECK(static_cast<uint64_t>(numel) * DTypeSize(view.dtype) == view.data.size())
        << "tensor '" << name << "': " << view.data.size() << " bytes for " << numel << " elements";
  }
}

}  // namespace
}  // namespace adapterd::model

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::model;
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  std::set<std::string> asked;
  int64_t largest = 0;
  TorchStorageLoader load = [&](const TorchStorageRef& ref) -> absl::StatusOr<std::shared_ptr<const std::string>> {
    FUZZ_CHECK(asked.insert(ref.key).second) << "storage '" << ref.key << "' was asked for twice";
    if (ref.count > 4096) return absl::InvalidArgumentError("the harness serves storages of up to 4096 elements");
    largest = std::max(largest, ref.count);
    return std::make_shared<const std::string>(static_cast<size_t>(ref.count) * DTypeSize(ref.dtype), '\x01');
  };
  std::shared_ptr<const void> holder;
  auto tensors = UnpickleStateDict(input, load, &holder);
  if (tensors.ok()) adapterd::model::CheckTensors(*tensors, largest);

  auto archive = TorchArchive::FromBytes(input, {.max_pickle_bytes = 1 << 20, .max_storage_bytes = 1 << 20});
  if (archive.ok()) adapterd::model::CheckTensors(archive->tensors(), int64_t{1} << 20);
  return 0;
}
