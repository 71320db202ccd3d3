// The adapter-set file format: safetensors bytes with fixed tensor names and
// metadata (docs/ADAPTER_FORMAT.md). It is what RocksDB stores per task
// version and what the public API exports and imports.
//
// Thread safety: free functions, no shared state.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_
#define ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/safetensors.h"

namespace adapterd::model {

inline constexpr char kAdapterFormatName[] = "adapterd.adapter_set";
// Version 3: the task's kind and what its head needs (`task_kind`; the
// labels or BIO tags, the regression target's standardisation, the QA
// windowing). Version 2: `encoder_fingerprint` is the model fingerprint
// (weights, config, vocabulary and tokenizer settings;
// ComputeModelFingerprint). Version 1 files carry the weights-only
// fingerprint. Files of versions 1 and 2 are sequence classification, and
// are still read.
inline constexpr int kAdapterFormatVersion = 3;

// The metadata keys the format itself defines (docs/ADAPTER_FORMAT.md);
// any other key is an extra, passed through (AdapterFileInfo::extra).
std::span<const std::string_view> AdapterFormatKeys();

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

// Serialises `set` with `encoder_fingerprint` (the model fingerprint of the
// encoder it was trained on, BertEncoder::fingerprint()), as the current
// format version. Tensors are written as
// `dtype` (F32, F16 or BF16). `extra` keys must not collide with the format's
// own keys (INVALID_ARGUMENT).
absl::StatusOr<std::string> SerializeAdapterSet(const AdapterSet& set, std::string_view encoder_fingerprint,
                                                const std::map<std::string, std::string>& extra = {},
                                                DType dtype = DType::kF32);

// Reads and validates the metadata. INVALID_ARGUMENT for bytes that are not
// a valid adapter file (malformed safetensors, missing or bad keys, a format
// version this build does not read).
absl::StatusOr<AdapterFileInfo> ReadAdapterInfo(std::string_view bytes);
// The same from a file's metadata alone (ReadSafetensorsHeader's), for a
// file still arriving.
absl::StatusOr<AdapterFileInfo> ReadAdapterInfo(const std::map<std::string, std::string, std::less<>>& metadata);

// The largest an adapter file for an encoder of `config` with `info`'s
// bottleneck and labels can be: every parameter in F32 after a header of
// `header_bytes`. An import larger than this is not a valid file.
int64_t MaxAdapterFileBytes(const BertConfig& config, const AdapterFileInfo& info, int64_t header_bytes);

struct AdapterLoadOptions {
  // The fingerprint a version 1 file must carry: the encoder's weights-only
  // fingerprint (BertEncoder::weights_fingerprint()). Version 1 predates the
  // vocabulary check, so such a file is matched on weights and config only.
  // Empty: the `encoder_fingerprint` argument.
  std::string_view v1_fingerprint;
  // Reject a tensor holding NaN or Inf (INVALID_ARGUMENT naming it). Bytes
  // from storage were checked on their way in (import, training), so the
  // serving cache skips this on its hot path.
  bool check_finite = true;
  // The dtype of the returned set's tensors: the serving cache asks for the
  // encoder's, so each stored value is converted once, straight from the
  // file's bytes, with no fp32 copy in between.
  c10::ScalarType dtype = c10::kFloat;
};

// Parses a file into an AdapterSet of options.dtype (fp32 by default) on
// `device`, checking it against the
// encoder it will run on:
//   FAILED_PRECONDITION if it was trained on another model (fingerprints
//   differ: other weights, config, vocabulary or lower-casing) or its layer
//   count / hidden size differ;
//   INVALID_ARGUMENT if it is malformed, a tensor is missing, unexpected,
//   mis-shaped or (with check_finite) not finite; the message names the
//   tensor.
absl::StatusOr<std::unique_ptr<AdapterSet>> DeserializeAdapterSet(std::string_view bytes,
                                                                  const BertConfig& encoder_config,
                                                                  std::string_view encoder_fingerprint,
                                                                  c10::Device device,
                                                                  const AdapterLoadOptions& options = {});

// OK when every tensor of `set` is finite; otherwise INVALID_ARGUMENT naming
// the first tensor (adapter-file name) that holds NaN or Inf.
absl::Status CheckFinite(const AdapterSet& set);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTER_FORMAT_H_
