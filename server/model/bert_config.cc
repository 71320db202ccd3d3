#include "server/model/bert_config.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace adapterd::model {
namespace {

using Json = nlohmann::json;

absl::Status ReadInt(const Json& j, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be an integer"));
  }
  *out = it->get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadDouble(const Json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("'", key, "' must be a number"));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::Status BertConfig::Validate() const {
  auto positive = [](const char* name, int64_t v) -> absl::Status {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat("config: ", name, " must be > 0, got ", v));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
  RETURN_IF_ERROR(positive("num_attention_heads", num_attention_heads));
  RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  RETURN_IF_ERROR(positive("type_vocab_size", type_vocab_size));
  if (hidden_size % num_attention_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config: hidden_size ", hidden_size,
                                                   " is not a multiple of num_attention_heads ", num_attention_heads));
  }
  if (hidden_act != "gelu") {
    return absl::InvalidArgumentError(
        absl::StrCat("config: hidden_act '", hidden_act, "' is not supported (only \"gelu\")"));
  }
  if (!(layer_norm_eps > 0)) return absl::InvalidArgumentError("config: layer_norm_eps must be > 0");
  for (double p : {hidden_dropout_prob, attention_probs_dropout_prob}) {
    if (!(p >= 0 && p < 1)) return absl::InvalidArgumentError("config: dropout rates must be in [0, 1)");
  }
  if (pad_token_id < 0 || pad_token_id >= vocab_size) {
    return absl::InvalidArgumentError("config: pad_token_id must be a valid token id");
  }
  return absl::OkStatus();
}

// Messages describe the JSON, not the file: callers prefix the path.
absl::StatusOr<BertConfig> BertConfig::FromJson(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("malformed JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("top level must be an object");
  if (auto it = j.find("model_type"); it != j.end() && it->is_string() && *it != "bert") {
    return absl::InvalidArgumentError(absl::StrCat("model_type is '", it->get<std::string>(), "', expected 'bert'"));
  }
  BertConfig c;
  RETURN_IF_ERROR(ReadInt(j, "vocab_size", &c.vocab_size));
  RETURN_IF_ERROR(ReadInt(j, "hidden_size", &c.hidden_size));
  RETURN_IF_ERROR(ReadInt(j, "num_hidden_layers", &c.num_hidden_layers));
  RETURN_IF_ERROR(ReadInt(j, "num_attention_heads", &c.num_attention_heads));
  RETURN_IF_ERROR(ReadInt(j, "intermediate_size", &c.intermediate_size));
  RETURN_IF_ERROR(ReadInt(j, "max_position_embeddings", &c.max_position_embeddings));
  RETURN_IF_ERROR(ReadInt(j, "type_vocab_size", &c.type_vocab_size));
  RETURN_IF_ERROR(ReadInt(j, "pad_token_id", &c.pad_token_id));
  RETURN_IF_ERROR(ReadDouble(j, "layer_norm_eps", &c.layer_norm_eps));
  RETURN_IF_ERROR(ReadDouble(j, "hidden_dropout_prob", &c.hidden_dropout_prob));
  RETURN_IF_ERROR(ReadDouble(j, "attention_probs_dropout_prob", &c.attention_probs_dropout_prob));
  if (auto it = j.find("hidden_act"); it != j.end()) {
    if (!it->is_string()) return absl::InvalidArgumentError("'hidden_act' must be a string");
    c.hidden_act = it->get<std::string>();
  }
  if (auto it = j.find("position_embedding_type"); it != j.end() && it->is_string() && *it != "absolute") {
    return absl::InvalidArgumentError("only absolute position embeddings are supported");
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

std::string BertConfig::ToJson() const {
  Json j = {
      {"architectures", {"BertModel"}},
      {"model_type", "bert"},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"intermediate_size", intermediate_size},
      {"hidden_act", hidden_act},
      {"hidden_dropout_prob", hidden_dropout_prob},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob},
      {"max_position_embeddings", max_position_embeddings},
      {"type_vocab_size", type_vocab_size},
      {"initializer_range", 0.02},
      {"layer_norm_eps", layer_norm_eps},
      {"pad_token_id", pad_token_id},
      {"position_embedding_type", "absolute"},
  };
  return j.dump(2) + "\n";
}

absl::StatusOr<BertConfig> BertConfig::Preset(std::string_view name, int64_t vocab_size) {
  BertConfig c;
  c.vocab_size = vocab_size;
  auto set = [&c](int64_t layers, int64_t hidden, int64_t heads) {
    c.num_hidden_layers = layers;
    c.hidden_size = hidden;
    c.num_attention_heads = heads;
    c.intermediate_size = 4 * hidden;
  };
  if (name == "tiny") {
    set(2, 128, 2);
  } else if (name == "mini") {
    set(4, 256, 4);
  } else if (name == "small") {
    set(4, 512, 8);
  } else if (name == "base") {
    set(12, 768, 12);
  } else if (name == "large") {
    set(24, 1024, 16);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown preset '", std::string(name), "' (tiny, mini, small, base, large)"));
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace adapterd::model
