// One labelled example, as the trainer and the dataset validator take it.
// No LibTorch: dataset validation (dataset_validator.h) builds without it.
#ifndef ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
#define ADAPTERD_SERVER_TRAINING_EXAMPLE_H_

#include <string>

namespace adapterd::training {

struct Example {
  std::string text;
  std::string text_pair;  // empty for single-text tasks
  std::string label;
};

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_EXAMPLE_H_
