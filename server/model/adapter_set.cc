#include "server/model/adapter_set.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/model/adapter_slab.h"
#include "server/model/tensor_io.h"
#include "server/model/text_pieces.h"

namespace adapterd::model {
namespace {

// N(0, std) truncated at 2 std by resampling, as TF's truncated_normal_initializer
// (the paper's code) does. Drawn on CPU so a seed gives the same values on any device.
at::Tensor TruncatedNormal(at::IntArrayRef shape, double std, at::Generator& gen) {
  at::Tensor t = at::empty(shape, at::kFloat);
  t.normal_(0.0, std, gen);
  if (std <= 0) return t.zero_();
  for (int round = 0; round < 64; ++round) {
    at::Tensor bad = t.abs() > 2.0 * std;
    if (!bad.any().item<bool>()) break;
    at::Tensor fresh = at::empty(shape, at::kFloat).normal_(0.0, std, gen);
    t = at::where(bad, fresh, t);
  }
  // Any survivor after 64 rounds (probability ~0.05^64) is clamped.
  return t.clamp_(-2.0 * std, 2.0 * std);
}

absl::Status CheckShape(const at::Tensor& t, at::IntArrayRef want, const std::string& name) {
  if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat("adapter tensor '", name, "' is missing"));
  if (t.sizes() != want) {
    return absl::InvalidArgumentError(absl::StrCat("adapter tensor '", name, "' has shape [",
                                                   absl::StrJoin(t.sizes(), ","), "], expected [",
                                                   absl::StrJoin(want, ","), "]"));
  }
  if (!at::isFloatingType(t.scalar_type())) {
    return absl::InvalidArgumentError(absl::StrCat("adapter tensor '", name, "' is not floating point"));
  }
  return absl::OkStatus();
}

void AppendAdapter(std::vector<std::pair<std::string, at::Tensor>>& out, const std::string& prefix,
                   const BottleneckAdapter& a) {
  out.emplace_back(prefix + ".down.weight", a.down_weight);
  out.emplace_back(prefix + ".down.bias", a.down_bias);
  out.emplace_back(prefix + ".up.weight", a.up_weight);
  out.emplace_back(prefix + ".up.bias", a.up_bias);
}

void AppendLn(std::vector<std::pair<std::string, at::Tensor>>& out, const std::string& prefix,
              const LayerNormAffine& ln) {
  out.emplace_back(prefix + ".weight", ln.weight);
  out.emplace_back(prefix + ".bias", ln.bias);
}

// `t` padded at its end by `pad` (at::constant_pad_nd's layout) with
// `value`; `t` itself when nothing is padded. AdapterStack::Create stacks
// the result, and at::stack copies once: a zero pad would be one more copy
// (on a GPU, one more kernel launch per tensor per task per batch).
at::Tensor PadIfNeeded(const at::Tensor& t, std::vector<int64_t> pad, double value = 0) {
  if (std::all_of(pad.begin(), pad.end(), [](int64_t p) { return p == 0; })) return t;
  return at::constant_pad_nd(t, pad, value);
}

LayerNormAffine CopyLn(const at::Tensor& w, const at::Tensor& b, c10::Device device) {
  return {w.detach().to(device, at::kFloat, false, true), b.detach().to(device, at::kFloat, false, true)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdapterSet>> AdapterSet::CreateInitialized(const BertConfig& encoder_config,
                                                                          const EncoderWeights& encoder,
                                                                          const AdapterConfig& config, uint64_t seed,
                                                                          c10::Device device) {
  RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(encoder.layers.size()) != encoder_config.num_hidden_layers) {
    return absl::InvalidArgumentError("encoder weights do not match the encoder config");
  }
  return GuardTorch("initialise adapters", [&]() -> absl::StatusOr<std::unique_ptr<AdapterSet>> {
    const int64_t d = encoder_config.hidden_size;
    const int64_t m = config.bottleneck_size;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto init_adapter = [&]() {
      BottleneckAdapter a;
      a.down_weight = TruncatedNormal({m, d}, config.init_std, gen).to(device);
      a.down_bias = at::zeros({m}, at::TensorOptions().device(device));
      a.up_weight = TruncatedNormal({d, m}, config.init_std, gen).to(device);
      a.up_bias = at::zeros({d}, at::TensorOptions().device(device));
      return a;
    };
    auto set = std::unique_ptr<AdapterSet>(new AdapterSet());
    set->config_ = config;
    set->embedding_layer_norm_ = CopyLn(encoder.emb_ln_weight, encoder.emb_ln_bias, device);
    for (const EncoderLayerWeights& l : encoder.layers) {
      AdapterLayer layer;
      layer.attention_adapter = init_adapter();
      layer.attention_layer_norm = CopyLn(l.attn_ln_weight, l.attn_ln_bias, device);
      layer.ffn_adapter = init_adapter();
      layer.output_layer_norm = CopyLn(l.output_ln_weight, l.output_ln_bias, device);
      set->layers_.push_back(std::move(layer));
    }
    set->head_weight_ = TruncatedNormal({config.num_outputs(), d}, 0.02, gen).to(device);
    set->head_bias_ = at::zeros({config.num_outputs()}, at::TensorOptions().device(device));
    return set;
  });
}

absl::StatusOr<std::unique_ptr<AdapterSet>> AdapterSet::FromParts(const BertConfig& encoder_config,
                                                                  AdapterConfig config,
                                                                  LayerNormAffine embedding_layer_norm,
                                                                  std::vector<AdapterLayer> layers,
                                                                  at::Tensor head_weight, at::Tensor head_bias) {
  RETURN_IF_ERROR(config.Validate());
  const int64_t d = encoder_config.hidden_size;
  const int64_t m = config.bottleneck_size;
  if (static_cast<int64_t>(layers.size()) != encoder_config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter set has ", layers.size(), " layers, the encoder has ", encoder_config.num_hidden_layers));
  }
  auto set = std::unique_ptr<AdapterSet>(new AdapterSet());
  set->config_ = std::move(config);
  set->embedding_layer_norm_ = std::move(embedding_layer_norm);
  set->layers_ = std::move(layers);
  set->head_weight_ = std::move(head_weight);
  set->head_bias_ = std::move(head_bias);
  // Check every tensor by its format name, so errors name what a file calls it.
  for (const auto& [name, t] : set->Named()) {
    std::vector<int64_t> want;
    if (name.ends_with("down.weight")) {
      want = {m, d};
    } else if (name.ends_with("down.bias")) {
      want = {m};
    } else if (name.ends_with("up.weight")) {
      want = {d, m};
    } else if (name == "head.weight") {
      want = {set->config_.num_outputs(), d};
    } else if (name == "head.bias") {
      want = {set->config_.num_outputs()};
    } else {
      want = {d};  // up.bias and LayerNorm affines
    }
    RETURN_IF_ERROR(CheckShape(t, want, name));
  }
  return set;
}

absl::StatusOr<std::unique_ptr<AdapterSet>> AdapterSet::FromNamedOrder(const BertConfig& encoder_config,
                                                                       AdapterConfig config,
                                                                       std::vector<at::Tensor> tensors) {
  // Named(): the embedding LayerNorm (2), per layer an adapter (4), a
  // LayerNorm (2), an adapter (4) and a LayerNorm (2), then the head (2).
  constexpr size_t kPerLayer = 12;
  const auto num_layers = static_cast<size_t>(encoder_config.num_hidden_layers);
  if (tensors.size() != 4 + kPerLayer * num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("an adapter set of ", num_layers, " layers has ",
                                                   4 + kPerLayer * num_layers, " tensors, not ", tensors.size()));
  }
  auto next = tensors.begin();
  auto take_adapter = [&] {
    BottleneckAdapter a{next[0], next[1], next[2], next[3]};
    next += 4;
    return a;
  };
  auto take_ln = [&] {
    LayerNormAffine ln{next[0], next[1]};
    next += 2;
    return ln;
  };
  LayerNormAffine emb = take_ln();
  std::vector<AdapterLayer> layers(num_layers);
  for (AdapterLayer& l : layers) {
    l.attention_adapter = take_adapter();
    l.attention_layer_norm = take_ln();
    l.ffn_adapter = take_adapter();
    l.output_layer_norm = take_ln();
  }
  at::Tensor head_weight = next[0], head_bias = next[1];
  return FromParts(encoder_config, std::move(config), std::move(emb), std::move(layers), std::move(head_weight),
                   std::move(head_bias));
}

std::vector<std::pair<std::string, at::Tensor>> AdapterSet::Named() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  AppendLn(out, "embeddings.layer_norm", embedding_layer_norm_);
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    AppendAdapter(out, p + "attention_adapter", layers_[i].attention_adapter);
    AppendLn(out, p + "attention_layer_norm", layers_[i].attention_layer_norm);
    AppendAdapter(out, p + "ffn_adapter", layers_[i].ffn_adapter);
    AppendLn(out, p + "output_layer_norm", layers_[i].output_layer_norm);
  }
  out.emplace_back("head.weight", head_weight_);
  out.emplace_back("head.bias", head_bias_);
  return out;
}

