// Writes HuggingFace-format BERT directories (config.json, model.safetensors,
// vocab.txt, tokenizer_config.json), and generates random encoder weights.
// Used by adapterd-make-model, tests and benchmarks.
//
// Thread safety: free functions, no shared state.
#ifndef ADAPTERD_SERVER_MODEL_CHECKPOINT_WRITER_H_
#define ADAPTERD_SERVER_MODEL_CHECKPOINT_WRITER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/bert_config.h"
#include "server/model/encoder_weights.h"
#include "server/model/safetensors.h"

namespace adapterd::model {

// Random weights for `config`, deterministic for `seed`: matrices and
// embeddings ~ N(0, init_range) (HF's initializer_range), biases
// ~ N(0, init_range), LayerNorm gains ~ 1 + N(0, 0.1). Non-trivial biases and
// gains make tests catch mixed-up affines. fp32 on CPU; with a pooler.
absl::StatusOr<EncoderWeights> RandomEncoderWeights(const BertConfig& config, uint64_t seed, double init_range = 0.02);

struct HfWriteOptions {
  // "bert." prefix on every tensor name (as BertForPreTraining saves them).
  bool bert_prefix = false;
  // LayerNorm.gamma/.beta instead of .weight/.bias (TF-converted checkpoints).
  bool legacy_layer_norm_names = false;
  DType dtype = DType::kF32;
  bool do_lower_case = true;
  // Written after the encoder's tensors under exactly these names (e.g. the
  // "cls.predictions.*" MLM head of a pretrained checkpoint, which loaders of
  // the plain encoder ignore). Names must not collide with encoder tensors.
  std::vector<std::pair<std::string, at::Tensor>> extra_tensors;
};

// Writes the directory (created if needed; files replaced atomically).
absl::Status WriteHfCheckpoint(const std::string& dir, const BertConfig& config, const EncoderWeights& weights,
                               const std::vector<std::string>& vocab, const HfWriteOptions& options = {});

// The model.safetensors bytes alone.
absl::StatusOr<std::string> SerializeEncoderWeights(const EncoderWeights& weights, const HfWriteOptions& options = {});

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_CHECKPOINT_WRITER_H_
