#include "server/training/trainer.h"

#include <ATen/ATen.h>
// clip_grad.h uses torch::Tensor without including its declaration.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/adapter_format.h"
#include "server/model/tensor_io.h"
#include "server/model/text_pieces.h"
#include "server/model/training_support.h"
#include "server/training/kind_rules.h"
#include "server/training/row_batches.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training {
namespace {

using model::AdapterSet;
using model::BertEncoder;
using model::BertTokenizer;

// Fisher-Yates with a 64-bit Mersenne Twister: the same order on every
// platform for a given (seed, epoch), which resuming relies on.
std::vector<size_t> EpochOrder(size_t n, uint64_t seed, int epoch) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<at::Tensor> Trainable(const AdapterSet& set, TrainableParts parts, bool decayed) {
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : set.Named()) {
    const bool is_head = name.starts_with("head.");
    const bool is_ln = name.find("layer_norm") != std::string::npos;
    bool include = parts == TrainableParts::kAdapters || is_head ||
                   (parts == TrainableParts::kAdaptersAndHead && !is_ln) ||
                   ((parts == TrainableParts::kHeadAndLayerNorm || parts == TrainableParts::kFullFineTune) && is_ln);
    const bool decays = name.ends_with(".weight") && !is_ln;
    if (include && decays == decayed) out.push_back(t);
  }
  return out;
}

// The encoder tensors full fine-tuning trains: all but the LayerNorm affines.
// The adapter set's per-task copies replace those in the forward pass, and
// train as part of the set.
std::vector<at::Tensor> FullFineTuneEncoderTensors(const model::EncoderWeights& w) {
  std::vector<at::Tensor> out;
  model::ForEachEncoderTensor(static_cast<int64_t>(w.layers.size()), w.has_pooler(),
                              [&](const model::EncoderTensorSpec& spec, int64_t layer) {
                                if (spec.role != model::EncoderTensorRole::kLayerNormGain &&
                                    spec.role != model::EncoderTensorRole::kLayerNormBias) {
                                  out.push_back(model::TensorOf(w, spec, layer));
                                }
                              });
  return out;
}

}  // namespace

int64_t TrainableParameterCount(const AdapterSet& set, TrainableParts parts, const model::BertEncoder& encoder) {
  int64_t n = 0;
  for (bool decayed : {true, false}) {
    for (const at::Tensor& t : Trainable(set, parts, decayed)) n += t.numel();
  }
  if (parts == TrainableParts::kFullFineTune) {
    for (const at::Tensor& t : FullFineTuneEncoderTensors(encoder.weights())) n += t.numel();
  }
  return n;
}

std::pair<std::vector<size_t>, std::vector<size_t>> StratifiedSplit(const std::vector<Example>& examples,
                                                                    double fraction, uint64_t seed,
                                                                    model::TaskKind kind) {
  const bool by_class = KindRulesOf(kind).one_label_per_example();
  std::map<std::string, std::vector<size_t>> by_label;
  for (size_t i = 0; i < examples.size(); ++i) by_label[by_class ? examples[i].label : ""].push_back(i);
  std::vector<size_t> train, val;
  std::mt19937_64 rng(seed ^ 0x5DEECE66Dull);
  for (auto& [label, idx] : by_label) {
    for (size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[static_cast<size_t>(rng() % i)]);
    size_t n_val = static_cast<size_t>(std::llround(fraction * static_cast<double>(idx.size())));
    if (n_val == 0 && idx.size() >= 2) n_val = 1;
    if (n_val >= idx.size()) n_val = idx.size() - 1;
    val.insert(val.end(), idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n_val));
    train.insert(train.end(), idx.begin() + static_cast<std::ptrdiff_t>(n_val), idx.end());
  }
  std::sort(train.begin(), train.end());
  std::sort(val.begin(), val.end());
  return {train, val};
}

absl::StatusOr<Evaluation> Evaluate(const BertEncoder& encoder, const BertTokenizer& tokenizer, const AdapterSet& set,
                                    const std::vector<Example>& examples, int max_seq_len, int batch_size) {
  model::TokenizerOptions topts = tokenizer.options();
  topts.max_seq_len = max_seq_len;
  ASSIGN_OR_RETURN(auto tok, BertTokenizer::FromTokens(tokenizer.tokens(), topts));
  ASSIGN_OR_RETURN(const std::unique_ptr<model::Head> head,
                   model::MakeHead(set.config().kind, set.config().num_labels()));
  ASSIGN_OR_RETURN(const RowSet data, EncodeRows(set.config(), *tok, examples, "evaluation"));
  return EvaluateRows(encoder, set, *head, data, tok->pad_id(), batch_size);
}

