// BERT architecture hyperparameters, as in a HuggingFace config.json.
//
// Thread safety: plain value type.
#ifndef ADAPTERD_SERVER_MODEL_BERT_CONFIG_H_
#define ADAPTERD_SERVER_MODEL_BERT_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace adapterd::model {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  // Only "gelu" (exact erf GELU, HF's default for BERT) is supported.
  std::string hidden_act = "gelu";
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;

  int64_t head_dim() const { return hidden_size / num_attention_heads; }

  // OK iff every size is positive, hidden_size divides by the head count,
  // the activation is supported and the rates are in [0, 1).
  absl::Status Validate() const;

  // Parses config.json text. Unknown keys are ignored (HF configs carry
  // many); present keys must have the right JSON type. Validates.
  static absl::StatusOr<BertConfig> FromJson(std::string_view json);
  // HF-compatible config.json ("model_type": "bert", architectures BertModel).
  std::string ToJson() const;

  // Named presets: "tiny" (2 layers, 128 hidden, 2 heads; like
  // google/bert_uncased_L-2_H-128_A-2), "mini" (4/256/4), "small" (4/512/8),
  // "base" (12/768/12), "large" (24/1024/16). vocab_size is left as given.
  static absl::StatusOr<BertConfig> Preset(std::string_view name, int64_t vocab_size);

  bool operator==(const BertConfig&) const = default;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_BERT_CONFIG_H_
