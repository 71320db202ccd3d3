// Fuzzes SafetensorsFile::Parse (server/model/safetensors.h) with arbitrary
// bytes: model files and every adapter file a caller imports go through it.
//
// Invariants of a successful parse:
//   - every tensor's bytes lie inside the data section of the input, hold
//     exactly numel * DTypeSize bytes, and the tensors tile the data section
//     (no overlap, no gap), as the header documents;
//   - names and metadata are valid UTF-8 (JSON strings);
//   - writing the tensors and metadata back with SafetensorsWriter and parsing
//     that gives the same tensors (dtype, shape, bytes) and metadata.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "server/model/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::model {
namespace {

void CheckLayout(const SafetensorsFile& file, std::span<const std::byte> input) {
  const std::byte* const begin = input.data();
  const std::byte* const end = input.data() + input.size();
  std::vector<std::span<const std::byte>> ranges;
  for (const auto& [name, view] : file.tensors()) {
    FUZZ_CHECK(IsValidUtf8(name)) << "tensor name is not valid UTF-8";
    FUZZ_CHECK(name != "__metadata__") << "the metadata key parsed as a tensor";
    const size_t element = DTypeSize(view.dtype);
    FUZZ_CHECK(element > 0) << "tensor '" << name << "' has an invalid dtype";
    for (int64_t dim : view.shape) FUZZ_CHECK(dim >= 0) << "tensor '" << name << "': negative dim";
    const int64_t numel = view.numel();
    FUZZ_CHECK(numel >= 0 && numel < (int64_t{1} << 62)) << "tensor '" << name << "': numel " << numel;
    FUZZ_CHECK(static_cast<uint64_t>(numel) * element == view.data.size())
        << "tensor '" << name << "': " << view.data.size() << " bytes for " << numel << " elements of " << element
        << " bytes";
    if (!view.data.empty()) {
      FUZZ_CHECK(view.data.data() >= begin && view.data.data() + view.data.size() <= end)
          << "tensor '" << name << "' lies outside the input";
      ranges.push_back(view.data);
    } else {
      // An empty view may point anywhere in [begin, end] but not outside.
      FUZZ_CHECK(view.data.data() == nullptr || (view.data.data() >= begin && view.data.data() <= end))
          << "empty tensor '" << name << "' points outside the input";
    }
  }
  // Non-empty tensors tile the tail of the input: sorted by address they are
  // contiguous and the last one ends where the input ends.
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.data() < b.data(); });
  for (size_t i = 1; i < ranges.size(); ++i) {
    FUZZ_CHECK(ranges[i - 1].data() + ranges[i - 1].size() == ranges[i].data())
        << "tensor byte ranges overlap or leave a gap";
  }
  if (!ranges.empty()) {
    FUZZ_CHECK(ranges.back().data() + ranges.back().size() == end) << "bytes after the last tensor belong to no tensor";
  }
  for (const auto& [key, value] : file.metadata()) {
    FUZZ_CHECK(IsValidUtf8(key) && IsValidUtf8(value)) << "metadata is not valid UTF-8";
  }
}

void CheckRoundTrip(const SafetensorsFile& file) {
  SafetensorsWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.SetMetadata(key, value);
  for (const auto& [name, view] : file.tensors()) {
    // The writer refuses an empty name, which the format (and Parse) allow.
    if (name.empty()) return;
    const absl::Status added = writer.Add(name, view.dtype, view.shape, view.data);
    FUZZ_CHECK(added.ok()) << "writer refused parsed tensor '" << name << "': " << added;
  }
  absl::StatusOr<SafetensorsFile> again = SafetensorsFile::FromString(writer.Serialize());
  FUZZ_CHECK(again.ok()) << "re-serialised file does not parse: " << again.status();
  FUZZ_CHECK(again->metadata() == file.metadata()) << "metadata changed in a round trip";
  FUZZ_CHECK(again->tensors().size() == file.tensors().size()) << "tensor count changed";
  auto it = again->tensors().begin();
  for (const auto& [name, view] : file.tensors()) {
    FUZZ_CHECK(it->first == name) << "tensor '" << name << "' renamed in a round trip";
    const TensorView& other = it->second;
    FUZZ_CHECK(other.dtype == view.dtype && other.shape == view.shape)
        << "tensor '" << name << "' changed dtype or shape";
    FUZZ_CHECK(other.data.size() == view.data.size() &&
               (view.data.empty() || std::memcmp(other.data.data(), view.data.data(), view.data.size()) == 0))
        << "tensor '" << name << "' changed bytes";
    ++it;
  }
}

}  // namespace
}  // namespace adapterd::model

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::model;
  // Parsed in place (no holder): every view must point into these bytes.
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  // A small header limit too, so that the limit check itself is exercised.
  SafetensorsLimits limits;
  if (size > 0 && (data[size - 1] & 1) != 0) limits.max_header_bytes = 1 << 12;
  absl::StatusOr<SafetensorsFile> file = SafetensorsFile::Parse(input, nullptr, limits);
  if (!file.ok()) {
    FUZZ_CHECK(file.status().code() == absl::StatusCode::kInvalidArgument ||
               file.status().code() == absl::StatusCode::kResourceExhausted)
        << "unexpected error code: " << file.status();
    return 0;
  }
  CheckLayout(*file, input);
  CheckRoundTrip(*file);
  return 0;
}
