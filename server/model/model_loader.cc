#include "server/model/model_loader.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"
#include "server/model/torch_archive.h"

namespace adapterd::model {
namespace {

// Maps a checkpoint's tensor name to its canonical form, or "" to ignore it.
std::string Canonical(std::string_view name) {
  std::string n(name);
  if (n.starts_with("cls.") || n.starts_with("bert.cls.")) return "";
  if (n.starts_with("bert.")) n = n.substr(5);
  if (n.ends_with("LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  if (n.ends_with("LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  return n;
}

// Buffers HF's BertModel saves alongside its parameters; not weights.
bool IsIgnoredBuffer(std::string_view canonical) {
  return canonical == "embeddings.position_ids" || canonical == "embeddings.token_type_ids";
}

// Why a tensor the config does not describe is there, as clearly as its name
// allows: a layer past num_hidden_layers, or simply unknown.
absl::Status UndescribedTensor(const std::string& original, std::string_view canonical, const BertConfig& config) {
  constexpr std::string_view kLayer = "encoder.layer.";
  if (canonical.starts_with(kLayer)) {
    std::string_view rest = canonical.substr(kLayer.size());
    int64_t layer = -1;
    if (absl::SimpleAtoi(std::string(rest.substr(0, rest.find('.'))), &layer) && layer >= config.num_hidden_layers) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor '", original, "' belongs to layer ", layer,
                                                     ", but config.json's num_hidden_layers is ",
                                                     config.num_hidden_layers));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint tensor '", original, "' is not part of the BERT encoder that config.json describes"));
}

absl::Status ShapeError(const std::string& name, const TensorView& v, const std::vector<int64_t>& want) {
  return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor '", name, "' has shape [",
                                                 absl::StrJoin(v.shape, ","), "], config expects [",
                                                 absl::StrJoin(want, ","), "]"));
}

// The checkpoint's tensors by canonical name (Canonical), with each one's
// name in the file for messages.
struct IndexedTensors {
  std::map<std::string, const TensorView*> by_name;
  std::map<std::string, std::string> original;
};

absl::StatusOr<IndexedTensors> IndexByCanonicalName(const CheckpointTensors& tensors) {
  IndexedTensors out;
  for (const auto& [name, view] : tensors) {
    std::string c = Canonical(name);
    if (c.empty()) continue;
    if (auto [it, inserted] = out.by_name.emplace(c, &view); !inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint has both '", out.original[c], "' and '", name, "' for tensor '", c, "'"));
    }
    out.original[c] = name;
  }
  return out;
}

// The (canonical name, shape) of every tensor `config` implies, in order.
std::vector<std::pair<std::string, std::vector<int64_t>>> ExpectedTensors(const BertConfig& config, bool has_pooler) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  ForEachCheckpointTensor(config.num_hidden_layers, has_pooler,
                          [&](const std::string& name, const EncoderTensorSpec& spec, int64_t, int part) {
                            expected.emplace_back(name, spec.Shape(config, /*one_of_qkv=*/part >= 0));
                          });
  return expected;
}

// The encoder's weights from the loaded tensors: the layers' q, k and v
// fused into one projection (each per-projection copy dropped once fused).
absl::StatusOr<EncoderWeights> AssembleWeights(const BertConfig& config, std::map<std::string, at::Tensor>& loaded,
                                               bool has_pooler) {
  EncoderWeights w;
  w.layers.resize(static_cast<size_t>(config.num_hidden_layers));
  RETURN_IF_ERROR(GuardTorch("assemble encoder", [&]() {
    ForEachEncoderTensor(config.num_hidden_layers, has_pooler, [&](const EncoderTensorSpec& spec, int64_t layer) {
      at::Tensor& t = TensorOf(w, spec, layer);
      if (!spec.fused_qkv) {
        t = loaded[CheckpointName(spec, layer)];
        return;
      }
      std::vector<at::Tensor> parts;
      parts.reserve(3);
      for (int part = 0; part < 3; ++part) parts.push_back(loaded[CheckpointName(spec, layer, part)]);
      t = at::cat(parts);
      for (int part = 0; part < 3; ++part) loaded.erase(CheckpointName(spec, layer, part));
    });
  }));
  return w;
}

}  // namespace

