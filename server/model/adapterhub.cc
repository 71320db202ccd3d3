#include "server/model/adapterhub.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd::model {
namespace {

using nlohmann::json;

// Debian's Abseil has its own absl::string_view, which StrCat takes.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("adapter_config.json: ", what));
}

absl::Status Refused(const std::string& field, absl::string_view why) {
  return Invalid(absl::StrCat("config.", field, ": ", why));
}

// The BnConfig fields that matter only in training (or only when another
// field, checked below, turns them on): read, not used.
const std::set<std::string>& TrainingOnlyFields() {
  static const std::set<std::string> k{"dropout",
                                       "init_weights",
                                       "init_weights_seed",
                                       "stochastic_depth",
                                       "phm_dim",
                                       "factorized_phm_W",
                                       "shared_W_phm",
                                       "shared_phm_rule",
                                       "factorized_phm_rule",
                                       "phm_c_init",
                                       "phm_init_range",
                                       "learn_phm",
                                       "hypercomplex_nonlinearity",
                                       "phm_rank",
                                       "phm_bias",
                                       "inv_adapter_reduction_factor",
                                       "adapter_residual_before_ln"};
  return k;
}

// The fields the checks below read.
const std::set<std::string>& CheckedFields() {
  static const std::set<std::string> k{"architecture",       "mh_adapter",    "output_adapter",
                                       "reduction_factor",   "non_linearity", "original_ln_before",
                                       "original_ln_after",  "ln_before",     "ln_after",
                                       "is_parallel",        "scaling",       "use_gating",
                                       "residual_before_ln", "inv_adapter",   "invertible_adapter",
                                       "cross_adapter",      "leave_out",     "phm_layer"};
  return k;
}

// A boolean field: its value, `fallback` when absent (BnConfig's default).
absl::StatusOr<bool> Bool(const json& c, const std::string& field, std::optional<bool> fallback) {
  auto it = c.find(field);
  if (it == c.end() || (it->is_null() && fallback)) {
    if (!fallback) return Refused(field, "is required");
    return *fallback;
  }
  if (!it->is_boolean()) return Refused(field, "must be true or false");
  return it->get<bool>();
}

// A field that must hold its "off" value for an exact forward.
absl::Status MustBeFalse(const json& c, const std::string& field, absl::string_view why) {
  ASSIGN_OR_RETURN(bool on, Bool(c, field, false));
  if (on) return Refused(field, why);
  return absl::OkStatus();
}

}  // namespace

int64_t AdapterHubBottleneckSize(int64_t hidden_size, double reduction_factor) {
  // CPython's float_floor_div (Objects/floatobject.c) for positive operands:
  // the remainder by fmod, the quotient of what is left, rounded to the
  // nearest integer when the division lands just under one.
  const double x = static_cast<double>(hidden_size);
  const double mod = std::fmod(x, reduction_factor);
  const double div = (x - mod) / reduction_factor;
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return static_cast<int64_t>(floordiv);
}

double AdapterHubReductionFactor(int64_t hidden_size, int64_t bottleneck_size) {
  if (hidden_size % bottleneck_size == 0) {
    const int64_t exact = hidden_size / bottleneck_size;  // an exact quotient
    return static_cast<double>(exact);
  }
  // d / m rounded may sit a hair above the true quotient, where Python's
  // floor division gives m - 1: step down until it gives m.
  double rf = static_cast<double>(hidden_size) / static_cast<double>(bottleneck_size);
  for (int step = 0; step < 64 && AdapterHubBottleneckSize(hidden_size, rf) != bottleneck_size; ++step) {
    rf = std::nextafter(rf, 0.0);
  }
  return rf;
}

std::string_view AdapterHubActivationName(Activation a) {
  switch (a) {
    case Activation::kSilu:
      return "swish";
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluNew:
      return "gelu_new";
  }
  return "?";
}

