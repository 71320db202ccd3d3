// The frozen encoder's tensors, in HF BertModel structure.
//
// Ownership: plain value type holding at::Tensor handles (reference counted).
// The encoder never writes them; they have requires_grad == false.
#ifndef ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_
#define ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  at::Tensor attn_out_weight, attn_out_bias;          // [d, d], [d]
  at::Tensor attn_ln_weight, attn_ln_bias;            // [d]
  at::Tensor intermediate_weight, intermediate_bias;  // [ff, d], [ff]
  at::Tensor output_weight, output_bias;              // [d, ff], [d]
  at::Tensor output_ln_weight, output_ln_bias;        // [d]
};

struct EncoderWeights {
  at::Tensor word_embeddings;             // [vocab, d]
  at::Tensor position_embeddings;         // [max_pos, d]
  at::Tensor token_type_embeddings;       // [type_vocab, d]
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
  // The underlying tensors (the fused QKV ones, not views), in the same
  // order: for placing them and for the full-fine-tuning baseline's
  // optimiser.
  std::vector<at::Tensor> Tensors() const;
  std::vector<at::Tensor*> MutableTensors();
};

// --- The tensor table --------------------------------------------------------
// Every tensor of a BERT encoder, once: where it lives in EncoderWeights,
// its canonical HF name, its shape in terms of the config, and what it is.
// Everything that lists the encoder's tensors reads this table: Named() and
// Tensors(), BertEncoder::Create's shape checks, the loader's expected
// tensors and its assembly of the fused QKV projection, RandomEncoderWeights
// and full fine-tuning's choice of tensors.

// A dimension of a tensor's shape.
enum class EncoderDim { kVocab, kPositions, kTokenTypes, kHidden, kIntermediate };

enum class EncoderTensorRole {
  kMatrix,         // embedding tables and projection weights
  kBias,           // projection biases
  kLayerNormGain,  // LayerNorm.weight
  kLayerNormBias,  // LayerNorm.bias
};

struct EncoderTensorSpec {
  // The canonical name; a layer's is relative to "encoder.layer.<i>.". The
  // fused query/key/value tensors are one entry each (weight, bias) whose
  // name holds "{}" where the file says query, key or value.
  std::string_view name;
  // Exactly one of the two is set.
  at::Tensor EncoderWeights::*top = nullptr;
  at::Tensor EncoderLayerWeights::*layer = nullptr;
  // One or two dimensions (the second is absent when rank is 1). A fused
  // QKV tensor's first dimension is three times kHidden.
  EncoderDim rows = EncoderDim::kHidden;
  std::optional<EncoderDim> cols;
  EncoderTensorRole role = EncoderTensorRole::kMatrix;
  bool fused_qkv = false;
  bool pooler = false;  // absent from checkpoints without a pooler

  // The shape under `config`: the fused tensor's, or with `one_of_qkv` one
  // projection's (its stored shape in a checkpoint).
  std::vector<int64_t> Shape(const BertConfig& config, bool one_of_qkv = false) const;
};

// The table: the embeddings' 5, then one layer's 12 (the fused QKV weight
// and bias first), then the pooler's 2.
std::span<const EncoderTensorSpec> EncoderTensorSpecs();

// Calls fn(spec, layer) for every tensor of an encoder with `num_layers`
// layers, in table order (a layer's entries once per layer; `layer` is -1
// for the embeddings and the pooler; the pooler only when `has_pooler`).
void ForEachEncoderTensor(int64_t num_layers, bool has_pooler,
                          const std::function<void(const EncoderTensorSpec&, int64_t layer)>& fn);
// Calls fn(name, spec, layer, part) for every tensor a checkpoint stores, in
// canonical order (Named()'s): a fused spec's query, key and value, each
// weight followed by its bias, are part 0, 1 and 2; other tensors part -1.
void ForEachCheckpointTensor(
    int64_t num_layers, bool has_pooler,
    const std::function<void(const std::string& name, const EncoderTensorSpec&, int64_t layer, int part)>& fn);

// How many tensors a checkpoint of `num_layers` layers stores (what
// ForEachCheckpointTensor visits).
int64_t CheckpointTensorCount(int64_t num_layers, bool has_pooler);

// The full canonical name of `spec` in layer `layer` (ignored outside the
// layers); for a fused spec, `part` 0, 1, 2 names the query, key or value
// projection, and -1 all three ("...attention.self.{query,key,value}.weight").
std::string CheckpointName(const EncoderTensorSpec& spec, int64_t layer, int part = -1);

// The tensor `spec` names in `w` (for a layer's spec, in layer `layer`).
at::Tensor& TensorOf(EncoderWeights& w, const EncoderTensorSpec& spec, int64_t layer);
const at::Tensor& TensorOf(const EncoderWeights& w, const EncoderTensorSpec& spec, int64_t layer);

// Builds an encoder's fingerprint: SHA-256 over the architecture and every
// tensor (canonical name, safetensors dtype name, shape, raw bytes), fed in
// EncoderWeights::Named() order. The loader feeds the checkpoint's stored
// bytes; ComputeEncoderFingerprint (bert_encoder.h) feeds in-memory tensors;
// both agree when the dtypes agree. Not thread-safe; one per computation.
class EncoderFingerprinter {
 public:
  explicit EncoderFingerprinter(const BertConfig& config);
  ~EncoderFingerprinter();
  void Add(std::string_view name, std::string_view dtype_name, std::span<const int64_t> shape, const void* data,
           size_t size);
  // "sha256:<hex>". Call once.
  std::string Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ENCODER_WEIGHTS_H_
