#include "server/serving/predict_checks.h"

#include "common/utf8.h"

namespace adapterd::serving {

absl::Status CheckPredictText(const std::string& text, const char* field, int64_t i) {
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] is empty"));
  if (!IsValidUtf8(text)) return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] is not valid UTF-8"));
  return absl::OkStatus();
}

}  // namespace adapterd::serving