namespace {

// transformers' activation names (get_activation), lower-cased; the names
// AdapterHubActivationName writes are among them.
absl::StatusOr<Activation> ActivationNamed(const std::string& name, const std::string& field) {
  if (name == "swish" || name == "silu") return Activation::kSilu;
  if (name == "relu") return Activation::kRelu;
  if (name == "tanh") return Activation::kTanh;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return Activation::kGeluNew;
  return Refused(field, absl::StrCat("'", ToValidUtf8(name),
                                     "' is not one adapterd computes (swish/silu, relu, tanh, gelu, gelu_new)"));
}

absl::StatusOr<Activation> MapActivation(const json& c, bool has_version) {
  auto it = c.find("non_linearity");
  if (it == c.end() || !it->is_string()) return Refused("non_linearity", "is required (a string)");
  std::string name = absl::AsciiStrToLower(it->get<std::string>());
  if (!has_version) {  // the library's ACTIVATION_RENAME for files without "version"
    if (name == "gelu") {
      name = "gelu_new";
    } else if (name == "gelu_orig") {
      name = "gelu";
    }
  }
  return ActivationNamed(name, "non_linearity");
}

absl::StatusOr<double> ReductionFactor(const json& c) {
  auto it = c.find("reduction_factor");
  if (it == c.end()) return Refused("reduction_factor", "is required");
  if (it->is_number()) {
    const double rf = it->get<double>();
    if (!(rf > 0) || !std::isfinite(rf)) return Refused("reduction_factor", "must be a positive number");
    return rf;
  }
  if (!it->is_object() || it->empty()) return Refused("reduction_factor", "must be a number or a mapping of layers");
  std::optional<double> common;
  for (const auto& [layer, value] : it->items()) {
    if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
      return Refused("reduction_factor", absl::StrCat("'", ToValidUtf8(layer), "' must map to a positive number"));
    }
    if (common && *common != value.get<double>()) {
      return Refused("reduction_factor",
                     "differs between layers: adapterd gives every layer of a task one bottleneck size");
    }
    common = value.get<double>();
  }
  return *common;
}

// What build_full_config writes around an adapter's or a head's config:
// name, model_name, version, model_type ("bert"), hidden_size, "config".
struct Envelope {
  std::string name, model_name, version;
  int64_t hidden_size = 0;
  json config;
};

absl::StatusOr<Envelope> ParseEnvelope(std::string_view text) {
  const json top = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object()) return Invalid("not a JSON object");
  Envelope out;
  auto str = [&](const char* key, bool required, std::string* to) -> absl::Status {
    auto it = top.find(key);
    if (it == top.end() || it->is_null()) {
      return required ? Invalid(absl::StrCat(key, " is required")) : absl::OkStatus();
    }
    if (!it->is_string() || !IsValidUtf8(it->get<std::string>())) {
      return Invalid(absl::StrCat(key, " must be a UTF-8 string"));
    }
    *to = it->get<std::string>();
    return absl::OkStatus();
  };
  std::string model_type;
  RETURN_IF_ERROR(str("name", true, &out.name));
  if (out.name.empty()) return Invalid("name must not be empty");
  RETURN_IF_ERROR(str("model_name", false, &out.model_name));
  RETURN_IF_ERROR(str("version", false, &out.version));
  RETURN_IF_ERROR(str("model_type", true, &model_type));
  if (model_type != "bert") {
    return Invalid(absl::StrCat("model_type '", model_type, "': adapterd serves BERT encoders only"));
  }
  auto hidden = top.find("hidden_size");
  if (hidden == top.end() || !hidden->is_number_integer() || hidden->get<int64_t>() < 1) {
    return Invalid("hidden_size must be a positive integer");
  }
  out.hidden_size = hidden->get<int64_t>();
  auto cit = top.find("config");
  if (cit == top.end() || !cit->is_object()) return Invalid("config must be an object");
  out.config = *cit;
  return out;
}

}  // namespace

std::string_view AdapterPlacementName(AdapterPlacement p) {
  return p == AdapterPlacement::kPfeiffer ? "pfeiffer" : "houlsby";
}