std::vector<at::Tensor> AdapterSet::Parameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, t] : Named()) out.push_back(t);
  return out;
}

int64_t AdapterSet::NumParameters() const {
  int64_t n = 0;
  for (const at::Tensor& t : Parameters()) n += t.numel();
  return n;
}

std::vector<at::Tensor> AdapterSet::DecayedParameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, t] : Named()) {
    if (name.ends_with(".weight") && name.find("layer_norm") == std::string::npos) out.push_back(t);
  }
  return out;
}

std::vector<at::Tensor> AdapterSet::UndecayedParameters() const {
  std::vector<at::Tensor> out;
  for (auto& [name, t] : Named()) {
    if (!(name.ends_with(".weight") && name.find("layer_norm") == std::string::npos)) out.push_back(t);
  }
  return out;
}

void AdapterSet::SetRequiresGrad(bool requires_grad) {
  for (at::Tensor& t : Parameters()) t.requires_grad_(requires_grad);
}

absl::StatusOr<std::unique_ptr<AdapterSet>> AdapterSet::Clone(c10::Device device, c10::ScalarType dtype) const {
  return GuardTorch("clone adapter set", [&]() -> absl::StatusOr<std::unique_ptr<AdapterSet>> {
    auto copy = [&](const at::Tensor& t) { return t.detach().to(device, dtype, false, /*copy=*/true); };
    auto copy_adapter = [&](const BottleneckAdapter& a) {
      return BottleneckAdapter{copy(a.down_weight), copy(a.down_bias), copy(a.up_weight), copy(a.up_bias)};
    };
    auto copy_ln = [&](const LayerNormAffine& ln) { return LayerNormAffine{copy(ln.weight), copy(ln.bias)}; };
    auto set = std::unique_ptr<AdapterSet>(new AdapterSet());
    set->config_ = config_;
    set->embedding_layer_norm_ = copy_ln(embedding_layer_norm_);
    for (const AdapterLayer& l : layers_) {
      set->layers_.push_back({copy_adapter(l.attention_adapter), copy_ln(l.attention_layer_norm),
                              copy_adapter(l.ffn_adapter), copy_ln(l.output_layer_norm)});
    }
    set->head_weight_ = copy(head_weight_);
    set->head_bias_ = copy(head_bias_);
    return set;
  });
}

