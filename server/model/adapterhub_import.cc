#include "server/model/adapterhub_import.h"

#include <ATen/ATen.h>

#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"
#include "server/model/torch_archive.h"

namespace adapterd::model {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr std::string_view kAdapterConfig = "adapter_config.json";
constexpr std::string_view kHeadConfig = "head_config.json";
// Each weights file in its two spellings: safetensors first, torch.save.
struct WeightsNames {
  std::string_view safetensors, torch;
};
constexpr WeightsNames kAdapterWeights = {"adapter.safetensors", "pytorch_adapter.bin"};
constexpr WeightsNames kHeadWeights = {"model_head.safetensors", "pytorch_model_head.bin"};

// A parsed weights file: its tensors and what keeps their bytes alive.
struct WeightsFile {
  std::string name;
  std::map<std::string, TensorView, std::less<>> tensors;
  std::shared_ptr<const void> holder;
};

absl::Status Prefixed(std::string_view file, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(Sv(file), ": ", s.message()));
}

absl::StatusOr<const std::string*> Required(const AdapterHubFiles& files, std::string_view name) {
  auto it = files.find(name);
  if (it == files.end()) {
    return absl::InvalidArgumentError(absl::StrCat("the AdapterHub directory has no ", Sv(name)));
  }
  return &it->second;
}

absl::StatusOr<WeightsFile> ReadWeights(const AdapterHubFiles& files, const WeightsNames& names) {
  auto st = files.find(names.safetensors);
  auto pt = files.find(names.torch);
  if (st != files.end() && pt != files.end()) {
    return absl::InvalidArgumentError(absl::StrCat("the AdapterHub directory holds both ", Sv(names.safetensors),
                                                   " and ", Sv(names.torch), ": which one to read is ambiguous"));
  }
  // Either parser's result (SafetensorsFile, TorchArchive) as a WeightsFile.
  auto parsed = [](const std::string& name, const auto& file) -> absl::StatusOr<WeightsFile> {
    if (!file.ok()) return Prefixed(name, file.status());
    return WeightsFile{name, file->tensors(), file->holder()};
  };
  if (st != files.end()) return parsed(st->first, SafetensorsFile::FromString(st->second));
  if (pt != files.end()) return parsed(pt->first, TorchArchive::FromBytes(pt->second));
  return absl::InvalidArgumentError(
      absl::StrCat("the AdapterHub directory has neither ", Sv(names.safetensors), " nor ", Sv(names.torch)));
}

// A borrowed view as an fp32 CPU tensor of its own, finite.
absl::StatusOr<at::Tensor> Fp32(const TensorView* view, const WeightsFile& file, std::string_view what) {
  ASSIGN_OR_RETURN(at::Tensor t, ViewToTensor(*view, file.holder, c10::kCPU, at::kFloat));
  absl::Status finite = CheckFinite(t, what);
  if (!finite.ok()) return Prefixed(file.name, finite);
  return t;
}

absl::StatusOr<BottleneckAdapter> AdapterOf(const std::optional<AdapterHubAdapterWeights>& w, const WeightsFile& file,
                                            int64_t d, int64_t m, std::string_view what) {
  if (!w.has_value()) {
    // leave_out: U = 0 and b_U = 0 make the adapter the identity.
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    return BottleneckAdapter{at::zeros({m, d}, f32), at::zeros({m}, f32), at::zeros({d, m}, f32), at::zeros({d}, f32)};
  }
  BottleneckAdapter a;
  ASSIGN_OR_RETURN(a.down_weight, Fp32(w->down.weight, file, absl::StrCat(Sv(what), " adapter_down weight")));
  ASSIGN_OR_RETURN(a.down_bias, Fp32(w->down.bias, file, absl::StrCat(Sv(what), " adapter_down bias")));
  ASSIGN_OR_RETURN(a.up_weight, Fp32(w->up.weight, file, absl::StrCat(Sv(what), " adapter_up weight")));
  ASSIGN_OR_RETURN(a.up_bias, Fp32(w->up.bias, file, absl::StrCat(Sv(what), " adapter_up bias")));
  return a;
}

LayerNormAffine CopyOf(const at::Tensor& weight, const at::Tensor& bias) {
  return {weight.detach().to(c10::kCPU, at::kFloat).clone(), bias.detach().to(c10::kCPU, at::kFloat).clone()};
}

absl::Status Unimplemented(std::string_view what) {
  return absl::UnimplementedError(
      absl::StrCat(Sv(what), ": adapterd does not compute this yet, so the adapter cannot be served exactly"));
}

}  // namespace

