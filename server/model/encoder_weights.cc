#include "server/model/encoder_weights.h"

#include <ATen/ATen.h>

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/sha256.h"
#include "server/model/bert_config.h"

namespace adapterd::model {

namespace {

using D = EncoderDim;
using R = EncoderTensorRole;
using W = EncoderWeights;
using L = EncoderLayerWeights;

constexpr EncoderTensorSpec kSpecs[] = {
    {"embeddings.word_embeddings.weight", &W::word_embeddings, nullptr, D::kVocab, D::kHidden, R::kMatrix},
    {"embeddings.position_embeddings.weight", &W::position_embeddings, nullptr, D::kPositions, D::kHidden, R::kMatrix},
    {"embeddings.token_type_embeddings.weight", &W::token_type_embeddings, nullptr, D::kTokenTypes, D::kHidden,
     R::kMatrix},
    {"embeddings.LayerNorm.weight", &W::emb_ln_weight, nullptr, D::kHidden, std::nullopt, R::kLayerNormGain},
    {"embeddings.LayerNorm.bias", &W::emb_ln_bias, nullptr, D::kHidden, std::nullopt, R::kLayerNormBias},
    {"attention.self.{}.weight", nullptr, &L::qkv_weight, D::kHidden, D::kHidden, R::kMatrix, true},
    {"attention.self.{}.bias", nullptr, &L::qkv_bias, D::kHidden, std::nullopt, R::kBias, true},
    {"attention.output.dense.weight", nullptr, &L::attn_out_weight, D::kHidden, D::kHidden, R::kMatrix},
    {"attention.output.dense.bias", nullptr, &L::attn_out_bias, D::kHidden, std::nullopt, R::kBias},
    {"attention.output.LayerNorm.weight", nullptr, &L::attn_ln_weight, D::kHidden, std::nullopt, R::kLayerNormGain},
    {"attention.output.LayerNorm.bias", nullptr, &L::attn_ln_bias, D::kHidden, std::nullopt, R::kLayerNormBias},
    {"intermediate.dense.weight", nullptr, &L::intermediate_weight, D::kIntermediate, D::kHidden, R::kMatrix},
    {"intermediate.dense.bias", nullptr, &L::intermediate_bias, D::kIntermediate, std::nullopt, R::kBias},
    {"output.dense.weight", nullptr, &L::output_weight, D::kHidden, D::kIntermediate, R::kMatrix},
    {"output.dense.bias", nullptr, &L::output_bias, D::kHidden, std::nullopt, R::kBias},
    {"output.LayerNorm.weight", nullptr, &L::output_ln_weight, D::kHidden, std::nullopt, R::kLayerNormGain},
    {"output.LayerNorm.bias", nullptr, &L::output_ln_bias, D::kHidden, std::nullopt, R::kLayerNormBias},
    {"pooler.dense.weight", &W::pooler_weight, nullptr, D::kHidden, D::kHidden, R::kMatrix, false, true},
    {"pooler.dense.bias", &W::pooler_bias, nullptr, D::kHidden, std::nullopt, R::kBias, false, true},
};

int64_t Size(EncoderDim dim, const BertConfig& c) {
  switch (dim) {
    case D::kVocab:
      return c.vocab_size;
    case D::kPositions:
      return c.max_position_embeddings;
    case D::kTokenTypes:
      return c.type_vocab_size;
    case D::kHidden:
      return c.hidden_size;
    case D::kIntermediate:
      return c.intermediate_size;
  }
  return 0;
}

}  // namespace

std::vector<int64_t> EncoderTensorSpec::Shape(const BertConfig& config, bool one_of_qkv) const {
  std::vector<int64_t> shape = {Size(rows, config) * (fused_qkv && !one_of_qkv ? 3 : 1)};
  if (cols.has_value()) shape.push_back(Size(*cols, config));
  return shape;
}

std::span<const EncoderTensorSpec> EncoderTensorSpecs() { return kSpecs; }

std::string CheckpointName(const EncoderTensorSpec& spec, int64_t layer, int part) {
  static constexpr const char* kParts[] = {"query", "key", "value"};
  std::string name(spec.name);
  if (spec.fused_qkv) name = absl::StrReplaceAll(name, {{"{}", part < 0 ? "{query,key,value}" : kParts[part]}});
  return spec.layer != nullptr ? absl::StrCat("encoder.layer.", layer, ".", name) : name;
}

void ForEachEncoderTensor(int64_t num_layers, bool has_pooler,
                          const std::function<void(const EncoderTensorSpec&, int64_t layer)>& fn) {
  for (const EncoderTensorSpec& spec : kSpecs) {
    if (spec.layer == nullptr && !spec.pooler) fn(spec, -1);
  }
  for (int64_t i = 0; i < num_layers; ++i) {
    for (const EncoderTensorSpec& spec : kSpecs) {
      if (spec.layer != nullptr) fn(spec, i);
    }
  }
  if (has_pooler) {
    for (const EncoderTensorSpec& spec : kSpecs) {
      if (spec.pooler) fn(spec, -1);
    }
  }
}

void ForEachCheckpointTensor(
    int64_t num_layers, bool has_pooler,
    const std::function<void(const std::string& name, const EncoderTensorSpec&, int64_t layer, int part)>& fn) {
  std::vector<std::pair<const EncoderTensorSpec*, int64_t>> fused;
  ForEachEncoderTensor(num_layers, has_pooler, [&](const EncoderTensorSpec& spec, int64_t layer) {
    if (!spec.fused_qkv) {
      fn(CheckpointName(spec, layer), spec, layer, -1);
      return;
    }
    // The fused specs come in a run: each projection's weight, then its bias.
    fused.emplace_back(&spec, layer);
    const EncoderTensorSpec* next = &spec + 1;
    if (next != std::end(kSpecs) && next->fused_qkv) return;
    for (int part = 0; part < 3; ++part) {
      for (const auto& [s, l] : fused) {
        fn(CheckpointName(*s, l, part), *s, l, part);
      }
    }
    fused.clear();
  });
}

int64_t CheckpointTensorCount(int64_t num_layers, bool has_pooler) {
  int64_t n = 0;
  ForEachCheckpointTensor(num_layers, has_pooler,
                          [&](const std::string&, const EncoderTensorSpec&, int64_t, int) { ++n; });
  return n;
}

at::Tensor& TensorOf(EncoderWeights& w, const EncoderTensorSpec& spec, int64_t layer) {
  return spec.layer != nullptr ? w.layers[static_cast<size_t>(layer)].*spec.layer : w.*spec.top;
}

const at::Tensor& TensorOf(const EncoderWeights& w, const EncoderTensorSpec& spec, int64_t layer) {
  return spec.layer != nullptr ? w.layers[static_cast<size_t>(layer)].*spec.layer : w.*spec.top;
}

std::vector<std::pair<std::string, at::Tensor>> EncoderWeights::Named() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  ForEachCheckpointTensor(static_cast<int64_t>(layers.size()), has_pooler(),
                          [&](const std::string& name, const EncoderTensorSpec& spec, int64_t layer, int part) {
                            const at::Tensor& t = TensorOf(*this, spec, layer);
                            if (part < 0 || !t.defined()) {
                              out.emplace_back(name, t);
                            } else {
                              const int64_t d = t.size(0) / 3;
                              out.emplace_back(name, t.narrow(0, part * d, d));
                            }
                          });
  return out;
}