int64_t AdapterSet::ByteSize() const {
  int64_t n = 0;
  for (const at::Tensor& t : Parameters()) n += t.numel() * static_cast<int64_t>(t.element_size());
  return n;
}

absl::StatusOr<std::shared_ptr<const AdapterStack>> AdapterStack::Create(
    std::span<const std::shared_ptr<const AdapterSet>> sets, const BertConfig& encoder_config, c10::Device device,
    c10::ScalarType dtype, bool build_gather_tensors) {
  if (sets.empty()) return absl::InvalidArgumentError("an adapter stack needs at least one set");
  auto stack = std::shared_ptr<AdapterStack>(new AdapterStack());
  int64_t max_m = 0;
  ASSIGN_OR_RETURN(const bool can_gather, stack->AdoptSlots(sets, encoder_config, device, dtype, &max_m));
  if (build_gather_tensors && can_gather)
    RETURN_IF_ERROR(stack->BuildGatherTensors(encoder_config, device, dtype, max_m));
  return std::shared_ptr<const AdapterStack>(stack);
}

absl::StatusOr<bool> AdapterStack::AdoptSlots(std::span<const std::shared_ptr<const AdapterSet>> sets,
                                              const BertConfig& encoder_config, c10::Device device,
                                              c10::ScalarType dtype, int64_t* max_m) {
  bool one_activation = true;
  // Gathered heads are over the pooled vector: a stack with a head that
  // reads every token runs by segments.
  bool any_reads_tokens = false;
  for (size_t i = 0; i < sets.size(); ++i) {
    const std::shared_ptr<const AdapterSet>& s = sets[i];
    if (s == nullptr) return absl::InvalidArgumentError(absl::StrCat("adapter stack slot ", i, " is null"));
    if (static_cast<int64_t>(s->layers().size()) != encoder_config.num_hidden_layers ||
        s->head_weight().size(1) != encoder_config.hidden_size) {
      return absl::InvalidArgumentError(absl::StrCat("adapter stack slot ", i, " does not fit the encoder"));
    }
    if (s->device() == device && s->dtype() == dtype) {
      slots_.push_back(s);
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<AdapterSet> moved, s->Clone(device, dtype));
      slots_.push_back(std::move(moved));
    }
    *max_m = std::max(*max_m, s->config().bottleneck_size);
    if (ReadsTokens(s->config().kind)) {
      any_reads_tokens = true;
    } else {
      max_labels_ = std::max(max_labels_, s->config().num_outputs());
    }
    one_activation = one_activation && s->config().activation == sets[0]->config().activation;
  }
  return one_activation && !any_reads_tokens;
}

