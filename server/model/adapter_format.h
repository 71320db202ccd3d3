// The adapter-set file format: safetensors bytes with fixed tensor names and
// metadata (docs/ADAPTER_FORMAT.md). It is what RocksDB stores per task
// version and what the public API exports and imports.
//
// Thread safety: free functions, no shared state.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_
#define ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/safetensors.h"

namespace adapterd::model {

inline constexpr char kAdapterFormatName[] = "adapterd.adapter_set";
inline constexpr int kAdapterFormatVersion = 1;

// What the metadata says about a file, without its tensors.
struct AdapterFileInfo {
  int format_version = 0;
  AdapterConfig config;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  std::string encoder_fingerprint;
  // Keys outside the format's own (e.g. "task_id"), passed through unchanged.
  std::map<std::string, std::string> extra;
};

// Serialises `set` with `encoder_fingerprint`. Tensors are written as
// `dtype` (F32, F16 or BF16). `extra` keys must not collide with the format's
// own keys (INVALID_ARGUMENT).
absl::StatusOr<std::string> SerializeAdapterSet(const AdapterSet& set,
                                                std::string_view encoder_fingerprint,
                                                const std::map<std::string, std::string>& extra = {},
                                                DType dtype = DType::kF32);

// Reads and validates the metadata. INVALID_ARGUMENT for bytes that are not
// a valid adapter file (malformed safetensors, missing or bad keys, a format
// version this build does not read).
absl::StatusOr<AdapterFileInfo> ReadAdapterInfo(std::string_view bytes);

// Parses a file into an fp32 AdapterSet on `device`, checking it against the
// encoder it will run on:
//   FAILED_PRECONDITION if it was trained on another encoder (fingerprints
//   differ) or its layer count / hidden size differ;
//   INVALID_ARGUMENT if it is malformed, a tensor is missing, unexpected or
//   mis-shaped (the message names the tensor).
absl::StatusOr<std::unique_ptr<AdapterSet>> DeserializeAdapterSet(std::string_view bytes,
                                                                  const BertConfig& encoder_config,
                                                                  std::string_view encoder_fingerprint,
                                                                  c10::Device device);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_
