// The tiny generated BERTs and word vocabularies that tests of every layer
// (model, serving, training, API, end to end) build on: one definition, each
// suite choosing only its sizes.
//
// A tiny BERT has 2 layers, 4 heads, an intermediate size of twice the
// hidden size and 64 positions. A word vocabulary is BERT's five special
// tokens followed by "w0", "w1", ... (ids 5, 6, ...), so texts like "w3 w7"
// tokenize one word to one id and the vocabulary size is 5 + words.
// Everything is deterministic: the same seed gives the same weights and the
// same fingerprint, in any process.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_TESTS_MODEL_TINY_BERT_H_
#define ADAPTERD_TESTS_MODEL_TINY_BERT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/bert_config.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/tokenizer.h"

namespace adapterd::model::testing {

inline constexpr int kSpecialTokens = 5;  // [PAD] [UNK] [CLS] [SEP] [MASK]

inline BertConfig TinyBertConfig(int words, int64_t hidden_size) {
  BertConfig c;
  c.vocab_size = kSpecialTokens + words;
  c.hidden_size = hidden_size;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 2 * hidden_size;
  c.max_position_embeddings = 64;
  return c;
}

// An encoder with RandomEncoderWeights(config, seed, init_range), its
// fingerprint computed from those weights.
inline absl::StatusOr<std::unique_ptr<BertEncoder>> TinyBertEncoder(const BertConfig& config, uint64_t seed,
                                                                    double init_range = 0.02) {
  ASSIGN_OR_RETURN(EncoderWeights w, RandomEncoderWeights(config, seed, init_range));
  BertEncoder::Options options;
  ASSIGN_OR_RETURN(options.fingerprint, ComputeEncoderFingerprint(config, w));
  return BertEncoder::Create(config, std::move(w), std::move(options));
}

inline std::vector<std::string> WordVocab(int words) {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < words; ++i) tokens.push_back(absl::StrCat("w", i));
  return tokens;
}

inline absl::StatusOr<std::unique_ptr<BertTokenizer>> WordTokenizer(int words, TokenizerOptions options = {}) {
  return BertTokenizer::FromTokens(WordVocab(words), options);
}

}  // namespace adapterd::model::testing

#endif  // ADAPTERD_TESTS_MODEL_TINY_BERT_H_
