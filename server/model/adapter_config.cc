#include "server/model/adapter_config.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace adapterd::model {

std::string_view ActivationName(Activation a) {
  switch (a) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kRelu:
      return "relu";
    case Activation::kTanh:
      return "tanh";
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluNew:
      return "gelu_new";
  }
  return "gelu";
}

absl::StatusOr<Activation> ParseActivation(std::string_view name) {
  for (Activation a :
       {Activation::kGelu, Activation::kRelu, Activation::kTanh, Activation::kSilu, Activation::kGeluNew}) {
    if (name == ActivationName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown adapter activation '", std::string(name), "' (gelu, gelu_new, relu, tanh, silu)"));
}

absl::Status AdapterConfig::Validate() const {
  if (bottleneck_size < 1 || bottleneck_size > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("adapter bottleneck size must be in [1, 4096], got ", bottleneck_size));
  }
  if (!(init_std >= 0 && init_std <= 1)) {
    return absl::InvalidArgumentError("adapter init_std must be in [0, 1]");
  }
  const KindSpec* spec = FindKindSpec(static_cast<int32_t>(kind));
  if (spec == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("unknown task kind ", static_cast<int32_t>(kind)));
  return spec->check_parameters(*this);
}

int32_t AdapterConfig::window_length(int32_t limit) const {
  if (kind == TaskKind::kExtractiveQa) return std::min(qa.max_seq_len, limit);
  if (kind == TaskKind::kTokenClassification && tagging_max_seq_len > 0) return std::min(tagging_max_seq_len, limit);
  return limit;
}

int64_t AdapterConfig::num_outputs() const {
  const KindSpec* spec = FindKindSpec(static_cast<int32_t>(kind));
  return spec != nullptr && spec->fixed_outputs > 0 ? spec->fixed_outputs : num_labels();
}

}  // namespace adapterd::model
