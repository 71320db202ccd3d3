// safetensors reader and writer (https://github.com/huggingface/safetensors).
//
// File layout: an 8-byte little-endian header length N, N bytes of JSON, then
// the raw tensor bytes. The JSON maps tensor names to
//   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
// (offsets relative to the start of the data section) plus an optional
// "__metadata__" object of string -> string.
//
// This module knows bytes, not tensors: it has no LibTorch dependency, so it
// is shared by the model loader (server/model/tensor_io.h converts views to
// torch tensors) and by tools.
//
// Validation (Parse/Open reject, with a Status naming the tensor and the
// problem, and never crash on):
//   - fewer than 8 bytes, header length 0, past the end of the input or over
//     SafetensorsLimits::max_header_bytes;
//   - JSON that is malformed, not an object, or has duplicate keys;
//   - an entry that is not an object, lacks or has extra fields, an unknown
//     dtype, a negative or non-integer shape dimension, malformed
//     data_offsets, begin > end, end past the data section;
//   - END-BEGIN != numel * sizeof(dtype) (computed without overflow);
//   - overlapping tensors, or bytes of the data section no tensor covers;
//   - a __metadata__ that is not an object of strings.
// Errors are INVALID_ARGUMENT (malformed content) or the I/O error of Open.
//
// Thread safety: SafetensorsFile is immutable after construction; any number
// of threads may read it. SafetensorsWriter is not thread-safe.
#ifndef ADAPTERD_SERVER_MODEL_SAFETENSORS_H_
#define ADAPTERD_SERVER_MODEL_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace adapterd::model {

// Element types of the safetensors format that adapterd reads and writes.
enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// Size of one element in bytes.
size_t DTypeSize(DType dtype);
// The format's spelling: "F32", "BF16", ...
std::string_view DTypeName(DType dtype);
// Inverse of DTypeName. INVALID_ARGUMENT for anything else.
absl::StatusOr<DType> ParseDType(std::string_view name);

// A tensor inside a parsed file. `data` borrows the file's bytes and is valid
// while the owning SafetensorsFile (or a copy of its holder()) is alive.
struct TensorView {
  DType dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;

  int64_t numel() const;
};

struct SafetensorsLimits {
  // Largest accepted JSON header. The reference implementation uses 100 MB.
  uint64_t max_header_bytes = 100ull << 20;
};

class SafetensorsFile {
 public:
  // Memory-maps `path` and parses it; the mapping lives as long as the file
  // object or any holder() copy.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path, const SafetensorsLimits& limits = {});

  // Parses bytes owned by the caller. `holder` is retained and should keep
  // `bytes` alive (it may be null when the caller guarantees that itself).
  static absl::StatusOr<SafetensorsFile> Parse(std::span<const std::byte> bytes, std::shared_ptr<const void> holder,
                                               const SafetensorsLimits& limits = {});

  // Parses an owned buffer (moved in and kept alive by the result).
  static absl::StatusOr<SafetensorsFile> FromString(std::string bytes, const SafetensorsLimits& limits = {});

  // All tensors, by name (sorted).
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* Find(std::string_view name) const;
  // The "__metadata__" object (empty when absent).
  const std::map<std::string, std::string, std::less<>>& metadata() const { return metadata_; }
  // Keeps the underlying bytes alive; share it with anything that borrows them.
  const std::shared_ptr<const void>& holder() const { return holder_; }

 private:
  SafetensorsFile() = default;

  std::map<std::string, TensorView, std::less<>> tensors_;
  std::map<std::string, std::string, std::less<>> metadata_;
  std::shared_ptr<const void> holder_;
};

// What the first bytes of a file say, for a file that arrives in pieces (an
// import stream): the whole file's size (length prefix + header + data
// section, whose size is the largest data_offsets end) and its metadata.
struct SafetensorsHeader {
  uint64_t total_bytes = 0;
  std::map<std::string, std::string, std::less<>> metadata;
};
// nullopt while `prefix` is shorter than the length prefix and the header;
// INVALID_ARGUMENT once it shows that no valid file starts with it (a header
// length of 0 or over the limit, a header that is not JSON, an entry without
// two increasing data_offsets). Tensors are checked fully only by Parse().
absl::StatusOr<std::optional<SafetensorsHeader>> ReadSafetensorsHeader(std::span<const std::byte> prefix,
                                                                       const SafetensorsLimits& limits = {});

// Builds a safetensors file in memory. Tensors are laid out in name order,
// and the JSON header is padded with spaces to a multiple of 8 bytes so that
// every tensor's data is 8-byte aligned when all sizes are multiples of 8.
class SafetensorsWriter {
 public:
  void SetMetadata(std::string key, std::string value);

  // Copies `data`. INVALID_ARGUMENT if the name is empty, reserved
  // ("__metadata__"), already added, a dimension is negative, or
  // data.size() != numel * DTypeSize(dtype).
  absl::Status Add(std::string name, DType dtype, std::vector<int64_t> shape, std::span<const std::byte> data);

  // The complete file.
  std::string Serialize() const;
  // Serialize() written atomically (temp file + fsync + rename).
  absl::Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, std::string, std::less<>> metadata_;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_SAFETENSORS_H_