std::vector<at::Tensor> EncoderWeights::Tensors() const {
  std::vector<at::Tensor> out;
  ForEachEncoderTensor(
      static_cast<int64_t>(layers.size()), has_pooler(),
      [&](const EncoderTensorSpec& spec, int64_t layer) { out.push_back(TensorOf(*this, spec, layer)); });
  return out;
}

std::vector<at::Tensor*> EncoderWeights::MutableTensors() {
  std::vector<at::Tensor*> out;
  ForEachEncoderTensor(
      static_cast<int64_t>(layers.size()), has_pooler(),
      [&](const EncoderTensorSpec& spec, int64_t layer) { out.push_back(&TensorOf(*this, spec, layer)); });
  return out;
}

struct EncoderFingerprinter::State {
  Sha256 hasher;
};

EncoderFingerprinter::EncoderFingerprinter(const BertConfig& config) : state_(std::make_unique<State>()) {
  state_->hasher.Update(absl::StrCat("adapterd-encoder-v1 vocab=", config.vocab_size, " hidden=", config.hidden_size,
                                     " layers=", config.num_hidden_layers, " heads=", config.num_attention_heads,
                                     " ff=", config.intermediate_size, " pos=", config.max_position_embeddings,
                                     " types=", config.type_vocab_size, " eps=", config.layer_norm_eps,
                                     " act=", config.hidden_act, "\n"));
}

EncoderFingerprinter::~EncoderFingerprinter() = default;

void EncoderFingerprinter::Add(std::string_view name, std::string_view dtype_name, std::span<const int64_t> shape,
                               const void* data, size_t size) {
  state_->hasher.Update(
      absl::StrCat(std::string(name), "|", std::string(dtype_name), "|", absl::StrJoin(shape, ","), "|"));
  state_->hasher.Update(data, size);
}

std::string EncoderFingerprinter::Finish() { return absl::StrCat("sha256:", state_->hasher.HexDigest()); }

}  // namespace adapterd::model
