#include "server/serving/predict_checks.h"

#include "common/utf8.h"

namespace adapterd::serving {

absl::Status CheckPredictText(const std::string& text, const char* field, int64_t i) {
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] is empty"));
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] is not valid UTF-8"));
  return absl::OkStatus();
}

absl::Status CheckPredictOptions(double threshold, int64_t top_k_answers) {
  if (!(threshold >= 0 && threshold <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("threshold is ", threshold, "; it must be in [0, 1] (0: the task's)"));
  }
  if (top_k_answers < 0 || top_k_answers > kMaxTopKAnswers) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k_answers is ", top_k_answers, "; it must be in [0, ", kMaxTopKAnswers, "] (0: 1)"));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::serving
