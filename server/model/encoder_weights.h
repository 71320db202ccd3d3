// The frozen encoder's tensors, in HF BertModel structure.
//
// Ownership: plain value type holding at::Tensor handles (reference counted).
// The encoder never writes them; they have requires_grad == false.
#ifndef ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_
#define ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace adapterd::model {

struct BertConfig;

struct EncoderLayerWeights {
  // Query, key and value projections fused row-wise: [3d, d] and [3d], in
  // q, k, v order, so attention runs one GEMM instead of three.
  at::Tensor qkv_weight, qkv_bias;
  at::Tensor attn_out_weight, attn_out_bias;        // [d, d], [d]
  at::Tensor attn_ln_weight, attn_ln_bias;          // [d]
  at::Tensor intermediate_weight, intermediate_bias;  // [ff, d], [ff]
  at::Tensor output_weight, output_bias;            // [d, ff], [d]
  at::Tensor output_ln_weight, output_ln_bias;      // [d]
};

struct EncoderWeights {
  at::Tensor word_embeddings;        // [vocab, d]
  at::Tensor position_embeddings;    // [max_pos, d]
  at::Tensor token_type_embeddings;  // [type_vocab, d]
  at::Tensor emb_ln_weight, emb_ln_bias;  // [d]
  std::vector<EncoderLayerWeights> layers;
  // Undefined tensors when the checkpoint has no pooler; the encoder then
  // uses h[CLS] as the pooled output.
  at::Tensor pooler_weight, pooler_bias;  // [d, d], [d]

  bool has_pooler() const { return pooler_weight.defined(); }

  // Every tensor under its canonical HF name (no "bert." prefix,
  // LayerNorm.weight/.bias), in a fixed order: embeddings, layers, pooler.
  // Q, K and V appear as views of the fused tensors.
  std::vector<std::pair<std::string, at::Tensor>> Named() const;
  // The underlying tensors (the fused QKV ones, not views), for the
  // full-fine-tuning baseline's optimiser.
  std::vector<at::Tensor> Tensors() const;
};

// Builds an encoder's fingerprint: SHA-256 over the architecture and every
// tensor (canonical name, safetensors dtype name, shape, raw bytes), fed in
// EncoderWeights::Named() order. The loader feeds the checkpoint's stored
// bytes; ComputeEncoderFingerprint (bert_encoder.h) feeds in-memory tensors;
// both agree when the dtypes agree. Not thread-safe; one per computation.
class EncoderFingerprinter {
 public:
  explicit EncoderFingerprinter(const BertConfig& config);
  ~EncoderFingerprinter();
  void Add(std::string_view name, std::string_view dtype_name, std::span<const int64_t> shape,
           const void* data, size_t size);
  // "sha256:<hex>". Call once.
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_
