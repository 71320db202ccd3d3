// The serving form of a task version: its AdapterSet already in the serving
// dtype, laid out as one self-checking blob that decodes with one memcpy per
// tensor (docs/ADAPTER_FORMAT.md, "Serving form (internal, derived)").
//
// It is a cache derived from the canonical adapter file (adapter_format.h),
// which stays the source of truth and the only thing exported: a serving form
// may be missing or stale and is then rebuilt from the canonical file
// (server/serving/adapter_loading.h). Nothing here parses safetensors or
// JSON, and nothing converts dtypes.
//
// Layout (integers little-endian):
//   [0, 8)        magic "adsvform" (as a safetensors header length it would
//                 be ~7.9e18 bytes: never confused with an adapter file)
//   [8, 12)       u32 layout version (kServingFormVersion)
//   [12, 16)      u32 H, the header's length
//   [16, 16 + H)  header: the serving dtype's name ("BF16"), the source (the
//                 canonical file's storage key), the encoder fingerprint, the
//                 encoder's layer count and width, the canonical file's size
//                 and XXH3-64 (provenance only), the AdapterConfig (binary:
//                 bottleneck, activation name, init_std, kind number, labels,
//                 standardisation, QA windowing, tagging window), then per
//                 tensor of AdapterSet::Named(), in that order: rank, dims,
//                 offset, byte length
//   tensor bytes, each tensor at a 64-byte aligned offset, C-contiguous
//   [end - 8, end) u64 XXH3-64 of every byte before it
//
// Integrity: the trailing XXH3-64 digest covers the whole blob, so storage
// reads it without RocksDB's own (slow) block checksum verification
// (storage/adapter_store.h). Any mismatch is DATA_LOSS.
//
// Thread safety: free functions, no shared state.
#ifndef ADAPTERD_SERVER_MODEL_SERVING_FORM_H_
#define ADAPTERD_SERVER_MODEL_SERVING_FORM_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"

namespace adapterd::model {

inline constexpr int kServingFormVersion = 1;

// Encodes `set` as a serving form. Its tensors' dtype (F32, F16 or BF16;
// INVALID_ARGUMENT otherwise) is the serving dtype recorded; tensors may be
// on any device. `source` names the canonical file it was made from (its
// storage key), `encoder_fingerprint` the encoder it was checked against,
// and `canonical` is that file's bytes (only their size and digest are kept).
absl::StatusOr<std::string> EncodeServingForm(const AdapterSet& set, std::string_view source,
                                              std::string_view encoder_fingerprint, std::string_view canonical);

// What the reader expects a serving form to be.
struct ServingFormExpectation {
  // The canonical file's storage key it must have been made from.
  std::string_view source;
  std::string_view encoder_fingerprint;
  // The serving dtype it must hold.
  c10::ScalarType dtype = c10::kFloat;
  // Off for bytes already verified once (the serving cache's host tier holds
  // only bytes verified when they were read from RocksDB).
  bool verify_digest = true;
};

// Decodes a serving form into an AdapterSet on `device` (tensors in the
// recorded dtype, one copy each; never requires grad). Errors:
//   DATA_LOSS "serving form '<source>' is corrupt: ..." when the digest does
//     not match (a flipped or truncated byte), or an intact blob is
//     inconsistent (tensor offsets, shapes, config);
//   FAILED_PRECONDITION "serving form '<source>' is stale: ..." when it is
//     intact but of another layout version, or made for another source,
//     encoder, dtype or geometry: rebuild it from the canonical file;
//   RESOURCE_EXHAUSTED / INTERNAL from LibTorch (out of memory).
absl::StatusOr<std::unique_ptr<AdapterSet>> DecodeServingForm(std::string_view bytes, const BertConfig& encoder_config,
                                                              c10::Device device, const ServingFormExpectation& expect);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_SERVING_FORM_H_
