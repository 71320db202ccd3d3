#include "server/model/adapterhub_export.h"

#include <ATen/ATen.h>

#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/model/adapterhub.h"
#include "server/model/torch_archive.h"

namespace adapterd::model {
namespace {

using nlohmann::json;

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// A state dict under construction: each tensor an fp32 contiguous CPU copy,
// kept alive beside the view WriteTorchStateDict reads.
class StateDict {
 public:
  void Add(std::string name, const at::Tensor& t) {
    at::Tensor c = t.detach().to(c10::kCPU, at::kFloat).contiguous();
    TensorView view{DType::kF32, c.sizes().vec(),
                    std::span<const std::byte>(static_cast<const std::byte*>(c.data_ptr()),
                                               static_cast<size_t>(c.numel()) * sizeof(float))};
    keep_.push_back(std::move(c));
    views_.emplace(std::move(name), std::move(view));
  }
  absl::StatusOr<std::string> Write() const { return WriteTorchStateDict(views_); }

 private:
  std::vector<at::Tensor> keep_;
  std::map<std::string, TensorView, std::less<>> views_;
};

bool SameAffine(const LayerNormAffine& a, const at::Tensor& weight, const at::Tensor& bias) {
  auto f32 = [](const at::Tensor& t) { return t.detach().to(c10::kCPU, at::kFloat); };
  return at::equal(f32(a.weight), f32(weight)) && at::equal(f32(a.bias), f32(bias));
}

// The first of the set's LayerNorms that is not the encoder's, named; empty
// when all are.
std::string TrainedLayerNorm(const AdapterSet& set, const EncoderWeights& encoder) {
  if (!SameAffine(set.embedding_layer_norm(), encoder.emb_ln_weight, encoder.emb_ln_bias)) return "the embeddings'";
  for (size_t i = 0; i < set.layers().size(); ++i) {
    const AdapterLayer& a = set.layers()[i];
    const EncoderLayerWeights& e = encoder.layers[i];
    if (!SameAffine(a.attention_layer_norm, e.attn_ln_weight, e.attn_ln_bias)) {
      return absl::StrCat("layer ", i, "'s attention");
    }
    if (!SameAffine(a.output_layer_norm, e.output_ln_weight, e.output_ln_bias)) {
      return absl::StrCat("layer ", i, "'s FFN output");
    }
  }
  return "";
}

// build_full_config's envelope around `config`.
json Envelope(json config, int64_t hidden_size, const AdapterHubExportOptions& options) {
  return json{{"config", std::move(config)},        {"hidden_size", hidden_size}, {"model_class", "BertAdapterModel"},
              {"model_name", options.model_name},   {"model_type", "bert"},       {"name", options.name},
              {"version", kAdapterHubExportVersion}};
}

// DoubleSeqBnConfig().to_dict() with the task's activation and size.
json HoulsbyConfig(Activation activation, int64_t d, int64_t m) {
  json rf;
  if (d % m == 0) {
    rf = d / m;  // an integer, as the library's presets write it
  } else {
    rf = AdapterHubReductionFactor(d, m);
  }
  return json{{"architecture", "bottleneck"},
              {"mh_adapter", true},
              {"output_adapter", true},
              {"reduction_factor", rf},
              {"non_linearity", std::string(AdapterHubActivationName(activation))},
              {"original_ln_before", false},
              {"original_ln_after", true},
              {"ln_before", false},
              {"ln_after", false},
              {"init_weights", "bert"},
              {"init_weights_seed", nullptr},
              {"is_parallel", false},
              {"scaling", 1.0},
              {"use_gating", false},
              {"residual_before_ln", true},
              {"adapter_residual_before_ln", false},
              {"inv_adapter", nullptr},
              {"inv_adapter_reduction_factor", nullptr},
              {"cross_adapter", false},
              {"leave_out", json::array()},
              {"dropout", 0.0},
              {"phm_layer", false},
              {"phm_dim", 4},
              {"factorized_phm_W", true},
              {"shared_W_phm", false},
              {"shared_phm_rule", true},
              {"factorized_phm_rule", false},
              {"phm_c_init", "normal"},
              {"phm_init_range", 0.0001},
              {"learn_phm", true},
              {"hypercomplex_nonlinearity", "glorot-uniform"},
              {"phm_rank", 1},
              {"phm_bias", true},
              {"stochastic_depth", 0.0}};
}

std::string_view HeadType(TaskKind kind) {
  switch (kind) {
    case TaskKind::kSequenceClassification:
    case TaskKind::kRegression:
      return "classification";
    case TaskKind::kMultiLabelClassification:
      return "multilabel_classification";
    case TaskKind::kTokenClassification:
      return "tagging";
    case TaskKind::kExtractiveQa:
      return "question_answering";
  }
  return "?";
}

json HeadConfig(const AdapterConfig& config, int64_t num_outputs, bool use_pooler) {
  json c{{"head_type", std::string(HeadType(config.kind))},
         {"num_labels", num_outputs},
         {"layers", 1},
         {"activation_function", nullptr},
         {"use_pooler", use_pooler},
         {"bias", true},
         {"dropout_prob", nullptr}};
  if (config.kind == TaskKind::kRegression) {
    c["label2id"] = nullptr;
  } else if (config.kind != TaskKind::kExtractiveQa) {
    json ids = json::object();
    for (size_t i = 0; i < config.labels.size(); ++i) ids[config.labels[i]] = static_cast<int64_t>(i);
    c["label2id"] = std::move(ids);
  }
  return c;
}

std::string Dumped(const json& j) { return j.dump(2) + "\n"; }

}  // namespace

absl::StatusOr<AdapterHubFiles> ExportAdapterHub(const AdapterSet& set, const BertConfig& encoder_config,
                                                 const EncoderWeights& encoder,
                                                 const AdapterHubExportOptions& options) {
  if (!ValidName(options.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the AdapterHub adapter name '", options.name,
                     "' must be 1-128 characters of A-Z, a-z, 0-9, '_' and '-' (it is part of every key)"));
  }
  const int64_t d = encoder_config.hidden_size;
  const AdapterConfig& config = set.config();
  const int64_t m = config.bottleneck_size;
  if (static_cast<int64_t>(set.layers().size()) != encoder_config.num_hidden_layers || set.head_weight().size(1) != d ||
      m < 1 || static_cast<int64_t>(encoder.layers.size()) != encoder_config.num_hidden_layers) {
    return absl::FailedPreconditionError(
        absl::StrCat("the task's adapters (", set.layers().size(), " layers, head width ", set.head_weight().size(1),
                     ", bottleneck ", m, ") do not fit the serving encoder (", encoder_config.num_hidden_layers,
                     " layers, hidden size ", d, ")"));
  }
  if (!options.accept_layer_norm_loss) {
    if (std::string trained = TrainedLayerNorm(set, encoder); !trained.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the task's LayerNorms were trained (", trained,
          " differs from the encoder's), and an AdapterHub adapter holds none: the adapters library would use "
          "the encoder's and predict otherwise. Export with the LayerNorm loss accepted to drop them anyway, or "
          "train the task with its LayerNorms frozen"));
    }
  }

  StateDict adapter;
  for (size_t i = 0; i < set.layers().size(); ++i) {
    const AdapterLayer& layer = set.layers()[i];
    for (const auto& [site, a] :
         {std::pair<std::string_view, const BottleneckAdapter*>{"attention.output", &layer.attention_adapter},
          std::pair<std::string_view, const BottleneckAdapter*>{"output", &layer.ffn_adapter}}) {
      const std::string base = absl::StrCat("bert.encoder.layer.", i, ".", Sv(site), ".adapters.", options.name, ".");
      adapter.Add(absl::StrCat(base, "adapter_down.0.weight"), a->down_weight);
      adapter.Add(absl::StrCat(base, "adapter_down.0.bias"), a->down_bias);
      adapter.Add(absl::StrCat(base, "adapter_up.weight"), a->up_weight);
      adapter.Add(absl::StrCat(base, "adapter_up.bias"), a->up_bias);
    }
  }

  // A regression head predicts raw * stddev + mean: folded into the Linear,
  // which is what the library's regression head computes.
  at::Tensor head_weight = set.head_weight().detach().to(c10::kCPU, at::kFloat);
  at::Tensor head_bias = set.head_bias().detach().to(c10::kCPU, at::kFloat);
  if (config.kind == TaskKind::kRegression && (config.target.stddev != 1.0 || config.target.mean != 0.0)) {
    head_weight = (head_weight.to(at::kDouble) * config.target.stddev).to(at::kFloat);
    head_bias = (head_bias.to(at::kDouble) * config.target.stddev + config.target.mean).to(at::kFloat);
  }
  StateDict head;
  head.Add(absl::StrCat("heads.", options.name, ".1.weight"), head_weight);
  head.Add(absl::StrCat("heads.", options.name, ".1.bias"), head_bias);

  const bool use_pooler = !ReadsTokens(config.kind) && encoder.has_pooler();
  AdapterHubFiles files;
  files["adapter_config.json"] = Dumped(Envelope(HoulsbyConfig(config.activation, d, m), d, options));
  files["head_config.json"] = Dumped(Envelope(HeadConfig(config, set.head_weight().size(0), use_pooler), d, options));
  ASSIGN_OR_RETURN(files["pytorch_adapter.bin"], adapter.Write());
  ASSIGN_OR_RETURN(files["pytorch_model_head.bin"], head.Write());
  return files;
}

}  // namespace adapterd::model
