// Loads a HuggingFace BERT directory: config.json, model.safetensors,
// vocab.txt and (optional) tokenizer_config.json.
//
// Tensor names: with or without the "bert." prefix, and LayerNorm
// gamma/beta as well as weight/bias. "cls.*" pre-training heads and buffers
// such as "embeddings.position_ids" are ignored. Every shape is checked
// against config.json; a missing or mis-shaped tensor is INVALID_ARGUMENT
// naming it (as the checkpoint would spell it, canonical form).
//
// Thread safety: free functions; the result is owned by the caller.
#ifndef ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_
#define ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/bert_config.h"
#include "server/model/bert_encoder.h"
#include "server/model/encoder_weights.h"
#include "server/model/safetensors.h"
#include "server/model/tokenizer.h"

namespace adapterd::model {

struct LoadOptions {
  c10::Device device = c10::Device(c10::kCPU);
  c10::ScalarType dtype = c10::kFloat;
  // Tokenizer truncation length (clamped to max_position_embeddings).
  int max_seq_len = 128;
};

struct LoadedModel {
  BertConfig config;
  std::unique_ptr<BertEncoder> encoder;
  std::unique_ptr<BertTokenizer> tokenizer;
  // "sha256:..." over the config and the checkpoint's encoder tensors.
  std::string fingerprint;
};

// Loads `dir`. Errors name the file and the problem: NOT_FOUND for a missing
// required file, INVALID_ARGUMENT for malformed content.
absl::StatusOr<LoadedModel> LoadBertModel(const std::string& dir, const LoadOptions& options);

// Resolves the encoder's tensors in a parsed checkpoint (on CPU, in the
// file's dtype cast to `dtype`) and computes the fingerprint of the stored
// bytes. Exposed for tools and tests.
struct ResolvedWeights {
  EncoderWeights weights;
  std::string fingerprint;
};
absl::StatusOr<ResolvedWeights> ResolveEncoderWeights(const SafetensorsFile& file, const BertConfig& config,
                                                      c10::Device device, c10::ScalarType dtype);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_
