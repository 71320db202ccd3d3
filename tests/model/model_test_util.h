// Shared fixtures for server/model tests: tiny generated encoders and inputs.
#ifndef ADAPTERD_TESTS_MODEL_MODEL_TEST_UTIL_H_
#define ADAPTERD_TESTS_MODEL_MODEL_TEST_UTIL_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "tests/model/tiny_bert.h"

namespace adapterd::model::testing {

// A BERT small enough to run hundreds of forwards in a test (vocabulary 50).
inline BertConfig TinyConfig() { return TinyBertConfig(45, 32); }

inline std::unique_ptr<BertEncoder> MakeEncoder(const BertConfig& config, uint64_t seed = 1) {
  auto enc = TinyBertEncoder(config, seed);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return enc.ok() ? *std::move(enc) : nullptr;
}

// Rows of token ids padded with 0 to the longest; mask marks real tokens.
inline EncoderInput MakeInput(const std::vector<std::vector<int64_t>>& rows, int64_t pad_to = 0) {
  int64_t len = pad_to;
  for (const auto& r : rows) len = std::max<int64_t>(len, static_cast<int64_t>(r.size()));
  const int64_t b = static_cast<int64_t>(rows.size());
  at::Tensor ids = at::zeros({b, len}, at::kLong);
  at::Tensor mask = at::zeros({b, len}, at::kLong);
  for (int64_t i = 0; i < b; ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) {
      ids[i][static_cast<int64_t>(j)] = rows[i][j];
      mask[i][static_cast<int64_t>(j)] = 1;
    }
  }
  return {ids, at::zeros_like(ids), mask};
}

inline AdapterConfig MakeAdapterConfig(int64_t num_labels, int64_t bottleneck = 8) {
  AdapterConfig c;
  c.bottleneck_size = bottleneck;
  for (int64_t i = 0; i < num_labels; ++i) c.labels.push_back(absl::StrCat("label", i));
  return c;
}

// A set of `c` (any kind: its labels or tags, ...) with non-trivial values
// everywhere (the up-projections too), so outputs differ from the plain
// encoder and between tasks.
inline std::shared_ptr<AdapterSet> MakeTrainedLikeSet(const BertEncoder& enc, AdapterConfig c, uint64_t seed) {
  c.init_std = 0.2;
  auto set = AdapterSet::CreateInitialized(enc.config(), enc.weights(), c, seed, at::kCPU);
  EXPECT_TRUE(set.ok()) << set.status();
  at::manual_seed(seed);
  for (at::Tensor& t : (*set)->Parameters()) t.add_(at::randn_like(t) * 0.05);
  return std::shared_ptr<AdapterSet>(std::move(*set));
}

// The same for a sequence classifier of `num_labels` labels.
inline std::shared_ptr<AdapterSet> MakeTrainedLikeSet(const BertEncoder& enc, int64_t num_labels, uint64_t seed,
                                                      int64_t bottleneck = 8) {
  return MakeTrainedLikeSet(enc, MakeAdapterConfig(num_labels, bottleneck), seed);
}

// Exact equality of two tensors' values (bit-for-bit for non-NaN floats).
inline bool BitEqual(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && at::equal(a, b);
}

// tests/model/testdata/golden (make_golden.py): a tiny BERT checked against
// transformers' forward, and the inputs it was run on.
inline std::string GoldenDir() {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/model/testdata/golden";
}

// golden/inputs.json (input_ids, token_type_ids, attention_mask) as int64
// tensors.
inline absl::StatusOr<EncoderInput> ReadGoldenInput() {
  absl::StatusOr<std::string> text = ReadFileToString(GoldenDir() + "/inputs.json");
  if (!text.ok()) return text.status();
  const nlohmann::json inputs = nlohmann::json::parse(*text);
  auto tensor = [&](const char* key) {
    const auto rows = inputs[key].get<std::vector<std::vector<int64_t>>>();
    at::Tensor t = at::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, at::kLong);
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = 0; j < rows[i].size(); ++j) t[i][j] = rows[i][j];
    }
    return t;
  };
  return EncoderInput{tensor("input_ids"), tensor("token_type_ids"), tensor("attention_mask")};
}

// Nested JSON arrays of numbers (expected.json's logits) as a float tensor of
// their shape.
inline at::Tensor JsonToFloatTensor(const nlohmann::json& j) {
  std::vector<int64_t> shape;
  for (const nlohmann::json* level = &j; level->is_array(); level = &(*level)[0]) {
    shape.push_back(static_cast<int64_t>(level->size()));
  }
  std::vector<float> flat;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& v) {
    if (v.is_array()) {
      for (const auto& x : v) walk(x);
    } else {
      flat.push_back(v.get<float>());
    }
  };
  walk(j);
  return at::tensor(flat, at::kFloat).reshape(shape);
}

// The regular files directly in `dir`: base name -> contents (an AdapterHub
// directory as ImportAdapterHub takes it).
inline std::map<std::string, std::string, std::less<>> ReadDirectoryFiles(const std::string& dir) {
  std::map<std::string, std::string, std::less<>> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    absl::StatusOr<std::string> bytes = ReadFileToString(entry.path().string());
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (bytes.ok()) files[entry.path().filename().string()] = *std::move(bytes);
  }
  return files;
}

inline double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

}  // namespace adapterd::model::testing

#endif  // ADAPTERD_TESTS_MODEL_MODEL_TEST_UTIL_H_