absl::StatusOr<ImportedAdapterHub> ImportAdapterHub(const AdapterHubFiles& files, const BertConfig& encoder_config,
                                                    const EncoderWeights& encoder) {
  for (const auto& [name, unused] : files) {
    if (name != kAdapterConfig && name != kHeadConfig && name != kAdapterWeights.safetensors &&
        name != kAdapterWeights.torch && name != kHeadWeights.safetensors && name != kHeadWeights.torch) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the AdapterHub directory holds ", name,
          ", which adapterd does not read (adapter_config.json, adapter.safetensors or pytorch_adapter.bin, "
          "head_config.json, model_head.safetensors or pytorch_model_head.bin)"));
    }
  }
  ImportedAdapterHub out;
  ASSIGN_OR_RETURN(const std::string* adapter_json, Required(files, kAdapterConfig));
  absl::StatusOr<AdapterHubConfig> adapter = ParseAdapterHubConfig(*adapter_json);
  if (!adapter.ok()) return Prefixed(kAdapterConfig, adapter.status());
  out.adapter = *std::move(adapter);
  if (out.adapter.placement != AdapterPlacement::kHoulsby) {
    return Unimplemented(absl::StrCat("adapter_config.json: the ", Sv(AdapterPlacementName(out.adapter.placement)),
                                      " placement (the FFN adapter reading LN(h + x))"));
  }
  ASSIGN_OR_RETURN(const std::string* head_json, Required(files, kHeadConfig));
  absl::StatusOr<AdapterHubHead> head = ParseAdapterHubHead(*head_json);
  if (!head.ok()) return Prefixed(kHeadConfig, head.status());
  out.head = *std::move(head);

  const int64_t d = encoder_config.hidden_size;
  for (const auto& [file, hidden] :
       {std::pair{kAdapterConfig, out.adapter.hidden_size}, std::pair{kHeadConfig, out.head.hidden_size}}) {
    if (hidden != d) {
      return absl::InvalidArgumentError(absl::StrCat(Sv(file), ": hidden_size ", hidden,
                                                     " does not match the serving encoder's ", d,
                                                     " (the adapter was trained for another model)"));
    }
  }
  if (out.head.layers != 1) return Unimplemented("head_config.json: a head of 2 layers");
  const bool pooled = !ReadsTokens(out.head.kind);
  if (pooled && out.head.use_pooler && !encoder.has_pooler()) {
    return absl::InvalidArgumentError(
        "head_config.json: use_pooler is true and the serving encoder's checkpoint has no pooler");
  }
  if (pooled && !out.head.use_pooler && encoder.has_pooler()) {
    return Unimplemented("head_config.json: use_pooler false (a head on h[CLS]) on an encoder with a pooler");
  }

  ASSIGN_OR_RETURN(const WeightsFile weights, ReadWeights(files, kAdapterWeights));
  absl::StatusOr<AdapterHubWeights> found =
      FindAdapterHubWeights(weights.tensors, out.adapter, encoder_config.num_hidden_layers);
  if (!found.ok()) return Prefixed(weights.name, found.status());
  ASSIGN_OR_RETURN(const WeightsFile head_weights, ReadWeights(files, kHeadWeights));
  absl::StatusOr<AdapterHubHeadWeights> head_found = FindAdapterHubHeadWeights(head_weights.tensors, out.head);
  if (!head_found.ok()) return Prefixed(head_weights.name, head_found.status());

  AdapterConfig config;
  config.bottleneck_size = out.adapter.bottleneck_size;
  config.activation = out.adapter.activation;
  config.kind = out.head.kind;
  if (config.kind != TaskKind::kRegression && config.kind != TaskKind::kExtractiveQa) config.labels = out.head.labels;
  absl::Status valid = config.Validate();
  if (!valid.ok()) return Prefixed(kHeadConfig, valid);

  const int64_t m = config.bottleneck_size;
  std::vector<AdapterLayer> layers;
  layers.reserve(encoder.layers.size());
  for (size_t i = 0; i < encoder.layers.size(); ++i) {
    const EncoderLayerWeights& l = encoder.layers[i];
    AdapterLayer layer;
    ASSIGN_OR_RETURN(layer.attention_adapter,
                     AdapterOf(found->attention[i], weights, d, m, absl::StrCat("layer ", i, " attention")));
    ASSIGN_OR_RETURN(layer.ffn_adapter, AdapterOf(found->ffn[i], weights, d, m, absl::StrCat("layer ", i, " FFN")));
    layer.attention_layer_norm = CopyOf(l.attn_ln_weight, l.attn_ln_bias);
    layer.output_layer_norm = CopyOf(l.output_ln_weight, l.output_ln_bias);
    layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(at::Tensor head_weight, Fp32(head_found->out.weight, head_weights, "the head's weight"));
  at::Tensor head_bias;
  if (head_found->out.bias != nullptr) {
    ASSIGN_OR_RETURN(head_bias, Fp32(head_found->out.bias, head_weights, "the head's bias"));
  } else {
    head_bias = at::zeros({head_weight.size(0)}, at::TensorOptions().dtype(at::kFloat));
  }
  ASSIGN_OR_RETURN(out.set,
                   AdapterSet::FromParts(encoder_config, config, CopyOf(encoder.emb_ln_weight, encoder.emb_ln_bias),
                                         std::move(layers), std::move(head_weight), std::move(head_bias)));
  return out;
}

}  // namespace adapterd::model