absl::StatusOr<AdapterHubConfig> ParseAdapterHubConfig(std::string_view text) {
  ASSIGN_OR_RETURN(Envelope env, ParseEnvelope(text));
  AdapterHubConfig out;
  out.name = env.name;
  out.model_name = env.model_name;
  out.version = env.version;
  out.hidden_size = env.hidden_size;
  const json& c = env.config;
  for (const auto& [field, value] : c.items()) {
    if (!CheckedFields().contains(field) && !TrainingOnlyFields().contains(field)) {
      return Refused(ToValidUtf8(field),
                     "is not a field adapterd knows; it cannot tell whether the forward "
                     "depends on it");
    }
  }
  if (auto a = c.find("architecture"); a != c.end() && !a->is_null() && *a != "bottleneck") {
    return Refused("architecture", "only bottleneck adapters are imported");
  }

  ASSIGN_OR_RETURN(bool mh, Bool(c, "mh_adapter", std::nullopt));
  ASSIGN_OR_RETURN(bool output, Bool(c, "output_adapter", std::nullopt));
  ASSIGN_OR_RETURN(bool ln_before_original, Bool(c, "original_ln_before", false));
  ASSIGN_OR_RETURN(bool ln_after_original, Bool(c, "original_ln_after", true));
  if (!ln_after_original) {
    return Refused("original_ln_after", "false leaves the layer's own LayerNorm out, which adapterd always applies");
  }
  if (mh && output && !ln_before_original) {
    out.placement = AdapterPlacement::kHoulsby;
  } else if (!mh && output && ln_before_original) {
    out.placement = AdapterPlacement::kPfeiffer;
  } else {
    return Refused(mh && output ? "original_ln_before" : "mh_adapter",
                   "adapterd runs two placements: mh_adapter and output_adapter with original_ln_before false "
                   "(Houlsby), or output_adapter alone with original_ln_before true (Pfeiffer)");
  }
  RETURN_IF_ERROR(MustBeFalse(c, "ln_before", "a LayerNorm of the adapter's own before it is not computed"));
  RETURN_IF_ERROR(MustBeFalse(c, "ln_after", "a LayerNorm of the adapter's own after it is not computed"));
  RETURN_IF_ERROR(MustBeFalse(c, "is_parallel", "parallel adapters are not computed"));
  RETURN_IF_ERROR(MustBeFalse(c, "use_gating", "gated adapters are not computed"));
  RETURN_IF_ERROR(MustBeFalse(c, "phm_layer", "PHM (Compacter) projections are not computed"));
  RETURN_IF_ERROR(MustBeFalse(c, "cross_adapter", "cross-attention adapters are for encoder-decoder models"));
  if (auto it = c.find("inv_adapter"); it != c.end() && !it->is_null()) {
    if (!it->is_string()) return Refused("inv_adapter", "must be a string or null");
    out.inv_adapter = it->get<std::string>();
  }
  if (auto it = c.find("invertible_adapter"); it != c.end() && !it->is_null() && *it != false) {
    // The v1 spelling: {"block_type": "nice", "reduction_factor": ...}.
    auto block = it->is_object() ? it->find("block_type") : it->end();
    out.inv_adapter = block != it->end() && block->is_string() ? block->get<std::string>() : "invertible";
  }
  if (auto s = c.find("scaling"); s != c.end() && !s->is_null() && (!s->is_number() || s->get<double>() != 1.0)) {
    return Refused("scaling", "only 1.0 (no scaling) is computed");
  }
  if (auto r = c.find("residual_before_ln"); r != c.end() && !r->is_null() && *r != true) {
    return Refused("residual_before_ln", "only true (the residual taken before the LayerNorm) is computed");
  }
  ASSIGN_OR_RETURN(out.activation, MapActivation(c, !out.version.empty()));
  ASSIGN_OR_RETURN(double rf, ReductionFactor(c));
  out.bottleneck_size = AdapterHubBottleneckSize(out.hidden_size, rf);
  if (out.bottleneck_size < 1) {
    return Refused("reduction_factor", absl::StrCat("leaves hidden_size ", out.hidden_size, " no bottleneck"));
  }
  if (auto lo = c.find("leave_out"); lo != c.end() && !lo->is_null()) {
    if (!lo->is_array()) return Refused("leave_out", "must be a list of layer indices");
    for (const json& v : *lo) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) {
        return Refused("leave_out", "must hold non-negative layer indices");
      }
      out.leave_out.push_back(v.get<int64_t>());
    }
    std::sort(out.leave_out.begin(), out.leave_out.end());
    out.leave_out.erase(std::unique(out.leave_out.begin(), out.leave_out.end()), out.leave_out.end());
  }
  return out;
}