namespace {

// One training run, in the steps Train() below takes: Prepare (the task's
// config and head, tokenizer, the split, its rows), Restore (fresh adapters or the
// checkpoint's, the optimiser), then per epoch the optimiser Steps and
// EndEpoch (validation, best epoch, checkpoint), and the Result.
class TrainingRun {
 public:
  TrainingRun(const BertEncoder& encoder, const Hyperparameters& hp, const TrainerHooks& hooks)
      : encoder_(encoder), hp_(hp), hooks_(hooks), device_(encoder.device()), fingerprint_(encoder.fingerprint()) {}

  absl::Status Prepare(const BertTokenizer& tokenizer, const TrainingData& data);
  // The task's config: the kind's labels, standardisation or windows.
  absl::Status Configure(const TrainingData& data, const std::vector<Example>& train_examples);
  absl::Status Restore(const TrainerState* resume);
  // Every epoch from the state's, each step from the state's (a resumed run
  // continues mid-epoch).
  absl::Status RunEpochs();
  absl::StatusOr<TrainingResult> Result() const;

 private:
  // One optimiser step over step `b` of the epoch's `order`, in micro-batches.
  absl::Status Step(const std::vector<size_t>& order, int64_t b);
  absl::Status EndEpoch(int epoch, double seconds, int64_t examples_this_run);
  absl::Status Checkpoint();
  void SetLearningRate(double lr);
  // What the forward reads on a bf16 encoder: the adapters cast to bf16 by
  // differentiable casts, so their products run in bf16 and the gradients
  // reach the fp32 parameters the optimiser keeps; the LayerNorm affines and
  // the head are the fp32 parameters themselves (they apply in the fp32
  // residual stream, where bf16's 2^-8 steps around a gain of 1 would
  // quantise every update). Null on an fp32 encoder: the forward reads the
  // parameters themselves.
  absl::StatusOr<std::unique_ptr<AdapterSet>> WorkingSet() const;

  const BertEncoder& encoder_;
  const Hyperparameters& hp_;
  const TrainerHooks& hooks_;
  const c10::Device device_;
  const std::string& fingerprint_;

  model::AdapterConfig config_;
  std::unique_ptr<model::Head> head_;
  std::unique_ptr<BertTokenizer> tokenizer_;
  RowSet train_set_, val_set_;
  int64_t steps_per_epoch_ = 0, total_steps_ = 0, warmup_steps_ = 0;
  size_t micro_ = 0;

