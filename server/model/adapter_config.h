// What a task's adapters and head are (server/model/adapter_set.h holds
// their tensors): the adapters' geometry, the task's kind and the
// parameters its kind keeps (labels or tags, the regression target's
// standardisation, the QA windows, the tagging window). Stored in the
// adapter file (docs/ADAPTER_FORMAT.md). No LibTorch (adapterd::
// model_formats), so that training's kind rules and dataset validation
// build without it.
//
// Thread safety: plain data and pure functions.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTER_CONFIG_H_
#define ADAPTERD_SERVER_MODEL_ADAPTER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/task_kinds.h"

namespace adapterd::model {

// The adapters' nonlinearity. kGeluNew is GELU's tanh approximation, which
// HuggingFace and AdapterHub call "gelu_new" (at::gelu(x, "tanh")); kGelu is
// the exact (erf) form.
enum class Activation { kGelu, kRelu, kTanh, kSilu, kGeluNew };
std::string_view ActivationName(Activation a);
absl::StatusOr<Activation> ParseActivation(std::string_view name);

struct AdapterConfig {
  // Bottleneck size m. The paper uses 8-256; 64 is adapterd's default.
  int64_t bottleneck_size = 64;
  Activation activation = Activation::kGelu;
  // D and U are drawn from N(0, init_std) truncated at 2 init_std.
  double init_std = 1e-2;
  TaskKind kind = TaskKind::kSequenceClassification;
  // The head's outputs' names in logit order: the class labels of the
  // classification kinds (at least 2, distinct, non-empty); token
  // classification's BIO tags ("O", then B-X and I-X per entity type:
  // BioTagSet's order); empty for regression and extractive QA.
  std::vector<std::string> labels;
  // Regression: the training targets' standardisation.
  Standardization target;
  // Extractive QA: its windows.
  QaWindowing qa;
  // Token classification: the window length (tokens, specials included) the
  // task trained with, which Predict cuts long texts at too (within the
  // server's --max_seq_len); 0 in files written before it was recorded:
  // Predict then uses the server's.
  int32_t tagging_max_seq_len = 0;

  int64_t num_labels() const { return static_cast<int64_t>(labels.size()); }
  // The length of the rows a long input is cut into (the token kinds'
  // windows, a pooled kind's truncation) when rows may be at most `limit`
  // tokens: the task's trained window within `limit` (extractive QA, token
  // classification), else `limit`. Training, validation and Predict all cut
  // at it, so Predict sees the windows the task was trained on.
  int32_t window_length(int32_t limit) const;
  // K, the head's outputs: the labels or tags, 1 (regression), 2 (QA).
  int64_t num_outputs() const;
  // INVALID_ARGUMENT naming the first rule broken.
  absl::Status Validate() const;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTER_CONFIG_H_
