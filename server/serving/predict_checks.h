// What a Predict request's inputs must be, checked in one place: the API
// checks a request with it before anything is read (server/api/
// request_checks.h), and the inference engine checks every request it is
// handed with it too (in-process callers skip the API). No LibTorch, so the
// API's input checks and their fuzzer build without it.
//
// INVALID_ARGUMENT naming the field: no texts; text_pairs given but not one
// per text; a text or text pair that is empty or not valid UTF-8; a negative
// version; a threshold outside [0, 1]; top_k_answers outside [0,
// kMaxTopKAnswers]. What a task's kind needs of a request (QA's contexts)
// is checked once the task is known (InferenceEngine::Predict).
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_SERVING_PREDICT_CHECKS_H_
#define ADAPTERD_SERVER_SERVING_PREDICT_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace adapterd::serving {

// Extractive QA returns at most this many answers per question (run_squad's
// n-best size).
inline constexpr int32_t kMaxTopKAnswers = 20;

// Multi-label's threshold (0 = the task's) and QA's answer count (0 = 1).
absl::Status CheckPredictOptions(double threshold, int64_t top_k_answers);

// One text of a request: `field` is "texts" or "text_pairs", `i` its index.
absl::Status CheckPredictText(const std::string& text, const char* field, int64_t i);

// `Texts`: any indexable sequence of std::string (std::vector, a proto's
// repeated string field).
template <typename Texts>
absl::Status CheckPredictInputs(const Texts& texts, const Texts& text_pairs, int64_t version) {
  if (texts.empty()) return absl::InvalidArgumentError("texts is empty");
  if (!text_pairs.empty() && text_pairs.size() != texts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("text_pairs has ", text_pairs.size(), " entries but texts has ",
                                                   texts.size(), ": give one pair per text, or none"));
  }
  for (int64_t i = 0; i < static_cast<int64_t>(texts.size()); ++i) {
    if (absl::Status s = CheckPredictText(texts[i], "texts", i); !s.ok()) return s;
  }
  for (int64_t i = 0; i < static_cast<int64_t>(text_pairs.size()); ++i) {
    if (absl::Status s = CheckPredictText(text_pairs[i], "text_pairs", i); !s.ok()) return s;
  }
  if (version < 0) return absl::InvalidArgumentError("version must not be negative");
  return absl::OkStatus();
}

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_PREDICT_CHECKS_H_