namespace {

constexpr std::string_view kProjections[] = {"adapter_down.0.weight", "adapter_down.0.bias", "adapter_up.weight",
                                             "adapter_up.bias"};

bool Consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// "{i}." at the front of `s`: the layer index, consumed.
std::optional<int64_t> ConsumeLayer(std::string_view& s) {
  size_t n = 0;
  int64_t layer = 0;
  while (n < s.size() && n < 6 && s[n] >= '0' && s[n] <= '9') layer = layer * 10 + (s[n++] - '0');
  if (n == 0 || n >= s.size() || s[n] != '.' || (n > 1 && s[0] == '0')) return std::nullopt;
  s.remove_prefix(n + 1);
  return layer;
}

}  // namespace

absl::StatusOr<AdapterHubWeights> FindAdapterHubWeights(const std::map<std::string, TensorView, std::less<>>& tensors,
                                                        const AdapterHubConfig& config, int64_t num_layers) {
  const int64_t d = config.hidden_size, m = config.bottleneck_size;
  const bool pfeiffer = config.placement == AdapterPlacement::kPfeiffer;
  AdapterHubWeights out;
  out.attention.resize(static_cast<size_t>(num_layers));
  out.ffn.resize(static_cast<size_t>(num_layers));
  auto unexpected = [](const std::string& name, absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("adapter weights: tensor '", ToValidUtf8(name), "' ", why));
  };
  const std::string infix = absl::StrCat(config.name, ".");
  for (const auto& [name, view] : tensors) {
    std::string_view k = name;
    Consume(k, "bert.");
    if (k.find("invertible_adapters.") != std::string_view::npos ||
        k.find("invertible_lang_adapters.") != std::string_view::npos) {
      return unexpected(name, config.inv_adapter.empty()
                                  ? "is an invertible adapter's, which the config does not name"
                                  : "is an invertible adapter's (config.inv_adapter): not computed");
    }
    std::optional<int64_t> layer;
    if (!Consume(k, "encoder.layer.") || !(layer = ConsumeLayer(k))) {
      return unexpected(name, "is not an adapter tensor of a BERT encoder layer");
    }
    bool attention = false;
    if (Consume(k, "attention.output.")) {
      attention = true;
      if (!Consume(k, "adapters.") && !Consume(k, "attention_text_task_adapters.") &&
          !Consume(k, "attention_text_lang_adapters.")) {
        return unexpected(name, "is not an adapter tensor");
      }
    } else if (!Consume(k, "output.") || (!Consume(k, "adapters.") && !Consume(k, "layer_text_task_adapters.") &&
                                          !Consume(k, "layer_text_lang_adapters."))) {
      return unexpected(name, "is not an adapter tensor");
    }
    if (!Consume(k, infix)) {
      return unexpected(name, absl::StrCat("belongs to another adapter than '", config.name, "'"));
    }
    const auto* which = std::find(std::begin(kProjections), std::end(kProjections), k);
    if (which == std::end(kProjections)) return unexpected(name, "is not one of an adapter's four tensors");
    if (*layer >= num_layers) {
      return unexpected(name, absl::StrCat("is for layer ", *layer, " of an encoder of ", num_layers));
    }
    if (std::binary_search(config.leave_out.begin(), config.leave_out.end(), *layer)) {
      return unexpected(name, "is in a layer the config's leave_out lists");
    }
    if (attention && pfeiffer) return unexpected(name, "is an attention-site adapter's; Pfeiffer's has none");
    if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
      return unexpected(name, absl::StrCat("has dtype ", Sv(DTypeName(view.dtype)), "; expected F32, F16 or BF16"));
    }
    const size_t index = static_cast<size_t>(which - std::begin(kProjections));
    const std::vector<int64_t> shapes[] = {{m, d}, {m}, {d, m}, {d}};
    if (view.shape != shapes[index]) {
      return unexpected(name, absl::StrCat("has shape [", absl::StrJoin(view.shape, ","), "]; the config says [",
                                           absl::StrJoin(shapes[index], ","), "]"));
    }
    auto& site = (attention ? out.attention : out.ffn)[static_cast<size_t>(*layer)];
    if (!site) site.emplace();
    const TensorView** slot[] = {&site->down.weight, &site->down.bias, &site->up.weight, &site->up.bias};
    if (*slot[index] != nullptr) return unexpected(name, "appears twice (under two spellings)");
    *slot[index] = &view;
  }
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (std::binary_search(config.leave_out.begin(), config.leave_out.end(), layer)) continue;
    for (bool attention : {true, false}) {
      if (attention && pfeiffer) continue;
      const auto& site = (attention ? out.attention : out.ffn)[static_cast<size_t>(layer)];
      for (size_t i = 0; i < std::size(kProjections); ++i) {
        const TensorView* const got[] = {site ? site->down.weight : nullptr, site ? site->down.bias : nullptr,
                                         site ? site->up.weight : nullptr, site ? site->up.bias : nullptr};
        if (got[i] == nullptr) {
          return absl::InvalidArgumentError(
              absl::StrCat("adapter weights: tensor 'bert.encoder.layer.", layer,
                           attention ? ".attention.output.adapters." : ".output.adapters.", config.name, ".",
                           Sv(kProjections[i]), "' is missing (the library would keep a random one)"));
        }
      }
    }
  }
  return out;
}