absl::StatusOr<ResolvedWeights> ResolveEncoderWeights(const SafetensorsFile& file, const BertConfig& config,
                                                      c10::Device device, c10::ScalarType dtype) {
  return ResolveEncoderWeights(file.tensors(), file.holder(), config, device, dtype);
}

absl::StatusOr<ResolvedWeights> ResolveEncoderWeights(const CheckpointTensors& tensors,
                                                      const std::shared_ptr<const void>& holder,
                                                      const BertConfig& config, c10::Device device,
                                                      c10::ScalarType dtype) {
  ASSIGN_OR_RETURN(IndexedTensors index, IndexByCanonicalName(tensors));
  const auto& by_name = index.by_name;
  auto& original = index.original;
  // The config implies `fixed` + `per_layer` x layers tensors; a config that
  // describes far more layers than the checkpoint holds is refused before
  // the list of expected tensors is built (a huge num_hidden_layers would
  // otherwise cost seconds and gigabytes to refuse).
  const int64_t fixed = CheckpointTensorCount(0, false);
  const int64_t per_layer = CheckpointTensorCount(1, false) - fixed;
  const int64_t held = static_cast<int64_t>(by_name.size());
  if (config.num_hidden_layers > std::max<int64_t>(0, held - fixed) / per_layer) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json describes ", config.num_hidden_layers, " layers, but the checkpoint holds ", held,
                     " encoder tensors: enough for at most ", std::max<int64_t>(0, held - fixed) / per_layer));
  }
  const bool has_pooler = by_name.count("pooler.dense.weight") || by_name.count("pooler.dense.bias");
  const auto expected = ExpectedTensors(config, has_pooler);

  // Everything else in the checkpoint must be accounted for: a tensor the
  // config does not describe means the two disagree.
  {
    std::set<std::string_view> wanted;
    for (const auto& e : expected) wanted.insert(e.first);
    for (const auto& [name, view] : by_name) {
      if (!wanted.contains(name) && !IsIgnoredBuffer(name)) return UndescribedTensor(original[name], name, config);
    }
  }

  EncoderFingerprinter fingerprinter(config);
  std::map<std::string, at::Tensor> loaded;
  for (const auto& [name, shape] : expected) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint is missing tensor '", name, "'"));
    }
    const TensorView& v = *it->second;
    if (v.shape != shape) return ShapeError(original[name], v, shape);
    if (v.dtype != DType::kF32 && v.dtype != DType::kF16 && v.dtype != DType::kBF16) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor '", original[name], "' has dtype ",
                                                     std::string(DTypeName(v.dtype)), "; expected F32, F16 or BF16"));
    }
    fingerprinter.Add(name, DTypeName(v.dtype), v.shape, v.data.data(), v.data.size());
    // On CPU in the file's dtype the tensor borrows the mapped bytes: the
    // encoder never writes its weights, and the page cache is shared.
    ASSIGN_OR_RETURN(loaded[name], ViewToTensor(v, holder, device, dtype, /*allow_alias=*/true));
    RETURN_IF_ERROR(CheckFinite(loaded[name], absl::StrCat("checkpoint tensor '", original[name], "'")));
  }

  ResolvedWeights out;
  out.fingerprint = fingerprinter.Finish();
  ASSIGN_OR_RETURN(out.weights, AssembleWeights(config, loaded, has_pooler));
  return out;
}

