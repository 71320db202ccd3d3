#include "tools/pretrain/mlm.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::pretrain {

MaskedBatch MaskTokens(const at::Tensor& input_ids, const MaskingSpec& spec, uint64_t seed) {
  MaskedBatch out;
  out.input_ids = input_ids.to(at::kLong).contiguous().clone();
  out.labels = at::full_like(out.input_ids, kIgnoreLabel);
  int64_t* ids = out.input_ids.data_ptr<int64_t>();
  int64_t* labels = out.labels.data_ptr<int64_t>();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int64_t> random_token(spec.first_normal_id, spec.vocab_size - 1);
  const int64_t n = out.input_ids.numel();
  for (int64_t i = 0; i < n; ++i) {
    // One draw per position whatever its id, so that the draws of a
    // position do not depend on the positions before it being maskable.
    const double select = unit(rng);
    const double how = unit(rng);
    const int64_t replacement = random_token(rng);
    if (ids[i] < spec.first_normal_id || select >= spec.select_prob) continue;
    labels[i] = ids[i];
    ++out.num_selected;
    if (how < spec.mask_prob) {
      ids[i] = spec.mask_id;
    } else if (how < spec.mask_prob + spec.random_prob) {
      ids[i] = replacement;
    }
  }
  return out;
}

MlmHead MlmHead::Random(const model::BertConfig& config, uint64_t seed, double init_range, c10::Device device) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const int64_t d = config.hidden_size;
  MlmHead h;
  h.dense_weight = at::normal(0.0, init_range, {d, d}, gen).to(device);
  h.dense_bias = at::zeros({d}, at::TensorOptions().device(device));
  h.ln_weight = at::ones({d}, at::TensorOptions().device(device));
  h.ln_bias = at::zeros({d}, at::TensorOptions().device(device));
  h.decoder_bias = at::zeros({config.vocab_size}, at::TensorOptions().device(device));
  return h;
}

absl::StatusOr<MlmHead> MlmHead::FromSafetensors(const model::SafetensorsFile& file, const model::BertConfig& config,
                                                 c10::Device device) {
  const int64_t d = config.hidden_size;
  auto read = [&](const std::string& name, const std::vector<int64_t>& shape) -> absl::StatusOr<at::Tensor> {
    const model::TensorView* v = file.Find(name);
    if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat("missing tensor '", name, "'"));
    if (v->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has the wrong shape"));
    }
    ASSIGN_OR_RETURN(at::Tensor t, model::ViewToTensor(*v, file.holder(), device, at::kFloat));
    return t;
  };
  MlmHead h;
  const std::string p = "cls.predictions.";
  ASSIGN_OR_RETURN(h.dense_weight, read(p + "transform.dense.weight", {d, d}));
  ASSIGN_OR_RETURN(h.dense_bias, read(p + "transform.dense.bias", {d}));
  ASSIGN_OR_RETURN(h.ln_weight, read(p + "transform.LayerNorm.weight", {d}));
  ASSIGN_OR_RETURN(h.ln_bias, read(p + "transform.LayerNorm.bias", {d}));
  ASSIGN_OR_RETURN(h.decoder_bias, read(p + "bias", {config.vocab_size}));
  return h;
}

std::vector<std::pair<std::string, at::Tensor>> MlmHead::Named() const {
  const std::string p = "cls.predictions.";
  return {{p + "bias", decoder_bias},
          {p + "transform.dense.weight", dense_weight},
          {p + "transform.dense.bias", dense_bias},
          {p + "transform.LayerNorm.weight", ln_weight},
          {p + "transform.LayerNorm.bias", ln_bias}};
}

std::vector<at::Tensor> MlmHead::Tensors() const {
  return {dense_weight, dense_bias, ln_weight, ln_bias, decoder_bias};
}

at::Tensor MlmHead::Logits(const at::Tensor& hidden, const at::Tensor& word_embeddings, double layer_norm_eps) const {
  at::Tensor t = at::gelu(at::linear(hidden, dense_weight, dense_bias));
  // In the weights' dtype: under CPU autocast the matmul above yields bf16,
  // and LibTorch's CPU layer_norm wants input and weights of one dtype.
  t = at::layer_norm(t.to(ln_weight.scalar_type()), {t.size(-1)}, ln_weight, ln_bias, layer_norm_eps);
  return at::linear(t, word_embeddings, decoder_bias);
}

}  // namespace adapterd::pretrain
