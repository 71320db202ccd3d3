// The frozen BERT encoder with HF BertModel semantics, optionally adapted
// per row by task-specific parameters (docs/ARCHITECTURE.md, "The forward pass").
//
//   h0 = LN_emb(word[ids] + pos[0..L) + type[type_ids])
//   per layer:  a = Adapter_attn(O(attention(h)))   h' = LN_attn(a + h)
//               f = Adapter_ffn(W2 gelu(W1 h'))     h  = LN_out(f + h')
//   pooled = tanh(Wp h[CLS] + bp)   (h[CLS] when the checkpoint has no pooler)
//   logits = Head(pooled), or Head(h) per token for the task kinds whose
//   head reads every token (server/model/heads.h)
//
// Three entry points share one implementation:
//   - Forward(input): the plain encoder (no adapters, the encoder's own
//     LayerNorm affines, no logits; also the pretraining path);
//   - Forward(input, task): one task for every row; autograd flows into the
//     task's tensors when they require grad (the training path);
//   - Forward(input, stack, row_slots): mixed-task batches, row i adapted by
//     stack slot row_slots[i].
// Rows are independent: a row's outputs do not depend on the other rows of
// the batch or on their lengths (up to floating-point reassociation in GEMMs
// of different shapes).
//
// Errors: INVALID_ARGUMENT for malformed inputs (shapes, out-of-range ids,
// sequence longer than max_position_embeddings, bad slots); LibTorch errors
// are converted at this edge and never escape as exceptions.
//
// Thread safety: immutable after Create(); Forward() may run concurrently
// from many threads. The encoder's tensors never require grad and are never
// written (except for an encoder created with Options::trainable, which
// exists only for the full-fine-tuning baseline).
#ifndef ADAPTERD_SERVER_MODEL_BERT_ENCODER_H_
#define ADAPTERD_SERVER_MODEL_BERT_ENCODER_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/encoder_weights.h"
#include "server/model/tokenizer.h"

namespace adapterd::model {

// Token ids, token type ids and attention mask, each [B, L] integer tensors
// on any device (moved to the encoder's). Mask: 1 for real tokens, 0 for
// padding. token_type_ids and attention_mask may be undefined (zeros / ones).
struct EncoderInput {
  at::Tensor input_ids;
  at::Tensor token_type_ids;
  at::Tensor attention_mask;
};

// A padded batch (PadRows, tokenizer.h) as int64 [batch, seq_len] tensors
// on `device`.
EncoderInput ToEncoderInput(const EncodedBatch& batch, c10::Device device = c10::kCPU);

// How a mixed-task batch applies per-task parameters (docs/ARCHITECTURE.md, "server/model").
enum class MixedStrategy {
  kAuto,       // chosen per batch by the rule measured in docs/PERFORMANCE.md
  kGatherBmm,  // gather per-row weights from the stack, batched matmuls
  kSegments,   // sort rows by task, one GEMM per task segment
};

struct ForwardOptions {
  MixedStrategy strategy = MixedStrategy::kAuto;
  // Dropout with the config's rates (training); off at inference.
  bool train = false;
  // The caller has checked that input_ids and token_type_ids lie in the
  // vocabulary's and type vocabulary's ranges (on the host, before copying
  // them to the device): the forward skips its own check, which on device
  // tensors waits for the device. A forward with no such wait may be
  // captured in a CUDA graph. Out-of-range ids are then undefined behaviour.
  bool inputs_checked = false;
};

struct EncoderOutput {
  // fp32 for fp32, bf16 and fp16 encoders (a reduced-precision encoder keeps
  // its residual stream, LayerNorms and head in fp32; in its own dtype with
  // Options::reduced_residual_stream); fp64 for fp64.
  at::Tensor last_hidden_state;  // [B, L, d]
  at::Tensor pooled;             // [B, d]
  // [B, C] with C = the largest output count among the batch's tasks whose
  // head reads the pooled vector; a row's logits past its own task's count,
  // and every logit of a row whose task's head reads tokens, are -inf.
  // Undefined when no row's task reads the pooled vector (and for the plain
  // encoder).
  at::Tensor logits;
  // [B, L, C'] the same for the rows whose task's head reads every token
  // (token classification, extractive QA); -inf elsewhere. Undefined when
  // no row's task reads tokens.
  at::Tensor token_logits;
};

class BertEncoder {
 public:
  struct Options {
    // Must match where `weights` live; Create() moves them there otherwise.
    // device() reports where they landed ("cuda" becomes "cuda:0").
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    // Identifies the model adapters are trained for; adapter files record it
    // and refuse to load onto another. The loader sets the model
    // fingerprint (ComputeModelFingerprint: weights, config, vocabulary and
    // tokenizer settings); encoders built without a tokenizer (tests,
    // benchmarks) may use ComputeEncoderFingerprint or any label.
    std::string fingerprint;
    // The weights-only fingerprint (ComputeEncoderFingerprint) that adapter
    // files of format version 1 carry; empty = `fingerprint`.
    std::string weights_fingerprint;
    // Pretraining, baselines and benchmarks only (full fine-tuning): the
    // weights require grad and an optimiser may update them in place. Such
    // an encoder is not frozen, is not thread-safe under training, and must
    // never serve.
    bool trainable = false;
    // A bf16/fp16 encoder keeps its residual stream, LayerNorms and pooled
    // output in fp32 (false, the default). True keeps them in the encoder's
    // dtype, as transformers' bf16 BertModel does: less memory traffic per
    // layer (what a GPU's elementwise time is), but summing residuals in bf16
    // flipped 0.6-0.7% of held-out labels against fp32 on CPUs
    // (docs/PERFORMANCE.md, "bf16 serving" and "GPU"). No effect on fp32/fp64.
    bool reduced_residual_stream = false;
  };

