#include "server/model/encoder_weights.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/sha256.h"
#include "server/model/bert_config.h"

namespace adapterd::model {

std::vector<std::pair<std::string, at::Tensor>> EncoderWeights::Named() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  out.emplace_back("embeddings.word_embeddings.weight", word_embeddings);
  out.emplace_back("embeddings.position_embeddings.weight", position_embeddings);
  out.emplace_back("embeddings.token_type_embeddings.weight", token_type_embeddings);
  out.emplace_back("embeddings.LayerNorm.weight", emb_ln_weight);
  out.emplace_back("embeddings.LayerNorm.bias", emb_ln_bias);
  for (size_t i = 0; i < layers.size(); ++i) {
    const EncoderLayerWeights& l = layers[i];
    const std::string p = absl::StrCat("encoder.layer.", i, ".");
    const int64_t d = l.qkv_weight.defined() ? l.qkv_weight.size(0) / 3 : 0;
    const char* kQkv[] = {"query", "key", "value"};
    for (int j = 0; j < 3; ++j) {
      out.emplace_back(absl::StrCat(p, "attention.self.", kQkv[j], ".weight"),
                       l.qkv_weight.narrow(0, j * d, d));
      out.emplace_back(absl::StrCat(p, "attention.self.", kQkv[j], ".bias"),
                       l.qkv_bias.narrow(0, j * d, d));
    }
    out.emplace_back(p + "attention.output.dense.weight", l.attn_out_weight);
    out.emplace_back(p + "attention.output.dense.bias", l.attn_out_bias);
    out.emplace_back(p + "attention.output.LayerNorm.weight", l.attn_ln_weight);
    out.emplace_back(p + "attention.output.LayerNorm.bias", l.attn_ln_bias);
    out.emplace_back(p + "intermediate.dense.weight", l.intermediate_weight);
    out.emplace_back(p + "intermediate.dense.bias", l.intermediate_bias);
    out.emplace_back(p + "output.dense.weight", l.output_weight);
    out.emplace_back(p + "output.dense.bias", l.output_bias);
    out.emplace_back(p + "output.LayerNorm.weight", l.output_ln_weight);
    out.emplace_back(p + "output.LayerNorm.bias", l.output_ln_bias);
  }
  if (has_pooler()) {
    out.emplace_back("pooler.dense.weight", pooler_weight);
    out.emplace_back("pooler.dense.bias", pooler_bias);
  }
  return out;
}

std::vector<at::Tensor> EncoderWeights::Tensors() const {
  std::vector<at::Tensor> out = {word_embeddings, position_embeddings, token_type_embeddings, emb_ln_weight,
                                 emb_ln_bias};
  for (const EncoderLayerWeights& l : layers) {
    out.insert(out.end(), {l.qkv_weight, l.qkv_bias, l.attn_out_weight, l.attn_out_bias, l.attn_ln_weight,
                           l.attn_ln_bias, l.intermediate_weight, l.intermediate_bias, l.output_weight,
                           l.output_bias, l.output_ln_weight, l.output_ln_bias});
  }
  if (has_pooler()) out.insert(out.end(), {pooler_weight, pooler_bias});
  return out;
}

struct EncoderFingerprinter::State {
  Sha256 hasher;
};

EncoderFingerprinter::EncoderFingerprinter(const BertConfig& config) : state_(std::make_unique<State>()) {
  state_->hasher.Update(absl::StrCat(
      "adapterd-encoder-v1 vocab=", config.vocab_size, " hidden=", config.hidden_size,
      " layers=", config.num_hidden_layers, " heads=", config.num_attention_heads,
      " ff=", config.intermediate_size, " pos=", config.max_position_embeddings,
      " types=", config.type_vocab_size, " eps=", config.layer_norm_eps, " act=", config.hidden_act, "\n"));
}

EncoderFingerprinter::~EncoderFingerprinter() = default;

void EncoderFingerprinter::Add(std::string_view name, std::string_view dtype_name,
                               std::span<const int64_t> shape, const void* data, size_t size) {
  state_->hasher.Update(absl::StrCat(std::string(name), "|", std::string(dtype_name), "|", absl::StrJoin(shape, ","), "|"));
  state_->hasher.Update(data, size);
}

std::string EncoderFingerprinter::Finish() { return absl::StrCat("sha256:", state_->hasher.HexDigest()); }

}  // namespace adapterd::model
