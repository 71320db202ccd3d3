// A training job's hyperparameters: what the trainer takes, their ranges,
// and the mapping from the API's message (a job's explicit fields over the
// server's defaults). The one place a hyperparameter is checked: the job
// manager's validator resolves a request (the first step of its validation,
// before any data is read) and stores the result whole; the runner reads the
// stored job back through the same function.
//
// No LibTorch in this header.
//
// Thread safety: plain data and pure functions.
#ifndef ADAPTERD_SERVER_TRAINING_HYPERPARAMETERS_H_
#define ADAPTERD_SERVER_TRAINING_HYPERPARAMETERS_H_

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace adapterd::training {

enum class TrainableParts {
  kAdapters,  // adapters + every LayerNorm affine + head (the paper's method)
  // Adapters + head, every LayerNorm affine frozen at the encoder's own (where
  // a set starts): AdapterHub's regime (freeze_layer_norms).
  kAdaptersAndHead,
  kHeadAndLayerNorm,  // baseline: adapters disabled (U = 0), LayerNorms + head train
  kHeadOnly,          // baseline: adapters disabled, only the head trains
  // Baseline for benchmarks and quality comparisons: adapters disabled, the
  // whole encoder trains (needs an encoder created with Options::trainable;
  // its weights change in place).
  kFullFineTune,
};

struct Hyperparameters {
  double learning_rate = 3e-4;
  int epochs = 3;
  int batch_size = 32;
  // Rows per forward/backward; gradients accumulate up to batch_size.
  // 0 means batch_size (no accumulation).
  int micro_batch_size = 0;
  int64_t bottleneck_size = 64;
  std::string activation = "gelu";
  double init_std = 1e-2;
  int max_seq_len = 128;
  uint64_t seed = 42;
  // Stratified split of the training data when no validation set is given.
  double validation_fraction = 0.1;
  double warmup_fraction = 0.1;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-6;
  // Checkpoint every N optimiser steps (0: only at epoch ends).
  int checkpoint_every_steps = 0;
  // Extractive QA windows (BERT's run_squad settings): context tokens
  // between two windows' starts (0: DefaultDocStride(max_seq_len), a third
  // of the window, resolved by ResolveHyperparameters), the longest
  // question in tokens (longer ones are cut; a window gives a question at
  // most half its length: QuestionBudget), the longest answer.
  int doc_stride = 0;
  int max_question_len = 64;
  int max_answer_len = 30;
  TrainableParts trainable = TrainableParts::kAdapters;

  // INVALID_ARGUMENT naming the first field out of range.
  absl::Status Validate() const;
  // The question tokens a window keeps: max_question_len, at most half of
  // max_seq_len (the context keeps the rest).
  int QuestionBudget() const { return std::min(max_question_len, max_seq_len / 2); }
};

// Server-wide defaults overlaid by a job's explicit hyperparameters; the
// result is validated (INVALID_ARGUMENT naming the field).
absl::StatusOr<Hyperparameters> ResolveHyperparameters(const storage::v1::Hyperparameters& requested,
                                                       const Hyperparameters& defaults);

// Every field of `hp` that the API exposes, set (a job's resolved
// hyperparameters). ResolveHyperparameters(ToProto(hp), d) gives back `hp`'s
// API fields whatever `d` is.
storage::v1::Hyperparameters ToProto(const Hyperparameters& hp);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_HYPERPARAMETERS_H_