  // Validates every tensor's shape against `config` (INVALID_ARGUMENT names
  // the tensor), moves them to options.device/dtype and freezes them.
  static absl::StatusOr<std::unique_ptr<BertEncoder>> Create(const BertConfig& config, EncoderWeights weights,
                                                             Options options);

  // The plain encoder. options.train enables dropout (pretraining; with a
  // trainable encoder autograd then reaches the weights); strategy is unused.
  absl::StatusOr<EncoderOutput> Forward(const EncoderInput& input, const ForwardOptions& options = {}) const;
  absl::StatusOr<EncoderOutput> Forward(const EncoderInput& input, const AdapterSet& task,
                                        const ForwardOptions& options = {}) const;
  absl::StatusOr<EncoderOutput> Forward(const EncoderInput& input, const AdapterStack& stack,
                                        std::span<const int64_t> row_slots, const ForwardOptions& options = {}) const;

  // The strategy kAuto picks for a batch of `batch` rows over `distinct_tasks`
  // tasks (exposed for benchmarks and tests).
  static MixedStrategy ChooseStrategy(int64_t batch, int64_t distinct_tasks, bool stack_can_gather, c10::Device device);

  const BertConfig& config() const { return config_; }
  const EncoderWeights& weights() const { return weights_; }
  c10::Device device() const { return options_.device; }
  c10::ScalarType dtype() const { return options_.dtype; }
  const std::string& fingerprint() const { return options_.fingerprint; }
  // What a format-1 adapter file must carry (Options::weights_fingerprint).
  const std::string& weights_fingerprint() const {
    return options_.weights_fingerprint.empty() ? options_.fingerprint : options_.weights_fingerprint;
  }
  bool trainable() const { return options_.trainable; }
  // Parameter count of the encoder (pooler included when present).
  int64_t NumParameters() const;

 private:
  class TaskOps;
  class PlainOps;
  class SegmentOps;
  class GatherOps;

  BertEncoder(BertConfig config, EncoderWeights weights, Options options)
      : config_(std::move(config)), weights_(std::move(weights)), options_(std::move(options)) {}

  absl::StatusOr<EncoderOutput> Run(const EncoderInput& input, const TaskOps& ops, const ForwardOptions& options) const;

  BertConfig config_;
  EncoderWeights weights_;
  Options options_;
};

// SHA-256 over the config and every encoder tensor (canonical name, dtype,
// shape, bytes in Named() order), as "sha256:<hex>". The loader computes the
// same value from the checkpoint's stored bytes.
absl::StatusOr<std::string> ComputeEncoderFingerprint(const BertConfig& config, const EncoderWeights& weights);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_BERT_ENCODER_H_
