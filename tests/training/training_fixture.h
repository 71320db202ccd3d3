// Deterministic fixtures shared by the training integration tests and the
// crash-test child process: a small generated encoder, a word tokenizer and
// synthetic datasets whose labels depend on the presence of a word.
#ifndef ADAPTERD_TESTS_TRAINING_TRAINING_FIXTURE_H_
#define ADAPTERD_TESTS_TRAINING_TRAINING_FIXTURE_H_

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/tokenizer.h"
#include "storage/database.h"
#include "storage/dataset_store.h"
#include "tests/model/tiny_bert.h"

namespace adapterd::training::testing {

inline constexpr int kWords = 60;

inline model::BertConfig FixtureConfig() { return model::testing::TinyBertConfig(kWords, 64); }

// Random weights at std 0.2 rather than HF's 0.02: at 0.02 a frozen random
// encoder barely mixes tokens (attention is uniform and each sub-layer adds
// ~3% to the residual stream), so no adapter can find which words occur.
// At 0.2 attention and FFNs carry token information a task can learn from.
inline constexpr double kFixtureInitRange = 0.2;

// Same seed, same weights, same fingerprint: in any process.
inline std::unique_ptr<model::BertEncoder> FixtureEncoder() {
  auto enc = model::testing::TinyBertEncoder(FixtureConfig(), 3, kFixtureInitRange);
  return enc.ok() ? *std::move(enc) : nullptr;
}

inline std::unique_ptr<model::BertTokenizer> FixtureTokenizer() {
  auto tok = model::testing::WordTokenizer(kWords);
  return tok.ok() ? *std::move(tok) : nullptr;
}

// Label "yes" iff word `key` occurs; `noise` of labels flipped. `Chunk`: the
// stored record, or the API's message of the same shape (v1::DatasetChunk).
template <typename Chunk = storage::v1::DatasetChunk>
Chunk PresenceChunk(int n, int key, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Chunk chunk;
  for (int i = 0; i < n; ++i) {
    const bool has = rng() % 2 == 0;
    const int len = 4 + static_cast<int>(rng() % 8);
    const int at = static_cast<int>(rng() % static_cast<uint64_t>(len));
    std::string text;
    for (int j = 0; j < len; ++j) {
      int w = 2 + static_cast<int>(rng() % (kWords - 2));
      if (w == key) w = 2;
      if (has && j == at) w = key;
      absl::StrAppend(&text, j ? " " : "", "w", w);
    }
    bool label = has;
    if (static_cast<double>(rng() % 1000) < noise * 1000) label = !label;
    auto* e = chunk.add_examples();
    e->set_text(text);
    e->set_label(label ? "yes" : "no");
  }
  return chunk;
}

// Stores a dataset in `chunks` pieces.
inline absl::Status PutPresenceDataset(storage::Database& db, const std::string& tenant, const std::string& id, int n,
                                       int key, uint64_t seed, int chunks = 3) {
  storage::v1::DatasetChunk all = PresenceChunk(n, key, 0.05, seed);
  std::vector<storage::v1::DatasetChunk> parts(static_cast<size_t>(chunks));
  for (int i = 0; i < all.examples_size(); ++i)
    *parts[static_cast<size_t>(i % chunks)].add_examples() = all.examples(i);
  storage::v1::DatasetRecord record;
  record.set_tenant(tenant);
  record.set_dataset_id(id);
  record.set_num_examples(n);
  record.set_num_chunks(chunks);
  return db.datasets().Put(record, parts);
}

}  // namespace adapterd::training::testing

#endif  // ADAPTERD_TESTS_TRAINING_TRAINING_FIXTURE_H_
