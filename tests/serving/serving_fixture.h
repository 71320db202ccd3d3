// Fixtures for the serving tests: a tiny deterministic encoder and word
// tokenizer, a RocksDB in a temp dir, adapters promoted through storage, and
// a counting ServingObserver.
#ifndef ADAPTERD_TESTS_SERVING_SERVING_FIXTURE_H_
#define ADAPTERD_TESTS_SERVING_SERVING_FIXTURE_H_

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "common/testing/temp_dir.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/tokenizer.h"
#include "server/serving/serving_observer.h"
#include "storage/database.h"
#include "tests/model/tiny_bert.h"

namespace adapterd::serving::testing {

inline constexpr int kWords = 40;

using ::adapterd::testing::TempDir;

inline model::BertConfig FixtureConfig() { return model::testing::TinyBertConfig(kWords, 32); }

// Same seed, same weights and fingerprint. std 0.2 so rows differ visibly.
inline std::unique_ptr<model::BertEncoder> FixtureEncoder(uint64_t seed = 3) {
  auto enc = model::testing::TinyBertEncoder(FixtureConfig(), seed, 0.2);
  return enc.ok() ? *std::move(enc) : nullptr;
}

inline std::unique_ptr<model::BertTokenizer> FixtureTokenizer(int max_seq_len = 32) {
  model::TokenizerOptions o;
  o.max_seq_len = max_seq_len;
  auto tok = model::testing::WordTokenizer(kWords, o);
  return tok.ok() ? *std::move(tok) : nullptr;
}

// "w<a> w<a+1> ..." of `words` words.
inline std::string Text(int first, int words) {
  std::string s;
  for (int i = 0; i < words; ++i) absl::StrAppend(&s, i ? " " : "", "w", (first + i * 7) % kWords);
  return s;
}

inline std::vector<std::string> Labels(int n) {
  std::vector<std::string> labels;
  for (int i = 0; i < n; ++i) labels.push_back(absl::StrCat("label", i));
  return labels;
}

// Serialised adapter bytes of a random (far from identity) set of `config`
// (its kind, labels, standardisation or windows) for `encoder`.
inline absl::StatusOr<std::string> KindAdapterBytes(const model::BertEncoder& encoder, model::AdapterConfig config,
                                                    uint64_t seed, const std::string& fingerprint = "") {
  config.init_std = 0.3;
  ASSIGN_OR_RETURN(auto set, model::AdapterSet::CreateInitialized(encoder.config(), encoder.weights(), config, seed,
                                                                  c10::Device(c10::kCPU)));
  return model::SerializeAdapterSet(*set, fingerprint.empty() ? encoder.fingerprint() : fingerprint);
}

// A sequence classification task's: `num_labels` labels. `fingerprint`
// overrides the encoder's (to fake another encoder).
inline absl::StatusOr<std::string> AdapterBytes(const model::BertEncoder& encoder, int num_labels, uint64_t seed,
                                                int64_t bottleneck = 8, const std::string& fingerprint = "") {
  model::AdapterConfig ac;
  ac.bottleneck_size = bottleneck;
  ac.labels = Labels(num_labels);
  return KindAdapterBytes(encoder, ac, seed, fingerprint);
}

// Promotes `bytes` as the task's next version (an import: no job).
inline absl::StatusOr<int64_t> Promote(storage::Database& db, const std::string& tenant, const std::string& task_id,
                                       int num_labels, std::string bytes) {
  storage::Promotion p;
  p.task.set_tenant(tenant);
  p.task.set_task_id(task_id);
  for (const std::string& l : Labels(num_labels)) p.task.add_labels(l);
  p.task.mutable_adapter_config()->set_bottleneck_size(8);
  p.adapter_bytes = std::move(bytes);
  ASSIGN_OR_RETURN(storage::PromotionResult r, db.PromoteAdapterVersion(std::move(p)));
  return r.version;
}

inline absl::StatusOr<std::unique_ptr<storage::Database>> OpenDb(const TempDir& dir) {
  storage::Database::Options o;
  o.path = dir.Sub("db");
  o.sync_writes = false;
  return storage::Database::Open(o);
}

// Counts every hook; thread-safe.
class CountingObserver : public ServingObserver {
 public:
  void OnBatch(const BatchStats& stats) override {
    absl::MutexLock lock(&mu_);
    batches_.push_back(stats);
  }
  void OnDropped(DropReason reason, int64_t rows) override { dropped_[static_cast<int>(reason)] += rows; }
  void OnCacheHit(CacheTier tier) override { ++hits_[static_cast<int>(tier)]; }
  void OnCacheMiss(CacheTier tier) override { ++misses_[static_cast<int>(tier)]; }
  void OnCacheEviction(CacheTier tier) override { ++evictions_[static_cast<int>(tier)]; }
  void OnLoad(CacheTier tier, double) override { ++loads_[static_cast<int>(tier)]; }
  void OnServingForm(ServingFormEvent event) override { ++serving_forms_[static_cast<int>(event)]; }

  int64_t hits(CacheTier t) const { return hits_[static_cast<int>(t)]; }
  int64_t misses(CacheTier t) const { return misses_[static_cast<int>(t)]; }
  int64_t evictions(CacheTier t) const { return evictions_[static_cast<int>(t)]; }
  // kHost loads are RocksDB reads; kDevice loads are deserialisations.
  int64_t loads(CacheTier t) const { return loads_[static_cast<int>(t)]; }
  int64_t dropped(DropReason r) const { return dropped_[static_cast<int>(r)]; }
  // Loads from RocksDB that did `e` with a serving form.
  int64_t serving_forms(ServingFormEvent e) const { return serving_forms_[static_cast<int>(e)]; }
  std::vector<BatchStats> batches() const {
    absl::MutexLock lock(&mu_);
    return batches_;
  }
  int64_t max_batch_rows() const {
    int64_t m = 0;
    for (const BatchStats& b : batches()) m = std::max(m, b.rows);
    return m;
  }

 private:
  std::atomic<int64_t> hits_[2] = {0, 0}, misses_[2] = {0, 0}, evictions_[2] = {0, 0}, loads_[2] = {0, 0};
  std::atomic<int64_t> dropped_[2] = {0, 0};
  std::atomic<int64_t> serving_forms_[5] = {0, 0, 0, 0, 0};
  mutable absl::Mutex mu_;  // protects batches_
  std::vector<BatchStats> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace adapterd::serving::testing

#endif  // ADAPTERD_TESTS_SERVING_SERVING_FIXTURE_H_
