#include "server/model/adapter_format.h"

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <span>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {

std::span<const std::string_view> AdapterFormatKeys() {
  static constexpr std::string_view kKeys[] = {"format",
                                               "format_version",
                                               "bottleneck_size",
                                               "activation",
                                               "init_std",
                                               "labels",
                                               "num_layers",
                                               "hidden_size",
                                               "encoder_fingerprint",
                                               "task_kind",
                                               "target_mean",
                                               "target_stddev",
                                               "qa_max_seq_len",
                                               "qa_doc_stride",
                                               "qa_max_question_tokens",
                                               "qa_max_answer_tokens",
                                               "qa_allow_no_answer",
                                               "tagging_max_seq_len"};
  return kKeys;
}

namespace {

absl::StatusOr<TaskKind> ParseTaskKind(std::string_view name) {
  for (TaskKind k : {TaskKind::kSequenceClassification, TaskKind::kMultiLabelClassification, TaskKind::kRegression,
                     TaskKind::kTokenClassification, TaskKind::kExtractiveQa}) {
    if (TaskKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(absl::StrCat("adapter file: unknown task_kind '", std::string(name), "'"));
}

bool IsOwnKey(std::string_view key) {
  const std::span<const std::string_view> own = AdapterFormatKeys();
  return std::find(own.begin(), own.end(), key) != own.end();
}

absl::StatusOr<std::string> Get(const std::map<std::string, std::string, std::less<>>& md, std::string_view key) {
  auto it = md.find(key);
  if (it == md.end())
    return absl::InvalidArgumentError(absl::StrCat("adapter file: metadata key '", std::string(key), "' is missing"));
  return it->second;
}

absl::StatusOr<int64_t> GetInt(const std::map<std::string, std::string, std::less<>>& md, std::string_view key) {
  ASSIGN_OR_RETURN(std::string v, Get(md, key));
  int64_t out;
  if (!absl::SimpleAtoi(v, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter file: metadata '", std::string(key), "' is not an integer"));
  }
  return out;
}

absl::StatusOr<double> GetDouble(const std::map<std::string, std::string, std::less<>>& md, std::string_view key) {
  ASSIGN_OR_RETURN(std::string v, Get(md, key));
  double out;
  if (!absl::SimpleAtod(v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("adapter file: metadata '", std::string(key), "' is not a number"));
  }
  return out;
}

// The version-3 keys: the kind and what its head needs.
absl::Status ReadKind(const std::map<std::string, std::string, std::less<>>& md, AdapterConfig& c) {
  ASSIGN_OR_RETURN(std::string kind, Get(md, "task_kind"));
  ASSIGN_OR_RETURN(c.kind, ParseTaskKind(kind));
  if (c.kind == TaskKind::kRegression) {
    ASSIGN_OR_RETURN(c.target.mean, GetDouble(md, "target_mean"));
    ASSIGN_OR_RETURN(c.target.stddev, GetDouble(md, "target_stddev"));
  }
  if (c.kind == TaskKind::kExtractiveQa) {
    for (auto [key, field] :
         {std::pair{"qa_max_seq_len", &c.qa.max_seq_len}, std::pair{"qa_doc_stride", &c.qa.doc_stride},
          std::pair{"qa_max_question_tokens", &c.qa.max_question_tokens},
          std::pair{"qa_max_answer_tokens", &c.qa.max_answer_tokens}}) {
      ASSIGN_OR_RETURN(int64_t v, GetInt(md, key));
      if (v < 0 || v > 1 << 20) {
        return absl::InvalidArgumentError(absl::StrCat("adapter file: metadata '", key, "' is out of range"));
      }
      *field = static_cast<int32_t>(v);
    }
    ASSIGN_OR_RETURN(std::string allow, Get(md, "qa_allow_no_answer"));
    if (allow != "0" && allow != "1") {
      return absl::InvalidArgumentError("adapter file: metadata 'qa_allow_no_answer' must be 0 or 1");
    }
    c.qa.allow_no_answer = allow == "1";
  }
  if (c.kind == TaskKind::kTokenClassification && md.contains("tagging_max_seq_len")) {
    ASSIGN_OR_RETURN(int64_t v, GetInt(md, "tagging_max_seq_len"));
    if (v < 3 || v > 1 << 20) {
      return absl::InvalidArgumentError("adapter file: metadata 'tagging_max_seq_len' is out of range");
    }
    c.tagging_max_seq_len = static_cast<int32_t>(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<AdapterFileInfo> InfoFromMetadata(const std::map<std::string, std::string, std::less<>>& md) {
  ASSIGN_OR_RETURN(std::string format, Get(md, "format"));
  if (format != kAdapterFormatName) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an adapter file: format is '", format, "', expected '", kAdapterFormatName, "'"));
  }
  AdapterFileInfo info;
  ASSIGN_OR_RETURN(int64_t version, GetInt(md, "format_version"));
  if (version < 1 || version > kAdapterFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter file has format_version ", version, "; this build reads 1..", kAdapterFormatVersion));
  }
  info.format_version = static_cast<int>(version);
  ASSIGN_OR_RETURN(info.config.bottleneck_size, GetInt(md, "bottleneck_size"));
  ASSIGN_OR_RETURN(std::string act, Get(md, "activation"));
  ASSIGN_OR_RETURN(info.config.activation, ParseActivation(act));
  ASSIGN_OR_RETURN(std::string init_std, Get(md, "init_std"));
  if (!absl::SimpleAtod(init_std, &info.config.init_std)) {
    return absl::InvalidArgumentError("adapter file: metadata 'init_std' is not a number");
  }
  ASSIGN_OR_RETURN(std::string labels, Get(md, "labels"));
  nlohmann::json j = nlohmann::json::parse(labels, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return absl::InvalidArgumentError("adapter file: metadata 'labels' must be a JSON array of strings");
  }
  for (const auto& l : j) {
    if (!l.is_string())
      return absl::InvalidArgumentError("adapter file: metadata 'labels' must be a JSON array of strings");
    info.config.labels.push_back(l.get<std::string>());
  }
  if (info.format_version >= 3) RETURN_IF_ERROR(ReadKind(md, info.config));
  ASSIGN_OR_RETURN(info.num_layers, GetInt(md, "num_layers"));
  ASSIGN_OR_RETURN(info.hidden_size, GetInt(md, "hidden_size"));
  ASSIGN_OR_RETURN(info.encoder_fingerprint, Get(md, "encoder_fingerprint"));
  if (absl::Status s = info.config.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("adapter file: ", s.message()));
  }
  for (const auto& [k, v] : md) {
    if (!IsOwnKey(k)) info.extra.emplace(k, v);
  }
  return info;
}

}  // namespace

absl::StatusOr<std::string> SerializeAdapterSet(const AdapterSet& set, std::string_view encoder_fingerprint,
                                                const std::map<std::string, std::string>& extra, DType dtype) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16) {
    return absl::InvalidArgumentError("adapter files hold F32, F16 or BF16 tensors");
  }
  SafetensorsWriter writer;
  const AdapterConfig& c = set.config();
  writer.SetMetadata("format", std::string(kAdapterFormatName));
  writer.SetMetadata("format_version", absl::StrCat(kAdapterFormatVersion));
  writer.SetMetadata("bottleneck_size", absl::StrCat(c.bottleneck_size));
  writer.SetMetadata("activation", std::string(ActivationName(c.activation)));
  writer.SetMetadata("init_std", absl::StrCat(c.init_std));
  writer.SetMetadata("labels", nlohmann::json(c.labels).dump());
  writer.SetMetadata("task_kind", std::string(TaskKindName(c.kind)));
  if (c.kind == TaskKind::kRegression) {
    writer.SetMetadata("target_mean", absl::StrFormat("%.17g", c.target.mean));
    writer.SetMetadata("target_stddev", absl::StrFormat("%.17g", c.target.stddev));
  }
  if (c.kind == TaskKind::kExtractiveQa) {
    writer.SetMetadata("qa_max_seq_len", absl::StrCat(c.qa.max_seq_len));
    writer.SetMetadata("qa_doc_stride", absl::StrCat(c.qa.doc_stride));
    writer.SetMetadata("qa_max_question_tokens", absl::StrCat(c.qa.max_question_tokens));
    writer.SetMetadata("qa_max_answer_tokens", absl::StrCat(c.qa.max_answer_tokens));
    writer.SetMetadata("qa_allow_no_answer", c.qa.allow_no_answer ? "1" : "0");
  }
  if (c.kind == TaskKind::kTokenClassification && c.tagging_max_seq_len > 0) {
    writer.SetMetadata("tagging_max_seq_len", absl::StrCat(c.tagging_max_seq_len));
  }
  writer.SetMetadata("num_layers", absl::StrCat(set.layers().size()));
  writer.SetMetadata("hidden_size", absl::StrCat(set.head_weight().size(1)));
  writer.SetMetadata("encoder_fingerprint", std::string(encoder_fingerprint));
  for (const auto& [k, v] : extra) {
    if (IsOwnKey(k)) return absl::InvalidArgumentError(absl::StrCat("metadata key '", k, "' is reserved"));
    writer.SetMetadata(k, v);
  }
  for (const auto& [name, t] : set.Named()) RETURN_IF_ERROR(AddTensor(writer, name, t, dtype));
  return writer.Serialize();
}

absl::StatusOr<AdapterFileInfo> ReadAdapterInfo(const std::map<std::string, std::string, std::less<>>& metadata) {
  return InfoFromMetadata(metadata);
}

int64_t MaxAdapterFileBytes(const BertConfig& config, const AdapterFileInfo& info, int64_t header_bytes) {
  const int64_t params = AdapterSetParameterCount(config.num_hidden_layers, config.hidden_size,
                                                  info.config.bottleneck_size, info.config.num_outputs());
  return header_bytes + 4 * params;
}

absl::StatusOr<AdapterFileInfo> ReadAdapterInfo(std::string_view bytes) {
  ASSIGN_OR_RETURN(SafetensorsFile file,
                   SafetensorsFile::Parse({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, nullptr));
  return InfoFromMetadata(file.metadata());
}

absl::StatusOr<std::unique_ptr<AdapterSet>> DeserializeAdapterSet(std::string_view bytes,
                                                                  const BertConfig& encoder_config,
                                                                  std::string_view encoder_fingerprint,
                                                                  c10::Device device,
                                                                  const AdapterLoadOptions& options) {
  if (!c10::isFloatingType(options.dtype)) {
    return absl::InvalidArgumentError("adapter sets load into a floating-point dtype");
  }
  ASSIGN_OR_RETURN(SafetensorsFile file,
                   SafetensorsFile::Parse({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, nullptr));
  ASSIGN_OR_RETURN(AdapterFileInfo info, InfoFromMetadata(file.metadata()));
  if (info.format_version == 1) {
    const std::string_view want = options.v1_fingerprint.empty() ? encoder_fingerprint : options.v1_fingerprint;
    if (info.encoder_fingerprint != want) {
      return absl::FailedPreconditionError(absl::StrCat("adapter (format 1) was trained on encoder ",
                                                        info.encoder_fingerprint, ", but this server runs encoder ",
                                                        std::string(want)));
    }
  } else if (info.encoder_fingerprint != encoder_fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "adapter was trained on model ", info.encoder_fingerprint, ", but this server runs model ",
        std::string(encoder_fingerprint),
        " (the fingerprint covers the encoder's weights and config, its vocabulary and its lower-casing)"));
  }
  if (info.num_layers != encoder_config.num_hidden_layers || info.hidden_size != encoder_config.hidden_size) {
    return absl::FailedPreconditionError(
        absl::StrCat("adapter is for ", info.num_layers, " layers of width ", info.hidden_size, "; the encoder has ",
                     encoder_config.num_hidden_layers, " of width ", encoder_config.hidden_size));
  }
  const int64_t num_layers = encoder_config.num_hidden_layers;
  // Every expected name maps to the tensor it fills; FromParts then checks shapes.
  LayerNormAffine emb;
  std::vector<AdapterLayer> layers(static_cast<size_t>(num_layers));
  at::Tensor head_w, head_b;
  std::map<std::string, at::Tensor*> slots;
  slots["embeddings.layer_norm.weight"] = &emb.weight;
  slots["embeddings.layer_norm.bias"] = &emb.bias;
  for (int64_t i = 0; i < num_layers; ++i) {
    AdapterLayer& l = layers[static_cast<size_t>(i)];
    const std::string p = absl::StrCat("layers.", i, ".");
    for (auto [prefix, a] :
         {std::pair{p + "attention_adapter", &l.attention_adapter}, std::pair{p + "ffn_adapter", &l.ffn_adapter}}) {
      slots[prefix + ".down.weight"] = &a->down_weight;
      slots[prefix + ".down.bias"] = &a->down_bias;
      slots[prefix + ".up.weight"] = &a->up_weight;
      slots[prefix + ".up.bias"] = &a->up_bias;
    }
    for (auto [prefix, ln] : {std::pair{p + "attention_layer_norm", &l.attention_layer_norm},
                              std::pair{p + "output_layer_norm", &l.output_layer_norm}}) {
      slots[prefix + ".weight"] = &ln->weight;
      slots[prefix + ".bias"] = &ln->bias;
    }
  }
  slots["head.weight"] = &head_w;
  slots["head.bias"] = &head_b;
  for (const auto& [name, view] : file.tensors()) {
    auto it = slots.find(name);
    if (it == slots.end()) {
      return absl::InvalidArgumentError(absl::StrCat("adapter file: unexpected tensor '", name, "'"));
    }
    if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(
          absl::StrCat("adapter file: tensor '", name, "' has dtype ", std::string(DTypeName(view.dtype))));
    }
    ASSIGN_OR_RETURN(*it->second, ViewToTensor(view, file.holder(), device, options.dtype));
    if (options.check_finite)
      RETURN_IF_ERROR(CheckFinite(*it->second, absl::StrCat("adapter file: tensor '", name, "'")));
  }
  for (const auto& [name, slot] : slots) {
    if (!slot->defined())
      return absl::InvalidArgumentError(absl::StrCat("adapter file: tensor '", name, "' is missing"));
  }
  return AdapterSet::FromParts(encoder_config, std::move(info.config), std::move(emb), std::move(layers),
                               std::move(head_w), std::move(head_b));
}

absl::Status CheckFinite(const AdapterSet& set) {
  for (const auto& [name, t] : set.Named()) {
    RETURN_IF_ERROR(CheckFinite(t, absl::StrCat("adapter tensor '", name, "'")));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::model
