// Masked-language-model pieces of pretraining: BERT's masking rule and MLM
// head.
//
// Masking (Devlin et al. 2019): every position holding a normal token (not
// a special one: see MaskingSpec::first_normal_id) is selected independently with
// probability select_prob (15%); a selected token is replaced by [MASK] with
// probability mask_prob (80%), by a uniformly random non-special token with
// probability random_prob (10%), and left unchanged otherwise (10%). Labels
// are the original ids at selected positions and kIgnoreLabel elsewhere.
// Draws come from a std::mt19937_64 seeded by the caller, so a step's masks
// are a pure function of (seed, step): resuming reproduces them exactly.
//
// MLM head (HF BertLMPredictionHead): transform = LayerNorm(gelu(W h + b)),
// logits = transform . word_embeddings^T + decoder_bias; the decoder is tied
// to the word embeddings. Stored under HF's names:
//   cls.predictions.transform.dense.weight  [d, d]
//   cls.predictions.transform.dense.bias    [d]
//   cls.predictions.transform.LayerNorm.weight / .bias  [d]
//   cls.predictions.bias                    [vocab]
// (cls.predictions.decoder.weight is the tied embedding and is not stored;
// HF BertForMaskedLM re-ties it on load.)
//
// Thread safety: free functions and plain structs.
#ifndef ADAPTERD_TOOLS_PRETRAIN_MLM_H_
#define ADAPTERD_TOOLS_PRETRAIN_MLM_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/bert_config.h"
#include "server/model/safetensors.h"

namespace adapterd::pretrain {

inline constexpr int64_t kIgnoreLabel = -100;

struct MaskingSpec {
  double select_prob = 0.15;
  double mask_prob = 0.8;
  double random_prob = 0.1;
  int64_t mask_id = 0;
  // Ids below this are special tokens: never selected, never drawn as
  // random replacements (the built vocabularies put the 5 specials first).
  int64_t first_normal_id = 5;
  int64_t vocab_size = 0;
};

struct MaskedBatch {
  at::Tensor input_ids;  // [B, L] int64, with replacements applied
  at::Tensor labels;     // [B, L] int64, kIgnoreLabel where not selected
  int64_t num_selected = 0;
};

// Applies the rule to `input_ids` ([B, L] int64 on CPU). Positions with
// ids below spec.first_normal_id are never selected.
MaskedBatch MaskTokens(const at::Tensor& input_ids, const MaskingSpec& spec, uint64_t seed);

struct MlmHead {
  at::Tensor dense_weight, dense_bias;  // [d, d], [d]
  at::Tensor ln_weight, ln_bias;        // [d]
  at::Tensor decoder_bias;              // [vocab]

  // BERT's initialisation: dense ~ N(0, init_range), zero biases, LN 1/0.
  static MlmHead Random(const model::BertConfig& config, uint64_t seed, double init_range, c10::Device device);
  // Reads the cls.predictions.* tensors above from a checkpoint
  // (INVALID_ARGUMENT naming a missing or mis-shaped one), as fp32.
  static absl::StatusOr<MlmHead> FromSafetensors(const model::SafetensorsFile& file, const model::BertConfig& config,
                                                 c10::Device device);

  // Under the HF names above.
  std::vector<std::pair<std::string, at::Tensor>> Named() const;
  std::vector<at::Tensor> Tensors() const;

  // Logits [N, vocab] for hidden states [N, d].
  at::Tensor Logits(const at::Tensor& hidden, const at::Tensor& word_embeddings, double layer_norm_eps) const;
};

}  // namespace adapterd::pretrain

#endif  // ADAPTERD_TOOLS_PRETRAIN_MLM_H_
