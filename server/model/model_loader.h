// Loads a HuggingFace BERT directory: config.json, the weights, vocab.txt
// and (optional) tokenizer_config.json. The weights are model.safetensors,
// or where the directory has none, pytorch_model.bin (torch.save's zip
// format, read without running its pickle: torch_archive.h). Both give the
// same weights fingerprint for the same tensors, so adapters trained on one
// serve on the other. Sharded checkpoints (*.index.json) are not read.
//
// Tensor names: with or without the "bert." prefix, and LayerNorm
// gamma/beta as well as weight/bias. "cls.*" pre-training heads and the
// buffers "embeddings.position_ids"/"embeddings.token_type_ids" are ignored;
// any other tensor must be one config.json describes. Every shape is checked
// against config.json; a missing, mis-shaped, non-finite or undescribed
// tensor is INVALID_ARGUMENT naming it (as the checkpoint spells it).
//
// Thread safety: free functions; the result is owned by the caller.
#ifndef ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_
#define ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <map>
#include <memory>
#include <string>
#include <string_view>

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
  // BertEncoder::Options::reduced_residual_stream.
  bool reduced_residual_stream = false;
};

struct LoadedModel {
  BertConfig config;
  std::unique_ptr<BertEncoder> encoder;
  std::unique_ptr<BertTokenizer> tokenizer;
  // The model fingerprint (ComputeModelFingerprint), as encoder->fingerprint().
  std::string fingerprint;
  // "sha256:..." over the config and the checkpoint's encoder tensors only
  // (ComputeEncoderFingerprint), as encoder->weights_fingerprint().
  std::string weights_fingerprint;
};

// Loads `dir`. Errors name the file once and the problem: NOT_FOUND for a
// missing required file, INVALID_ARGUMENT for malformed content, a tensor
// holding NaN or Inf, or a checkpoint that disagrees with config.json.
absl::StatusOr<LoadedModel> LoadBertModel(const std::string& dir, const LoadOptions& options);

// The fingerprint adapters record (adapter format 2): "sha256:" + SHA-256
// over the weights fingerprint and everything that decides which ids a text
// becomes: the vocabulary (every token, in id order) and do_lower_case. Two
// servers with the same weights but a different vocab.txt or lower-casing
// get different fingerprints (docs/ADAPTER_FORMAT.md).
std::string ComputeModelFingerprint(std::string_view weights_fingerprint, const BertTokenizer& tokenizer);

// Resolves the encoder's tensors in a parsed checkpoint (on CPU, in the
// file's dtype cast to `dtype`) and computes the weights fingerprint of the
// stored bytes. The checkpoint must hold exactly what the config describes:
// a missing, mis-shaped or non-finite tensor, and a tensor the config does
// not describe (a layer past num_hidden_layers, an unknown name), are
// INVALID_ARGUMENT naming it. Ignored: HF's "cls.*" pre-training heads and
// the buffers "embeddings.position_ids" and "embeddings.token_type_ids".
// Exposed for tools and tests.
struct ResolvedWeights {
  EncoderWeights weights;
  std::string fingerprint;
};
// A checkpoint's tensors by name, from either file format (safetensors.h,
// torch_archive.h); `holder` keeps their bytes alive.
using CheckpointTensors = std::map<std::string, TensorView, std::less<>>;
absl::StatusOr<ResolvedWeights> ResolveEncoderWeights(const CheckpointTensors& tensors,
                                                      const std::shared_ptr<const void>& holder,
                                                      const BertConfig& config, c10::Device device,
                                                      c10::ScalarType dtype);
absl::StatusOr<ResolvedWeights> ResolveEncoderWeights(const SafetensorsFile& file, const BertConfig& config,
                                                      c10::Device device, c10::ScalarType dtype);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_MODEL_LOADER_H_
