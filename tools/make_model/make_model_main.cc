// adapterd-make-model: writes a randomly initialised HuggingFace-format BERT
// directory (config.json, model.safetensors, vocab.txt,
// tokenizer_config.json). The vocabulary is built in: specials, characters,
// "##" continuations and frequent English words, so English text tokenizes
// into words. Used for tests, benchmarks and as the quickstart's fallback
// model when no pretrained encoder is available.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/model/bert_config.h"
#include "server/model/checkpoint_writer.h"
#include "tools/make_model/english_vocab.h"

int main(int argc, char** argv) {
  using adapterd::model::BertConfig;
  CLI::App app{"Write a random HuggingFace-format BERT checkpoint (not pretrained)."};
  std::string out_dir;
  std::string preset = "tiny";
  uint64_t seed = 1;
  double init_range = 0.02;
  int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0, max_positions = 512, vocab_size = 0;
  std::string dtype = "F32";
  bool bert_prefix = false;
  app.add_option("--out", out_dir, "Output directory (created if missing)")->required();
  app.add_option("--preset", preset,
                 "Size preset: tiny (2x128), mini (4x256), small (4x512), base (12x768), large (24x1024)")
      ->capture_default_str();
  app.add_option("--layers", layers, "Override num_hidden_layers");
  app.add_option("--hidden", hidden, "Override hidden_size (intermediate defaults to 4x)");
  app.add_option("--heads", heads, "Override num_attention_heads");
  app.add_option("--intermediate", intermediate, "Override intermediate_size");
  app.add_option("--max_positions", max_positions, "max_position_embeddings")->capture_default_str();
  app.add_option("--vocab_size", vocab_size, "config vocab_size (default: the built-in vocabulary's size)");
  app.add_option("--seed", seed, "Random seed")->capture_default_str();
  app.add_option("--init_range", init_range,
                 "Std of the truncated-normal weights (HF's initializer_range). 0.02 is BERT's; a frozen random\n"
                 "encoder at 0.02 passes almost no token information, so adapters on it learn little. Larger\n"
                 "values (e.g. 0.2) keep token identity through the layers.")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 10.0));
  app.add_option("--dtype", dtype, "Stored dtype: F32, F16 or BF16")->capture_default_str();
  app.add_flag("--bert_prefix", bert_prefix, "Prefix tensor names with 'bert.' (BertForPreTraining style)");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> vocab = adapterd::tools::DefaultEnglishVocab();
  if (vocab_size == 0) vocab_size = static_cast<int64_t>(vocab.size());
  if (vocab_size < static_cast<int64_t>(vocab.size())) vocab.resize(static_cast<size_t>(vocab_size));
  auto config = BertConfig::Preset(preset, vocab_size);
  if (!config.ok()) {
    std::cerr << "adapterd-make-model: " << config.status().message() << "\n";
    return 2;
  }
  if (layers > 0) config->num_hidden_layers = layers;
  if (hidden > 0) {
    config->hidden_size = hidden;
    config->intermediate_size = 4 * hidden;
  }
  if (heads > 0) config->num_attention_heads = heads;
  if (intermediate > 0) config->intermediate_size = intermediate;
  config->max_position_embeddings = max_positions;
  if (auto s = config->Validate(); !s.ok()) {
    std::cerr << "adapterd-make-model: " << s.message() << "\n";
    return 2;
  }
  adapterd::model::HfWriteOptions options;
  options.bert_prefix = bert_prefix;
  auto parsed = adapterd::model::ParseDType(dtype);
  if (!parsed.ok() || (*parsed != adapterd::model::DType::kF32 && *parsed != adapterd::model::DType::kF16 &&
                       *parsed != adapterd::model::DType::kBF16)) {
    std::cerr << "adapterd-make-model: --dtype must be F32, F16 or BF16\n";
    return 2;
  }
  options.dtype = *parsed;
  auto weights = adapterd::model::RandomEncoderWeights(*config, seed, init_range);
  if (!weights.ok()) {
    std::cerr << "adapterd-make-model: " << weights.status().message() << "\n";
    return 1;
  }
  if (auto s = adapterd::model::WriteHfCheckpoint(out_dir, *config, *weights, vocab, options); !s.ok()) {
    std::cerr << "adapterd-make-model: " << s.message() << "\n";
    return 1;
  }
  std::cout << "wrote random (NOT pretrained) BERT to " << out_dir << ": " << config->num_hidden_layers
            << " layers, hidden " << config->hidden_size << ", " << config->num_attention_heads << " heads, vocab "
            << vocab.size() << "\n";
  return 0;
}