absl::StatusOr<AdapterHubHead> ParseAdapterHubHead(std::string_view text) {
  ASSIGN_OR_RETURN(Envelope env, ParseEnvelope(text));
  const json& c = env.config;
  AdapterHubHead out;
  out.name = env.name;
  out.hidden_size = env.hidden_size;
  static const std::set<std::string> kFields{"head_type", "num_labels", "layers", "activation_function",
                                             "label2id",  "use_pooler", "bias",   "dropout_prob"};
  for (const auto& [field, value] : c.items()) {
    if (!kFields.contains(field)) {
      return Refused(ToValidUtf8(field), "is not a field of the heads adapterd imports");
    }
  }
  auto type = c.find("head_type");
  if (type == c.end() || !type->is_string()) return Refused("head_type", "is required (a string)");
  const std::string head_type = type->get<std::string>();
  auto num = c.find("num_labels");
  if (num == c.end() || !num->is_number_integer() || num->get<int64_t>() < 1 || num->get<int64_t>() > 65536) {
    return Refused("num_labels", "must be an integer in [1, 65536]");
  }
  const int64_t k = num->get<int64_t>();
  if (head_type == "classification") {
    out.kind = k == 1 ? TaskKind::kRegression : TaskKind::kSequenceClassification;
  } else if (head_type == "multilabel_classification") {
    out.kind = TaskKind::kMultiLabelClassification;
  } else if (head_type == "tagging") {
    out.kind = TaskKind::kTokenClassification;
  } else if (head_type == "question_answering") {
    if (k != 2) return Refused("num_labels", "a question-answering head has 2 outputs (start, end)");
    out.kind = TaskKind::kExtractiveQa;
  } else {
    return Refused("head_type", absl::StrCat("'", ToValidUtf8(head_type),
                                             "' has no adapterd task kind (classification, "
                                             "multilabel_classification, tagging, question_answering)"));
  }
  auto layers = c.find("layers");
  if (layers == c.end() || !layers->is_number_integer() || layers->get<int64_t>() < 1 || layers->get<int64_t>() > 2) {
    return Refused("layers", "adapterd computes heads of 1 or 2 layers");
  }
  out.layers = layers->get<int64_t>();
  if (auto act = c.find("activation_function"); out.layers == 2 && act != c.end() && !act->is_null()) {
    if (!act->is_string()) return Refused("activation_function", "must be a string or null");
    ASSIGN_OR_RETURN(out.activation,
                     ActivationNamed(absl::AsciiStrToLower(act->get<std::string>()), "activation_function"));
  }
  ASSIGN_OR_RETURN(bool pooler, Bool(c, "use_pooler", false));
  out.use_pooler = pooler && !ReadsTokens(out.kind);
  ASSIGN_OR_RETURN(out.bias, Bool(c, "bias", true));
  if (auto ids = c.find("label2id"); ids != c.end() && !ids->is_null()) {
    if (!ids->is_object() || static_cast<int64_t>(ids->size()) != k) {
      return Refused("label2id", absl::StrCat("must map ", k, " labels to the ids 0..", k - 1));
    }
    out.labels.assign(static_cast<size_t>(k), "");
    for (const auto& [label, id] : ids->items()) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= k ||
          !out.labels[static_cast<size_t>(id.get<int64_t>())].empty() || label.empty() || !IsValidUtf8(label)) {
        return Refused("label2id",
                       absl::StrCat("must map ", k, " non-empty labels to the ids 0..", k - 1, " once each"));
      }
      out.labels[static_cast<size_t>(id.get<int64_t>())] = label;
    }
  } else if (out.kind != TaskKind::kRegression && out.kind != TaskKind::kExtractiveQa) {
    for (int64_t i = 0; i < k; ++i) out.labels.push_back(absl::StrCat("LABEL_", i));
  }
  if (out.kind == TaskKind::kRegression || out.kind == TaskKind::kExtractiveQa) out.labels.clear();
  return out;
}