  std::unique_ptr<AdapterSet> set_;
  std::vector<at::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  TrainerState state_;
};

absl::Status TrainingRun::Configure(const TrainingData& data, const std::vector<Example>& train_examples) {
  config_.bottleneck_size = hp_.bottleneck_size;
  ASSIGN_OR_RETURN(config_.activation, model::ParseActivation(hp_.activation));
  config_.init_std = hp_.init_std;
  config_.kind = data.kind;
  config_.labels = data.labels;
  RETURN_IF_ERROR(KindRulesOf(data.kind).SetParameters(train_examples,
                                                       {.max_seq_len = tokenizer_->options().max_seq_len,
                                                        .doc_stride = hp_.doc_stride,
                                                        .max_question_tokens = hp_.QuestionBudget(),
                                                        .max_answer_tokens = hp_.max_answer_len},
                                                       config_));
  RETURN_IF_ERROR(config_.Validate());
  ASSIGN_OR_RETURN(head_, model::MakeHead(config_.kind, config_.num_labels()));
  return absl::OkStatus();
}

absl::Status TrainingRun::Prepare(const BertTokenizer& tokenizer, const TrainingData& data) {
  model::TokenizerOptions topts = tokenizer.options();
  topts.max_seq_len = static_cast<int>(std::min<int64_t>(hp_.max_seq_len, encoder_.config().max_position_embeddings));
  ASSIGN_OR_RETURN(tokenizer_, BertTokenizer::FromTokens(tokenizer.tokens(), topts));

  std::vector<Example> train_examples, val_examples;
  if (data.validation.empty()) {
    auto [train_idx, val_idx] = StratifiedSplit(data.train, hp_.validation_fraction, hp_.seed, data.kind);
    for (size_t i : train_idx) train_examples.push_back(data.train[i]);
    for (size_t i : val_idx) val_examples.push_back(data.train[i]);
  } else {
    train_examples = data.train;
    val_examples = data.validation;
  }
  if (train_examples.empty() || val_examples.empty()) {
    return absl::InvalidArgumentError("need at least one training and one validation example");
  }
  RETURN_IF_ERROR(Configure(data, train_examples));
  ASSIGN_OR_RETURN(train_set_, EncodeRows(config_, *tokenizer_, train_examples, "training"));
  ASSIGN_OR_RETURN(val_set_, EncodeRows(config_, *tokenizer_, val_examples, "validation"));

  const size_t n_train = train_set_.rows.size();
  steps_per_epoch_ = static_cast<int64_t>((n_train + hp_.batch_size - 1) / hp_.batch_size);
  total_steps_ = steps_per_epoch_ * hp_.epochs;
  warmup_steps_ = static_cast<int64_t>(hp_.warmup_fraction * static_cast<double>(total_steps_));
  micro_ = static_cast<size_t>(hp_.micro_batch_size > 0 ? hp_.micro_batch_size : hp_.batch_size);
  return absl::OkStatus();
}

absl::Status TrainingRun::Restore(const TrainerState* resume) {
  if (resume != nullptr) {
    if (hp_.trainable == TrainableParts::kFullFineTune) {
      return absl::InvalidArgumentError("full fine-tuning (a baseline) does not resume from checkpoints");
    }
    state_ = *resume;
    // A checkpoint written before adapter format 2 holds a format-1 file.
    ASSIGN_OR_RETURN(
        set_, model::DeserializeAdapterSet(state_.adapter_bytes, encoder_.config(), fingerprint_, device_,
                                           {.v1_fingerprint = encoder_.weights_fingerprint(), .check_finite = false}));
    if (set_->config().kind != config_.kind || set_->config().labels != config_.labels ||
        set_->config().bottleneck_size != config_.bottleneck_size) {
      return absl::InvalidArgumentError("checkpoint does not belong to this training run");
    }
  } else {
    at::manual_seed(hp_.seed);
    ASSIGN_OR_RETURN(set_,
                     AdapterSet::CreateInitialized(encoder_.config(), encoder_.weights(), config_, hp_.seed, device_));
    if (hp_.trainable != TrainableParts::kAdapters && hp_.trainable != TrainableParts::kAdaptersAndHead) {
      // Baselines: with U = 0 every adapter is the identity (tested in adapter_test).
      for (const model::AdapterLayer& l : set_->layers()) {
        l.attention_adapter.up_weight.zero_();
        l.ffn_adapter.up_weight.zero_();
      }
    }
  }
  std::vector<at::Tensor> decayed = Trainable(*set_, hp_.trainable, true);
  std::vector<at::Tensor> undecayed = Trainable(*set_, hp_.trainable, false);
  if (hp_.trainable == TrainableParts::kFullFineTune) {
    // Matrices and embeddings decay; biases do not, as in BERT's
    // fine-tuning optimiser (the LayerNorm affines train in `set_`).
    for (const at::Tensor& t : FullFineTuneEncoderTensors(encoder_.weights())) {
      (t.dim() >= 2 ? decayed : undecayed).push_back(t);
    }
  }
  for (at::Tensor& t : decayed) t.requires_grad_(true);
  for (at::Tensor& t : undecayed) t.requires_grad_(true);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(hp_.learning_rate)
                                                            .betas({hp_.adam_beta1, hp_.adam_beta2})
                                                            .eps(hp_.adam_epsilon)
                                                            .weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decayed, options(hp_.weight_decay));
  groups.emplace_back(undecayed, options(0.0));
  optimizer_ = std::make_unique<torch::optim::AdamW>(groups, *options(hp_.weight_decay));
  params_ = decayed;
  params_.insert(params_.end(), undecayed.begin(), undecayed.end());
  if (resume != nullptr) {
    std::istringstream in(state_.optimizer_state);
    torch::load(*optimizer_, in);
    RETURN_IF_ERROR(model::RestoreCpuGeneratorState(state_.rng_state));
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::Checkpoint() {
  if (!hooks_.on_checkpoint) return absl::OkStatus();
  ASSIGN_OR_RETURN(state_.adapter_bytes, model::SerializeAdapterSet(*set_, fingerprint_));
  std::ostringstream out;
  torch::save(*optimizer_, out);
  state_.optimizer_state = out.str();
  state_.rng_state = model::CaptureCpuGeneratorState();
  return hooks_.on_checkpoint(state_);
}

absl::StatusOr<std::unique_ptr<AdapterSet>> TrainingRun::WorkingSet() const {
  if (encoder_.dtype() == set_->dtype()) return nullptr;
  std::vector<model::AdapterLayer> layers = set_->layers();
  for (model::AdapterLayer& l : layers) {
    for (model::BottleneckAdapter* a : {&l.attention_adapter, &l.ffn_adapter}) {
      for (at::Tensor* t : {&a->down_weight, &a->down_bias, &a->up_weight, &a->up_bias}) *t = t->to(encoder_.dtype());
    }
  }
  return AdapterSet::FromParts(encoder_.config(), set_->config(), set_->embedding_layer_norm(), std::move(layers),
                               set_->head_weight(), set_->head_bias());
}

void TrainingRun::SetLearningRate(double lr) {
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

absl::Status TrainingRun::Step(const std::vector<size_t>& order, int64_t b) {
  const size_t begin = static_cast<size_t>(b) * static_cast<size_t>(hp_.batch_size);
  const size_t end = std::min(train_set_.rows.size(), begin + static_cast<size_t>(hp_.batch_size));
  const double batch_rows = static_cast<double>(end - begin);
  optimizer_->zero_grad();
  double batch_loss = 0;
  for (size_t m = begin; m < end; m += micro_) {
    if (hooks_.cancelled && hooks_.cancelled()) return absl::CancelledError("training cancelled");
    const std::vector<size_t> rows(order.begin() + static_cast<std::ptrdiff_t>(m),
                                   order.begin() + static_cast<std::ptrdiff_t>(std::min(end, m + micro_)));
    auto micro_batch = [&]() -> absl::Status {
      const Batch batch = MakeBatch(train_set_, rows, config_.kind, tokenizer_->pad_id(), device_);
      ASSIGN_OR_RETURN(const std::unique_ptr<AdapterSet> working, WorkingSet());
      const AdapterSet& run = working != nullptr ? *working : *set_;
      ASSIGN_OR_RETURN(model::EncoderOutput out, encoder_.Forward(batch.input, run, {.train = true}));
      ASSIGN_OR_RETURN(at::Tensor loss,
                       head_->Loss(HeadLogits(out, config_.kind, head_->num_outputs()), batch.targets));
      loss = loss * (static_cast<double>(rows.size()) / batch_rows);
      loss.backward();
      batch_loss += loss.item<double>();
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(hooks_.run_on_device ? hooks_.run_on_device(micro_batch) : micro_batch());
  }
  torch::nn::utils::clip_grad_norm_(params_, hp_.max_grad_norm);
  SetLearningRate(model::LinearWarmupDecay(state_.step, total_steps_, warmup_steps_, hp_.learning_rate));
  optimizer_->step();
  ++state_.step;
  state_.epoch_loss_sum += batch_loss * batch_rows;
  state_.epoch_examples += static_cast<int64_t>(batch_rows);
  if (hooks_.on_step) hooks_.on_step(state_.step, total_steps_, batch_loss);
  return absl::OkStatus();
}

absl::Status TrainingRun::EndEpoch(int epoch, double seconds, int64_t examples_this_run) {
  ASSIGN_OR_RETURN(Evaluation val, EvaluateRows(encoder_, *set_, *head_, val_set_, tokenizer_->pad_id(), 64));
  EpochReport report;
  report.epoch = epoch + 1;
  report.step = state_.step;
  report.train_loss =
      state_.epoch_examples > 0 ? state_.epoch_loss_sum / static_cast<double>(state_.epoch_examples) : 0;
  report.validation = val;
  report.learning_rate = model::LinearWarmupDecay(state_.step, total_steps_, warmup_steps_, hp_.learning_rate);
  report.examples_per_second = seconds > 0 ? static_cast<double>(examples_this_run) / seconds : 0;
  const double metric = SelectionMetric(config_.kind, val);
  const double best = state_.best ? SelectionMetric(config_.kind, state_.best->validation) : 0;
  const bool better =
      !state_.best.has_value() || metric > best || (metric == best && val.loss < state_.best->validation.loss);
  if (better) {
    state_.best = report;
    ASSIGN_OR_RETURN(state_.best_adapter_bytes, model::SerializeAdapterSet(*set_, fingerprint_));
  }
  state_.history.push_back(report);
  state_.epoch = epoch + 1;
  state_.epoch_loss_sum = 0;
  state_.epoch_examples = 0;
  if (hooks_.on_epoch) hooks_.on_epoch(report);
  return Checkpoint();
}

absl::Status TrainingRun::RunEpochs() {
  for (int epoch = state_.epoch; epoch < hp_.epochs; ++epoch) {
    const std::vector<size_t> order = EpochOrder(train_set_.rows.size(), hp_.seed, epoch);
    const auto epoch_start = std::chrono::steady_clock::now();
    int64_t examples_this_run = 0;
    for (int64_t b = state_.step - static_cast<int64_t>(epoch) * steps_per_epoch_; b < steps_per_epoch_; ++b) {
      const int64_t examples_before = state_.epoch_examples;
      RETURN_IF_ERROR(Step(order, b));
      examples_this_run += state_.epoch_examples - examples_before;
      const bool epoch_end = b + 1 == steps_per_epoch_;
      if (hp_.checkpoint_every_steps > 0 && state_.step % hp_.checkpoint_every_steps == 0 && !epoch_end) {
        RETURN_IF_ERROR(Checkpoint());
      }
      if (!epoch_end && hooks_.preempted && hooks_.preempted()) {
        RETURN_IF_ERROR(Checkpoint());
        return absl::AbortedError(absl::StrCat("training preempted at step ", state_.step));
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    RETURN_IF_ERROR(EndEpoch(epoch, seconds, examples_this_run));
    if (epoch + 1 < hp_.epochs && hooks_.preempted && hooks_.preempted()) {
      return absl::AbortedError(absl::StrCat("training preempted at step ", state_.step));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingResult> TrainingRun::Result() const {
  TrainingResult result;
  // The caller decides what a non-finite result means (JobRunner fails
  // the job as diverged).
  ASSIGN_OR_RETURN(result.best, model::DeserializeAdapterSet(
                                    state_.best_adapter_bytes, encoder_.config(), fingerprint_, device_,
                                    {.v1_fingerprint = encoder_.weights_fingerprint(), .check_finite = false}));
  result.best_epoch = *state_.best;
  result.history = state_.history;
  result.steps = state_.step;
  return result;
}

}  // namespace

absl::StatusOr<TrainingResult> Train(const BertEncoder& encoder, const BertTokenizer& tokenizer,
                                     const TrainingData& data, const Hyperparameters& hp, const TrainerHooks& hooks,
                                     const TrainerState* resume) {
  RETURN_IF_ERROR(hp.Validate());
  // fp16 would need loss scaling, which the trainer does not do.
  if (encoder.dtype() != at::kFloat && encoder.dtype() != at::kBFloat16) {
    return absl::InvalidArgumentError("training needs an fp32 or bf16 encoder");
  }
  if (encoder.dtype() != at::kFloat && hp.trainable == TrainableParts::kFullFineTune) {
    return absl::InvalidArgumentError("full fine-tuning (a baseline) needs an fp32 encoder");
  }
  if ((hp.trainable == TrainableParts::kFullFineTune) != encoder.trainable()) {
    return absl::InvalidArgumentError(
        "full fine-tuning needs a trainable encoder, and a trainable encoder is only for full fine-tuning");
  }
  if (data.train.empty()) return absl::InvalidArgumentError("no training examples");
  TrainingRun run(encoder, hp, hooks);
  RETURN_IF_ERROR(run.Prepare(tokenizer, data));
  return model::GuardTorch("train", [&]() -> absl::StatusOr<TrainingResult> {
    RETURN_IF_ERROR(run.Restore(resume));
    RETURN_IF_ERROR(run.RunEpochs());
    return run.Result();
  });
}

}  // namespace adapterd::training