absl::StatusOr<LoadedModel> LoadBertModel(const std::string& dir, const LoadOptions& options) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) return absl::NotFoundError(absl::StrCat("model directory '", dir, "' does not exist"));
  const std::string config_path = (fs::path(dir) / "config.json").string();
  ASSIGN_OR_RETURN(std::string config_text, ReadFileToString(config_path));
  absl::StatusOr<BertConfig> config = BertConfig::FromJson(config_text);
  if (!config.ok()) {
    return absl::Status(config.status().code(), absl::StrCat(config_path, ": ", config.status().message()));
  }

  TokenizerOptions tok;
  tok.max_seq_len = static_cast<int>(std::min<int64_t>(options.max_seq_len, config->max_position_embeddings));
  const std::string tok_config_path = (fs::path(dir) / "tokenizer_config.json").string();
  if (fs::exists(tok_config_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileToString(tok_config_path));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(tok_config_path, ": malformed JSON"));
    }
    if (auto it = j.find("do_lower_case"); it != j.end()) {
      if (!it->is_boolean())
        return absl::InvalidArgumentError(absl::StrCat(tok_config_path, ": do_lower_case must be a boolean"));
      tok.do_lower_case = it->get<bool>();
    }
  }
  const std::string vocab_path = (fs::path(dir) / "vocab.txt").string();
  ASSIGN_OR_RETURN(std::unique_ptr<BertTokenizer> tokenizer, BertTokenizer::FromVocabFile(vocab_path, tok));
  if (tokenizer->vocab_size() > config->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(vocab_path, " has ", tokenizer->vocab_size(),
                                                   " tokens but config.json's vocab_size is ", config->vocab_size));
  }

  // model.safetensors, else the pytorch_model.bin of older checkpoints (read
  // by the restricted unpickler: torch_archive.h). Open's errors name the file.
  std::string weights_path = (fs::path(dir) / "model.safetensors").string();
  std::optional<SafetensorsFile> safetensors;
  std::optional<TorchArchive> torch_file;
  if (const std::string bin = (fs::path(dir) / "pytorch_model.bin").string();
      !fs::exists(weights_path) && fs::exists(bin)) {
    weights_path = bin;
    ASSIGN_OR_RETURN(torch_file, TorchArchive::Open(weights_path));
  } else {
    ASSIGN_OR_RETURN(safetensors, SafetensorsFile::Open(weights_path));
  }
  absl::StatusOr<ResolvedWeights> resolved = ResolveEncoderWeights(
      safetensors ? safetensors->tensors() : torch_file->tensors(),
      safetensors ? safetensors->holder() : torch_file->holder(), *config, options.device, options.dtype);
  if (!resolved.ok()) {
    return absl::Status(resolved.status().code(), absl::StrCat(weights_path, ": ", resolved.status().message()));
  }
  BertEncoder::Options enc;
  enc.device = options.device;
  enc.dtype = options.dtype;
  enc.reduced_residual_stream = options.reduced_residual_stream;
  enc.fingerprint = ComputeModelFingerprint(resolved->fingerprint, *tokenizer);
  enc.weights_fingerprint = resolved->fingerprint;
  ASSIGN_OR_RETURN(std::unique_ptr<BertEncoder> encoder,
                   BertEncoder::Create(*config, std::move(resolved->weights), enc));
  LoadedModel out;
  out.config = *config;
  out.encoder = std::move(encoder);
  out.tokenizer = std::move(tokenizer);
  out.fingerprint = enc.fingerprint;
  out.weights_fingerprint = enc.weights_fingerprint;
  return out;
}

std::string ComputeModelFingerprint(std::string_view weights_fingerprint, const BertTokenizer& tokenizer) {
  Sha256 sha;
  sha.Update(absl::StrCat("adapterd-model-v2\nweights=", std::string(weights_fingerprint), "\ndo_lower_case=",
                          tokenizer.options().do_lower_case ? 1 : 0, "\nvocab=", tokenizer.vocab_size(), "\n"));
  // vocab.txt lines cannot hold '\n', so one per token is unambiguous.
  for (const std::string& token : tokenizer.tokens()) {
    sha.Update(token);
    sha.Update("\n");
  }
  return absl::StrCat("sha256:", sha.HexDigest());
}

}  // namespace adapterd::model