absl::Status AdapterStack::BuildGatherTensors(const BertConfig& encoder_config, c10::Device device,
                                              c10::ScalarType dtype, int64_t max_m) {
  return GuardTorch("build adapter stack", [&]() {
    activation_ = slots_[0]->config().activation;
    const int64_t c = max_labels_;
    auto stack_of = [&](auto pick) {
      std::vector<at::Tensor> ts;
      for (const auto& s : slots_) ts.push_back(pick(*s));
      return at::stack(ts);
    };
    head_t_ = stack_of([c](const AdapterSet& s) {
      return PadIfNeeded(s.head_weight().t(), {0, c - s.head_weight().size(0)});
    });
    head_bias_ = stack_of([c](const AdapterSet& s) {
      return PadIfNeeded(s.head_bias(), {0, c - s.head_bias().size(0)}, -std::numeric_limits<double>::infinity());
    });
    if (const AdapterSlab* slab = CommonSlab(); slab != nullptr) {
      // The adapters are resident in the slab: read them there by slot.
      layers_ = slab->layers();
      emb_ln_weight_ = slab->emb_ln_weight();
      emb_ln_bias_ = slab->emb_ln_bias();
      up_bias_selector_ = slab->up_bias_selector();
      for (const auto& s : slots_) slab_rows_.push_back(s->slab_slot());
      return;
    }
    // Zero padding of the bottleneck leaves outputs unchanged: padded hidden
    // units meet zero rows of U^T. U's bias is row max_m, then zero rows to k.
    // Every slot's [U^T; b_U; zeros] goes into one cat (one kernel on a GPU,
    // as one stack was): a cat per slot costs a launch per task and adapter,
    // which a GPU waits on (docs/PERFORMANCE.md, "GPU").
    const int64_t d = encoder_config.hidden_size, k = (max_m + 1 + 7) / 8 * 8;
    const at::TensorOptions opts = at::TensorOptions().device(device).dtype(dtype);
    up_bias_selector_ = at::zeros({k - max_m}, opts);
    up_bias_selector_[0] = 1;
    const at::Tensor zero_rows = at::zeros({k - max_m - 1, d}, opts);
    const int64_t t = static_cast<int64_t>(slots_.size());
    auto stack_adapter = [&](auto pick) {
      std::vector<at::Tensor> dt, db, up;
      for (const auto& s : slots_) {
        const BottleneckAdapter& a = pick(*s);
        const int64_t pad = max_m - a.down_weight.size(0);
        dt.push_back(PadIfNeeded(a.down_weight.t(), {0, pad}));
        db.push_back(PadIfNeeded(a.down_bias, {0, pad}));
        up.push_back(PadIfNeeded(a.up_weight.t(), {0, 0, 0, pad}));
        up.push_back(a.up_bias.unsqueeze(0));
        up.push_back(zero_rows);
      }
      return StackedAdapter{at::stack(dt), at::stack(db), at::cat(up).view({t, k, d})};
    };
    for (int64_t l = 0; l < encoder_config.num_hidden_layers; ++l) {
      StackedLayer sl;
      sl.attention_adapter = stack_adapter(
          [l](const AdapterSet& s) -> const BottleneckAdapter& { return s.layers()[l].attention_adapter; });
      sl.ffn_adapter =
          stack_adapter([l](const AdapterSet& s) -> const BottleneckAdapter& { return s.layers()[l].ffn_adapter; });
      sl.attention_ln_weight = stack_of([l](const AdapterSet& s) { return s.layers()[l].attention_layer_norm.weight; });
      sl.attention_ln_bias = stack_of([l](const AdapterSet& s) { return s.layers()[l].attention_layer_norm.bias; });
      sl.output_ln_weight = stack_of([l](const AdapterSet& s) { return s.layers()[l].output_layer_norm.weight; });
      sl.output_ln_bias = stack_of([l](const AdapterSet& s) { return s.layers()[l].output_layer_norm.bias; });
      layers_.push_back(std::move(sl));
    }
    emb_ln_weight_ = stack_of([](const AdapterSet& s) { return s.embedding_layer_norm().weight; });
    emb_ln_bias_ = stack_of([](const AdapterSet& s) { return s.embedding_layer_norm().bias; });
  });
}

const AdapterSlab* AdapterStack::CommonSlab() const {
  const AdapterSlab* slab = slots_[0]->slab();
  for (const auto& s : slots_) {
    if (s->slab() != slab) return nullptr;
  }
  return slab;
}

}  // namespace adapterd::model
