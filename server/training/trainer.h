// Trains one task's AdapterSet on the frozen encoder (the paper's protocol).
//
// Only the task's parameters train: adapters, LayerNorm gains/biases and the
// head (or, for baselines, a subset: see TrainableParts). The encoder is
// never written. Defaults (the paper's protocol): AdamW (betas 0.9/0.999,
// eps 1e-6, weight decay 0.01 except LayerNorm and biases), global grad-norm
// clip 1.0, linear warmup over the first 10% of steps then linear decay to 0,
// batch 32, lr 3e-4, 3 epochs, m = 64, max_seq_len 128. Every task kind
// trains the same way; its rows, head, loss and validation metric are its
// own (kind_rules.h, heads.h). Each epoch is validated; the best epoch's
// parameters (the kind's SelectionMetric, ties broken by lower loss) are
// the result.
//
// Precision: on an fp32 encoder everything is fp32. On a bf16 encoder
// (--training_dtype serving on a bf16 server) training is mixed precision:
// the frozen encoder's products and the adapters', forward and backward,
// run in bf16 (the residual stream, LayerNorms and head in fp32, as the
// encoder serves them), while the trained parameters and AdamW's moments
// stay fp32; each micro-batch's forward reads differentiable bf16 casts of
// the adapters and the fp32 LayerNorm affines and head themselves, so
// gradients reach the fp32 parameters. No gradient is ever made for a frozen weight (the
// products' backward computes only the input's: cpu_kernels.h). The
// result is an fp32 set either way. fp16 encoders are refused (no loss
// scaling), as is full fine-tuning on anything but fp32.
//
// Determinism: with the same inputs, hyperparameters and seed, CPU training
// is bit-reproducible, and resuming from any checkpoint reproduces the same
// final parameters as an uninterrupted run. Data order is a function of
// (seed, epoch); dropout draws from LibTorch's default CPU generator, which
// the trainer seeds and checkpoints. Run one trainer per process at a time
// (that generator is process-global).
//
// Thread safety: Train() is reentrant only across processes (see above);
// hooks run on the calling thread.
#ifndef ADAPTERD_SERVER_TRAINING_TRAINER_H_
#define ADAPTERD_SERVER_TRAINING_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_encoder.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"
#include "server/training/hyperparameters.h"
#include "server/training/task_rows.h"

namespace adapterd::training {

struct EpochReport {
  int epoch = 0;  // 1-based
  int64_t step = 0;
  double train_loss = 0;
  Evaluation validation;     // the kind's figures (task_rows.h)
  double learning_rate = 0;  // at the end of the epoch
  double examples_per_second = 0;
};

// Everything needed to resume: written at checkpoints, given back to Train().
struct TrainerState {
  std::string adapter_bytes;       // current parameters (adapter format)
  std::string best_adapter_bytes;  // best epoch so far (empty before one ends)
  std::string optimizer_state;     // AdamW moments (LibTorch archive)
  std::string rng_state;           // default CPU generator state
  int64_t step = 0;                // optimiser steps taken
  int epoch = 0;                   // epochs completed
  std::optional<EpochReport> best;
  std::vector<EpochReport> history;
  double epoch_loss_sum = 0;  // partial sums of the epoch in progress
  int64_t epoch_examples = 0;
};

struct TrainerHooks {
  // After each optimiser step.
  std::function<void(int64_t step, int64_t total_steps, double loss)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
  // Every checkpoint_every_steps and at each epoch end. An error aborts.
  std::function<absl::Status(const TrainerState&)> on_checkpoint;
  // Polled before every micro-batch; true stops training with CANCELLED.
  std::function<bool()> cancelled;
  // Polled after every optimiser step; true writes a checkpoint and stops
  // with ABORTED, so the job resumes from exactly here later (shutdown).
  std::function<bool()> preempted;
  // Runs one micro-batch of device work. Lets a device executor interleave
  // other work (Predict batches) between micro-batches. Default: inline.
  std::function<absl::Status(const std::function<absl::Status()>&)> run_on_device;
};

struct TrainingResult {
  std::unique_ptr<model::AdapterSet> best;  // parameters of the best epoch
  EpochReport best_epoch;
  std::vector<EpochReport> history;
  int64_t steps = 0;
};

struct TrainingData {
  model::TaskKind kind = model::TaskKind::kSequenceClassification;
  std::vector<Example> train;
  // Empty: a split of `train` (validation_fraction; stratified by label for
  // sequence classification).
  std::vector<Example> validation;
  // The head's output names in logit order (AdapterConfig::labels): labels,
  // or token classification's BIO tags; empty for regression and QA. Every
  // example's must be among them.
  std::vector<std::string> labels;
};

// Trains on `encoder` (fp32, or bf16 for mixed precision: above) and
// returns the best epoch's parameters, in fp32. `resume` continues from a checkpoint of the same job.
// A regression task's standardisation comes from its training split; an
// extractive QA task's windows from `hp` (its no-answer rule from whether
// any training example has no answer).
// Errors: INVALID_ARGUMENT (bad hyperparameters, unknown label, empty data,
// an fp16 encoder, full fine-tuning on a bf16 one),
// CANCELLED (hooks.cancelled), ABORTED (hooks.preempted, after a
// checkpoint), or what a hook returned.
absl::StatusOr<TrainingResult> Train(const model::BertEncoder& encoder, const model::BertTokenizer& tokenizer,
                                     const TrainingData& data, const Hyperparameters& hp,
                                     const TrainerHooks& hooks = {}, const TrainerState* resume = nullptr);

// Indices of a stratified split: per label, round(fraction * count) examples
// (at least 1 when the label has 2 or more) go to validation, chosen by a
// seeded shuffle. Kinds without one label per example
// (KindRules::one_label_per_example) split all examples as one group. Returns {train indices, validation indices}, each
// sorted.
std::pair<std::vector<size_t>, std::vector<size_t>> StratifiedSplit(
    const std::vector<Example>& examples, double fraction, uint64_t seed,
    model::TaskKind kind = model::TaskKind::kSequenceClassification);

// Parameters that train per task under `parts`: the elements of `set`'s
// trainable tensors, plus for kFullFineTune every encoder weight but the
// LayerNorm affines (the set's per-task copies replace and train in their
// place), so full fine-tuning counts the encoder's size plus the head. The
// same selection Train() hands to the optimiser (for reports such as
// docs/QUALITY.md).
int64_t TrainableParameterCount(const model::AdapterSet& set, TrainableParts parts, const model::BertEncoder& encoder);

// The kind's figures (task_rows.h) of `set` on `examples`, with rows of
// max_seq_len tokens (QA: the task's own windows).
absl::StatusOr<Evaluation> Evaluate(const model::BertEncoder& encoder, const model::BertTokenizer& tokenizer,
                                    const model::AdapterSet& set, const std::vector<Example>& examples, int max_seq_len,
                                    int batch_size = 64);

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_TRAINER_H_
