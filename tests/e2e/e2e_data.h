// Data the end-to-end tests send and compare: learnable examples made from a
// seed, and predictions reduced to raw score bits (compared bit for bit
// across restarts). Header-only; needs the proto library.
#ifndef ADAPTERD_TESTS_E2E_E2E_DATA_H_
#define ADAPTERD_TESTS_E2E_E2E_DATA_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd::e2e {

// `n` examples of words w0..w39, each text at least `min_text_bytes` long
// (and at least 6 words), labelled "yes" when w7 occurs and "no" otherwise.
inline std::vector<v1::Example> PresenceExamples(int n, size_t min_text_bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<v1::Example> out;
  for (int i = 0; i < n; ++i) {
    std::string text;
    bool has = false;
    for (int w = 0; w < 6 || text.size() < min_text_bytes; ++w) {
      const int word = static_cast<int>(rng() % 40);
      has = has || word == 7;
      absl::StrAppend(&text, w > 0 ? " " : "", "w", word);
    }
    v1::Example e;
    e.set_text(text);
    e.set_label(has ? "yes" : "no");
    out.push_back(std::move(e));
  }
  return out;
}

// A Predict of two fixed texts with every label's score.
inline v1::PredictRequest TwoTextPredict(const std::string& task) {
  v1::PredictRequest req;
  req.set_task_id(task);
  req.add_texts("w7 w1 w2 w3");
  req.add_texts("w4 w5 w6 w8");
  req.set_return_all_scores(true);
  return req;
}

// Every score of `r`, in order, as raw float bits.
inline std::vector<uint32_t> ScoreBits(const v1::PredictResponse& r) {
  std::vector<uint32_t> bits;
  for (const v1::Prediction& p : r.predictions()) {
    for (const v1::LabelScore& s : p.all_scores()) {
      const float f = s.score();
      uint32_t b = 0;
      std::memcpy(&b, &f, sizeof(b));
      bits.push_back(b);
    }
  }
  return bits;
}

}  // namespace adapterd::e2e

#endif  // ADAPTERD_TESTS_E2E_E2E_DATA_H_
