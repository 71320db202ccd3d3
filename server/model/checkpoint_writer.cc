#include "server/model/checkpoint_writer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {

absl::StatusOr<EncoderWeights> RandomEncoderWeights(const BertConfig& config, uint64_t seed, double init_range) {
  RETURN_IF_ERROR(config.Validate());
  return GuardTorch("random encoder", [&]() -> absl::StatusOr<EncoderWeights> {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto normal = [&](const std::vector<int64_t>& shape, double std) {
      return at::empty(shape, at::kFloat).normal_(0.0, std, gen);
    };
    EncoderWeights w;
    w.layers.resize(static_cast<size_t>(config.num_hidden_layers));
    // Drawn in table order, so a seed gives the same weights whatever reads them.
    ForEachEncoderTensor(
        config.num_hidden_layers, /*has_pooler=*/true, [&](const EncoderTensorSpec& spec, int64_t layer) {
          const std::vector<int64_t> shape = spec.Shape(config);
          TensorOf(w, spec, layer) =
              spec.role == EncoderTensorRole::kLayerNormGain ? normal(shape, 0.1).add_(1.0) : normal(shape, init_range);
        });
    return w;
  });
}

absl::StatusOr<std::string> SerializeEncoderWeights(const EncoderWeights& weights, const HfWriteOptions& options) {
  SafetensorsWriter writer;
  writer.SetMetadata("format", "pt");
  for (const auto& [canonical, t] : weights.Named()) {
    std::string name = canonical;
    if (options.legacy_layer_norm_names && name.find("LayerNorm.") != std::string::npos) {
      if (name.ends_with(".weight"))
        name = name.substr(0, name.size() - 6) + "gamma";
      else if (name.ends_with(".bias"))
        name = name.substr(0, name.size() - 4) + "beta";
    }
    if (options.bert_prefix) name.insert(0, "bert.");
    RETURN_IF_ERROR(AddTensor(writer, name, t, options.dtype));
  }
  for (const auto& [name, t] : options.extra_tensors) {
    RETURN_IF_ERROR(AddTensor(writer, name, t, options.dtype));
  }
  return writer.Serialize();
}

absl::Status WriteHfCheckpoint(const std::string& dir, const BertConfig& config, const EncoderWeights& weights,
                               const std::vector<std::string>& vocab, const HfWriteOptions& options) {
  RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(vocab.size()) > config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab has ", vocab.size(), " tokens; config allows ", config.vocab_size));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create '", dir, "': ", ec.message()));
  const std::filesystem::path root(dir);
  ASSIGN_OR_RETURN(std::string tensors, SerializeEncoderWeights(weights, options));
  RETURN_IF_ERROR(WriteFileAtomically((root / "model.safetensors").string(), tensors));
  RETURN_IF_ERROR(WriteFileAtomically((root / "config.json").string(), config.ToJson()));
  RETURN_IF_ERROR(WriteFileAtomically((root / "vocab.txt").string(), absl::StrJoin(vocab, "\n") + "\n"));
  nlohmann::json tok = {{"do_lower_case", options.do_lower_case},
                        {"model_max_length", config.max_position_embeddings},
                        {"tokenizer_class", "BertTokenizer"}};
  return WriteFileAtomically((root / "tokenizer_config.json").string(), tok.dump(2) + "\n");
}

}  // namespace adapterd::model