absl::StatusOr<AdapterHubHeadWeights> FindAdapterHubHeadWeights(
    const std::map<std::string, TensorView, std::less<>>& tensors, const AdapterHubHead& head) {
  const int64_t d = head.hidden_size;
  const int64_t k = head.kind == TaskKind::kExtractiveQa ? 2
                    : head.kind == TaskKind::kRegression ? 1
                                                         : static_cast<int64_t>(head.labels.size());
  // Indices in the library's stack: Dropout, Linear[, activation] per layer.
  const int64_t out_index = head.layers == 1 ? 1 : (head.activation ? 4 : 3);
  struct Want {
    std::string name;
    std::vector<int64_t> shape;
    const TensorView** to;
  };
  AdapterHubHeadWeights out;
  std::vector<Want> wants;
  const std::string base = absl::StrCat("heads.", head.name, ".");
  if (head.layers == 2) {
    wants.push_back({absl::StrCat(base, "1.weight"), {d, d}, &out.dense.weight});
    wants.push_back({absl::StrCat(base, "1.bias"), {d}, &out.dense.bias});
  }
  wants.push_back({absl::StrCat(base, out_index, ".weight"), {k, d}, &out.out.weight});
  if (head.bias) wants.push_back({absl::StrCat(base, out_index, ".bias"), {k}, &out.out.bias});
  for (const auto& entry : tensors) {
    const std::string& name = entry.first;  // clang 14 lambdas cannot capture structured bindings
    const TensorView& view = entry.second;
    auto it = std::find_if(wants.begin(), wants.end(), [&](const Want& w) { return w.name == name; });
    if (it == wants.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head weights: tensor '", ToValidUtf8(name), "' is not one of the head's (",
          absl::StrJoin(wants, ", ", [](std::string* o, const Want& w) { absl::StrAppend(o, w.name); }), ")"));
    }
    if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat("head weights: tensor '", name, "' has dtype ",
                                                     Sv(DTypeName(view.dtype)), "; expected F32, F16 or BF16"));
    }
    if (view.shape != it->shape) {
      return absl::InvalidArgumentError(absl::StrCat("head weights: tensor '", name, "' has shape [",
                                                     absl::StrJoin(view.shape, ","), "]; the head config says [",
                                                     absl::StrJoin(it->shape, ","), "]"));
    }
    *it->to = &view;
  }
  for (const Want& w : wants) {
    if (*w.to == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("head weights: tensor '", w.name, "' is missing"));
    }
  }
  return out;
}

}  // namespace adapterd::model
