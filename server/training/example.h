// One labelled example, as the trainer and the dataset validator take it,
// and the one check of an example's own fields: the API runs it on every
// uploaded example, the validator on every example a job reads.
// No LibTorch: dataset validation (dataset_validator.h) builds without it.
//
// Thread safety: plain data and a pure function.
#ifndef ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
#define ADAPTERD_SERVER_TRAINING_EXAMPLE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace adapterd::training {

struct Example {
  std::string text;
  std::string text_pair;  // empty for single-text tasks
  std::string label;
};

// A label is a class name that every Predict answer carries: 128 bytes.
inline constexpr size_t kMaxLabelBytes = 128;

// OK, or INVALID_ARGUMENT saying which field is wrong, in this order: the
// text is empty or not UTF-8, the text_pair is not UTF-8, the label is
// missing, not UTF-8 or over kMaxLabelBytes. The message names the field
// only ("label has 129 bytes; the limit is 128"): callers say which example.
absl::Status CheckExampleFields(std::string_view text, std::string_view text_pair, std::string_view label);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
