// The trainer: learning sanity on a synthetic task, determinism, resume,
// cancellation, the schedule, the split, and the continual guarantee.
#include "server/training/trainer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "server/model/adapter_format.h"
#include "server/model/adapterhub_export.h"
#include "server/model/training_support.h"
#include "tests/model/model_test_util.h"
#include "tests/training/training_fixture.h"

namespace adapterd::training {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;
using namespace ::adapterd::model::testing;  // NOLINT

using ::adapterd::training::testing::kWords;

// Label "yes" iff the word w1 occurs; `noise` of the labels are flipped.
// Bayes-optimal accuracy is 1 - noise; the majority class is ~50%.
std::vector<Example> PresenceTask(int n, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    const bool has = rng() % 2 == 0;
    const int len = 4 + static_cast<int>(rng() % 8);
    const int at = static_cast<int>(rng() % static_cast<uint64_t>(len));
    std::string text;
    for (int j = 0; j < len; ++j) {
      const int w = (has && j == at) ? 1 : 2 + static_cast<int>(rng() % (kWords - 2));
      absl::StrAppend(&text, j ? " " : "", "w", w);
    }
    bool label = has;
    if (static_cast<double>(rng() % 1000) < noise * 1000) label = !label;
    out.push_back({text, "", label ? "yes" : "no"});
  }
  return out;
}

Hyperparameters FastHp() {
  Hyperparameters hp;
  hp.learning_rate = 3e-3;
  hp.epochs = 3;
  hp.batch_size = 32;
  hp.bottleneck_size = 16;
  hp.max_seq_len = 32;
  hp.seed = 7;
  return hp;
}

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    encoder_ = ::adapterd::training::testing::FixtureEncoder();
    tokenizer_ = ::adapterd::training::testing::FixtureTokenizer();
    data_.train = PresenceTask(500, 0.1, 1);
    data_.validation = PresenceTask(120, 0.1, 2);
    data_.labels = {"no", "yes"};
  }
  std::unique_ptr<model::BertEncoder> encoder_;
  std::unique_ptr<model::BertTokenizer> tokenizer_;
  TrainingData data_;
};

TEST_F(TrainerTest, LearnsASyntheticTaskWellAboveTheMajorityRate) {
  std::vector<EpochReport> reports;
  TrainerHooks hooks;
  hooks.on_epoch = [&](const EpochReport& r) { reports.push_back(r); };
  Hyperparameters hp = FastHp();
  hp.epochs = 20;
  hp.bottleneck_size = 32;
  hp.seed = 2;
  ASSERT_OK_AND_ASSIGN(TrainingResult result, Train(*encoder_, *tokenizer_, data_, hp, hooks));
  ASSERT_EQ(reports.size(), 20u);
  int yes = 0;
  for (const Example& e : data_.validation) yes += e.label == "yes";
  const double majority =
      std::max(yes, static_cast<int>(data_.validation.size()) - yes) / static_cast<double>(data_.validation.size());
  // With 10% of labels flipped the best achievable accuracy is ~0.90, and a
  // classifier that has not learned the rule scores the majority rate
  // (~0.5; two standard errors on 120 examples are ~0.09). 0.75 is only
  // reachable by learning which word decides the label. (Seeds 1-3 of this
  // configuration reach 0.82-0.88 when measured.)
  EXPECT_LT(majority, 0.62);
  EXPECT_GE(result.best_epoch.validation.accuracy, 0.75) << "majority " << majority;
  // Training loss falls, and the reported best really is the best epoch.
  EXPECT_LT(reports.back().train_loss, reports.front().train_loss);
  for (const EpochReport& r : reports) EXPECT_LE(r.validation.accuracy, result.best_epoch.validation.accuracy);
  // The returned parameters are that epoch's: re-evaluating reproduces it.
  ASSERT_OK_AND_ASSIGN(Evaluation eval, Evaluate(*encoder_, *tokenizer_, *result.best, data_.validation, 32));
  EXPECT_DOUBLE_EQ(eval.accuracy, result.best_epoch.validation.accuracy);
  EXPECT_DOUBLE_EQ(eval.macro_f1, result.best_epoch.validation.macro_f1);
  EXPECT_GT(eval.macro_f1, 0.7);  // both labels learned, not the majority one alone
  EXPECT_GT(reports.back().examples_per_second, 0);
  EXPECT_EQ(result.steps, 20 * 16);  // ceil(500 / 32) = 16 steps per epoch
}

// Macro F1 averages the labels: a set that answers "no" to everything has
// accuracy 1/2 on a balanced set, and macro F1 (2/3 + 0) / 2.
TEST_F(TrainerTest, EvaluationReportsMacroF1OverTheLabels) {
  model::AdapterConfig c;
  c.bottleneck_size = 4;
  c.labels = {"no", "yes"};
  ASSERT_OK_AND_ASSIGN(auto set, model::AdapterSet::CreateInitialized(encoder_->config(), encoder_->weights(), c, 1,
                                                                      encoder_->device()));
  for (auto& [name, t] : set->Named()) {  // the set's own tensors: a head that always says "no"
    if (name == "head.weight") t.zero_();
    if (name == "head.bias") t.copy_(at::tensor({1.0f, 0.0f}));
  }
  std::vector<Example> balanced;
  for (int i = 0; i < 10; ++i) balanced.push_back({absl::StrCat("w", 2 + i), "", i % 2 ? "yes" : "no"});
  ASSERT_OK_AND_ASSIGN(Evaluation eval, Evaluate(*encoder_, *tokenizer_, *set, balanced, 32));
  EXPECT_DOUBLE_EQ(eval.accuracy, 0.5);
  EXPECT_NEAR(eval.macro_f1, 1.0 / 3, 1e-12);
}

TEST_F(TrainerTest, IsDeterministicForASeed) {
  Hyperparameters hp = FastHp();
  ASSERT_OK_AND_ASSIGN(TrainingResult a, Train(*encoder_, *tokenizer_, data_, hp));
  ASSERT_OK_AND_ASSIGN(TrainingResult b, Train(*encoder_, *tokenizer_, data_, hp));
  auto na = a.best->Named(), nb = b.best->Named();
  for (size_t i = 0; i < na.size(); ++i) EXPECT_TRUE(BitEqual(na[i].second, nb[i].second)) << na[i].first;
  hp.seed = 8;
  ASSERT_OK_AND_ASSIGN(TrainingResult c, Train(*encoder_, *tokenizer_, data_, hp));
  EXPECT_FALSE(BitEqual(a.best->head_weight(), c.best->head_weight()));
}

TEST_F(TrainerTest, ResumingFromAMidEpochCheckpointReproducesTheUninterruptedRun) {
  Hyperparameters hp = FastHp();
  hp.checkpoint_every_steps = 5;
  hp.micro_batch_size = 8;  // gradient accumulation on the way
  std::vector<TrainerState> checkpoints;
  TrainerHooks hooks;
  hooks.on_checkpoint = [&](const TrainerState& s) {
    checkpoints.push_back(s);
    return absl::OkStatus();
  };
  ASSERT_OK_AND_ASSIGN(TrainingResult full, Train(*encoder_, *tokenizer_, data_, hp, hooks));
  // Steps 5, 10, 15, 16 (epoch end), 20, ...: pick one inside epoch 2.
  const TrainerState* mid = nullptr;
  for (const TrainerState& s : checkpoints) {
    if (s.step == 20) mid = &s;
  }
  ASSERT_NE(mid, nullptr);
  EXPECT_EQ(mid->epoch, 1);
  EXPECT_GT(mid->epoch_examples, 0);
  ASSERT_OK_AND_ASSIGN(TrainingResult resumed, Train(*encoder_, *tokenizer_, data_, hp, {}, mid));
  EXPECT_EQ(resumed.steps, full.steps);
  ASSERT_EQ(resumed.history.size(), full.history.size());
  for (size_t i = 0; i < full.history.size(); ++i) {
    EXPECT_DOUBLE_EQ(resumed.history[i].validation.loss, full.history[i].validation.loss) << "epoch " << i + 1;
  }
  auto nf = full.best->Named(), nr = resumed.best->Named();
  for (size_t i = 0; i < nf.size(); ++i) EXPECT_TRUE(BitEqual(nf[i].second, nr[i].second)) << nf[i].first;
}

TEST_F(TrainerTest, CancellationTakesEffectWithinOneStep) {
  int polls = 0;
  int steps = 0;
  TrainerHooks hooks;
  hooks.cancelled = [&] { return ++polls > 3; };
  hooks.on_step = [&](int64_t, int64_t, double) { ++steps; };
  EXPECT_THAT(Train(*encoder_, *tokenizer_, data_, FastHp(), hooks),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  EXPECT_EQ(steps, 3);
}

TEST_F(TrainerTest, TrainingLeavesTheEncoderAndOtherTasksUntouched) {
  std::map<std::string, at::Tensor> before;
  for (const auto& [name, t] : encoder_->weights().Named()) before[name] = t.clone();
  Hyperparameters hp = FastHp();
  hp.epochs = 1;
  ASSERT_OK_AND_ASSIGN(TrainingResult a, Train(*encoder_, *tokenizer_, data_, hp));
  ASSERT_OK_AND_ASSIGN(std::string a_bytes, model::SerializeAdapterSet(*a.best, encoder_->fingerprint()));
  model::EncoderInput probe = MakeInput({{2, 6, 7, 8, 3}, {2, 9, 3}});
  ASSERT_OK_AND_ASSIGN(model::EncoderOutput a_out, encoder_->Forward(probe, *a.best));
  hp.seed = 99;
  TrainingData other = data_;
  other.labels = {"no", "yes"};
  ASSERT_OK_AND_ASSIGN(TrainingResult b, Train(*encoder_, *tokenizer_, other, hp));
  for (const auto& [name, t] : encoder_->weights().Named()) EXPECT_TRUE(BitEqual(t, before[name])) << name;
  ASSERT_OK_AND_ASSIGN(std::string a_again, model::SerializeAdapterSet(*a.best, encoder_->fingerprint()));
  EXPECT_EQ(a_bytes, a_again);
  ASSERT_OK_AND_ASSIGN(model::EncoderOutput a_out2, encoder_->Forward(probe, *a.best));
  EXPECT_TRUE(BitEqual(a_out.logits, a_out2.logits));
}

// Mixed precision: on a bf16 encoder the frozen products run in bf16 while
// the adapters, LayerNorms, head and AdamW moments stay fp32 (the forward
// reads differentiable bf16 casts of them). The result is an fp32 set that
// learns the task as fp32 training does, the same for a seed, and no
// gradient is ever made for a frozen weight: every encoder tensor ends with
// no grad, unchanged. Full fine-tuning (a baseline) refuses such an encoder.
TEST_F(TrainerTest, MixedPrecisionOnABf16EncoderLearnsWithFp32ParametersAndNoFrozenGradients) {
  model::BertEncoder::Options opts;
  opts.fingerprint = encoder_->fingerprint();
  opts.dtype = at::kBFloat16;
  ASSERT_OK_AND_ASSIGN(auto bf16, model::BertEncoder::Create(encoder_->config(), encoder_->weights(), opts));
  std::map<std::string, at::Tensor> before;
  for (const auto& [name, t] : bf16->weights().Named()) before[name] = t.clone();
  Hyperparameters hp = FastHp();
  hp.epochs = 20;
  hp.bottleneck_size = 32;
  hp.seed = 2;
  ASSERT_OK_AND_ASSIGN(TrainingResult result, Train(*bf16, *tokenizer_, data_, hp));
  EXPECT_EQ(result.best->dtype(), at::kFloat);
  // The fp32 run of this configuration (LearnsASyntheticTask... above)
  // holds it to 0.75; measured here: 0.85 in bf16.
  EXPECT_GE(result.best_epoch.validation.accuracy, 0.75);
  EXPECT_GT(result.best_epoch.validation.macro_f1, 0.7);
  for (const auto& [name, t] : bf16->weights().Named()) {
    EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
    EXPECT_FALSE(t.requires_grad()) << name;
    EXPECT_FALSE(t.grad().defined()) << name;
    EXPECT_TRUE(BitEqual(t, before[name])) << name;
  }
  // The result serves on the bf16 encoder as evaluated during training.
  ASSERT_OK_AND_ASSIGN(Evaluation eval, Evaluate(*bf16, *tokenizer_, *result.best, data_.validation, 32));
  EXPECT_DOUBLE_EQ(eval.accuracy, result.best_epoch.validation.accuracy);
  // Deterministic for a seed, as fp32 training is.
  hp.epochs = 2;
  ASSERT_OK_AND_ASSIGN(TrainingResult a, Train(*bf16, *tokenizer_, data_, hp));
  ASSERT_OK_AND_ASSIGN(TrainingResult b, Train(*bf16, *tokenizer_, data_, hp));
  auto na = a.best->Named(), nb = b.best->Named();
  for (size_t i = 0; i < na.size(); ++i) EXPECT_TRUE(BitEqual(na[i].second, nb[i].second)) << na[i].first;
  hp.trainable = TrainableParts::kFullFineTune;
  EXPECT_THAT(Train(*bf16, *tokenizer_, data_, hp),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs an fp32 encoder")));
}

TEST_F(TrainerTest, BaselinesTrainOnlyTheirParts) {
  Hyperparameters hp = FastHp();
  hp.epochs = 1;
  hp.trainable = TrainableParts::kHeadOnly;
  ASSERT_OK_AND_ASSIGN(TrainingResult head, Train(*encoder_, *tokenizer_, data_, hp));
  for (const model::AdapterLayer& l : head.best->layers()) {
    EXPECT_EQ(l.attention_adapter.up_weight.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(l.ffn_adapter.up_weight.abs().max().item<float>(), 0.0f);
  }
  EXPECT_TRUE(
      BitEqual(head.best->layers()[0].output_layer_norm.weight, encoder_->weights().layers[0].output_ln_weight));
  hp.trainable = TrainableParts::kHeadAndLayerNorm;
  ASSERT_OK_AND_ASSIGN(TrainingResult ln, Train(*encoder_, *tokenizer_, data_, hp));
  EXPECT_FALSE(BitEqual(ln.best->layers()[0].output_layer_norm.weight, encoder_->weights().layers[0].output_ln_weight));
  EXPECT_EQ(ln.best->layers()[1].ffn_adapter.up_weight.abs().max().item<float>(), 0.0f);
}

// AdapterHub's regime (freeze_layer_norms): the adapters and the head train,
// every LayerNorm stays the encoder's, bit for bit, so the task exports to
// AdapterHub's format without loss; the job's hyperparameters say so.
TEST_F(TrainerTest, FrozenLayerNormsTrainTheAdaptersAndHeadOnly) {
  Hyperparameters hp = FastHp();
  hp.epochs = 1;
  storage::v1::Hyperparameters requested;
  requested.set_freeze_layer_norms(true);
  ASSERT_OK_AND_ASSIGN(const Hyperparameters resolved, ResolveHyperparameters(requested, hp));
  EXPECT_EQ(resolved.trainable, TrainableParts::kAdaptersAndHead);
  EXPECT_TRUE(ToProto(resolved).freeze_layer_norms());
  EXPECT_FALSE(ToProto(hp).freeze_layer_norms());
  ASSERT_OK_AND_ASSIGN(TrainingResult frozen, Train(*encoder_, *tokenizer_, data_, resolved));
  const model::EncoderWeights& e = encoder_->weights();
  const model::AdapterSet& set = *frozen.best;
  EXPECT_TRUE(BitEqual(set.embedding_layer_norm().weight, e.emb_ln_weight));
  EXPECT_TRUE(BitEqual(set.embedding_layer_norm().bias, e.emb_ln_bias));
  for (size_t i = 0; i < set.layers().size(); ++i) {
    EXPECT_TRUE(BitEqual(set.layers()[i].attention_layer_norm.weight, e.layers[i].attn_ln_weight)) << i;
    EXPECT_TRUE(BitEqual(set.layers()[i].attention_layer_norm.bias, e.layers[i].attn_ln_bias)) << i;
    EXPECT_TRUE(BitEqual(set.layers()[i].output_layer_norm.weight, e.layers[i].output_ln_weight)) << i;
    EXPECT_TRUE(BitEqual(set.layers()[i].output_layer_norm.bias, e.layers[i].output_ln_bias)) << i;
  }
  // The adapters and the head trained: none is where the same seed starts.
  model::AdapterConfig config = set.config();
  config.init_std = hp.init_std;
  ASSERT_OK_AND_ASSIGN(auto start,
                       model::AdapterSet::CreateInitialized(encoder_->config(), e, config, hp.seed, at::kCPU));
  EXPECT_FALSE(BitEqual(set.layers()[0].ffn_adapter.up_weight, start->layers()[0].ffn_adapter.up_weight));
  EXPECT_FALSE(
      BitEqual(set.layers()[1].attention_adapter.down_weight, start->layers()[1].attention_adapter.down_weight));
  EXPECT_FALSE(BitEqual(set.head_weight(), start->head_weight()));
  // What trains: the paper's count less the LayerNorms' 2 d (1 + 2 layers).
  const int64_t d = encoder_->config().hidden_size;
  const int64_t layer_norms = 2 * d * (1 + 2 * encoder_->config().num_hidden_layers);
  EXPECT_EQ(TrainableParameterCount(set, TrainableParts::kAdaptersAndHead, *encoder_),
            TrainableParameterCount(set, TrainableParts::kAdapters, *encoder_) - layer_norms);
  // The AdapterHub export takes it as it is; the paper's regime needs the
  // loss accepted.
  const model::AdapterHubExportOptions options{.name = "frozen", .model_name = "test"};
  EXPECT_OK(model::ExportAdapterHub(set, encoder_->config(), e, options).status());
  hp.trainable = TrainableParts::kAdapters;
  ASSERT_OK_AND_ASSIGN(TrainingResult paper, Train(*encoder_, *tokenizer_, data_, hp));
  EXPECT_THAT(model::ExportAdapterHub(*paper.best, encoder_->config(), e, options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("LayerNorms were trained")));
}

TEST_F(TrainerTest, FullFineTuningBaselineNeedsATrainableEncoderAndUpdatesIt) {
  Hyperparameters hp = FastHp();
  hp.epochs = 1;
  hp.trainable = TrainableParts::kFullFineTune;
  // The frozen (serving) encoder refuses: the baseline can never touch it.
  EXPECT_THAT(Train(*encoder_, *tokenizer_, data_, hp),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trainable encoder")));
  auto weights = model::RandomEncoderWeights(encoder_->config(), 3, 0.2);
  ASSERT_TRUE(weights.ok());
  model::BertEncoder::Options opts;
  opts.fingerprint = encoder_->fingerprint();
  opts.trainable = true;
  ASSERT_OK_AND_ASSIGN(auto trainable, model::BertEncoder::Create(encoder_->config(), *weights, opts));
  const at::Tensor before = trainable->weights().layers[0].intermediate_weight.detach().clone();
  ASSERT_OK_AND_ASSIGN(TrainingResult r, Train(*trainable, *tokenizer_, data_, hp));
  EXPECT_FALSE(at::equal(trainable->weights().layers[0].intermediate_weight.detach(), before));
  EXPECT_TRUE(at::equal(weights->layers[0].intermediate_weight, before)) << "the source weights are copied";
  // The set's per-task LayerNorms stand in for the encoder's own, which stay
  // as loaded; so full fine-tuning trains the encoder's size plus the head.
  EXPECT_TRUE(at::equal(trainable->weights().layers[0].output_ln_weight.detach(), weights->layers[0].output_ln_weight));
  EXPECT_FALSE(at::equal(r.best->layers()[0].output_layer_norm.weight, weights->layers[0].output_ln_weight));
  const int64_t head = TrainableParameterCount(*r.best, TrainableParts::kHeadOnly, *trainable);
  EXPECT_EQ(head, (encoder_->config().hidden_size + 1) * 2);
  EXPECT_EQ(TrainableParameterCount(*r.best, TrainableParts::kFullFineTune, *trainable),
            trainable->NumParameters() + head);
  // And a trainable encoder is refused for adapter training.
  hp.trainable = TrainableParts::kAdapters;
  EXPECT_THAT(Train(*trainable, *tokenizer_, data_, hp), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(TrainerSchedule, LinearWarmupThenDecayToZero) {
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(0, 100, 10, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(5, 100, 10, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(10, 100, 10, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(55, 100, 10, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(100, 100, 10, 1.0), 0.0);
  // The same schedule over a fraction of a budget (a timed pretraining cycle).
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(0.0, 0.1, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(0.05, 0.1, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(0.1, 0.1, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(0.55, 0.1, 2.0), 1.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(1.0, 0.1, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(1.5, 0.1, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecayFraction(0.5, 0.0, 1.0), 0.5);
  EXPECT_DOUBLE_EQ(model::LinearWarmupDecay(3, 10, 0, 2.0), 1.4);
}

TEST(TrainerSplit, StratifiedSplitKeepsLabelProportions) {
  std::vector<Example> ex;
  for (int i = 0; i < 90; ++i) ex.push_back({absl::StrCat("t", i), "", "a"});
  for (int i = 0; i < 10; ++i) ex.push_back({absl::StrCat("u", i), "", "b"});
  auto [train, val] = StratifiedSplit(ex, 0.1, 1);
  EXPECT_EQ(train.size() + val.size(), 100u);
  int val_b = 0;
  for (size_t i : val) val_b += ex[i].label == "b";
  EXPECT_EQ(val.size(), 10u);
  EXPECT_EQ(val_b, 1);
  auto [train2, val2] = StratifiedSplit(ex, 0.1, 1);
  EXPECT_EQ(val, val2);
  auto [train3, val3] = StratifiedSplit(ex, 0.1, 2);
  EXPECT_NE(val, val3);
}

TEST(TrainerHyperparameters, OutOfRangeValuesAreNamed) {
  Hyperparameters hp;
  hp.learning_rate = 0;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("learning_rate")));
  hp = {};
  hp.epochs = 0;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("epochs")));
  hp = {};
  hp.micro_batch_size = 64;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("micro_batch_size")));
  hp = {};
  hp.activation = "cube";
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cube")));
  hp = {};
  hp.validation_fraction = 1.0;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("validation_fraction")));
  // doc_stride: 0 (the default, a third) or at least an eighth of max_seq_len, at N and N-1.
  hp = {};
  hp.max_seq_len = 128;
  hp.doc_stride = 16;
  EXPECT_OK(hp.Validate());
  hp.doc_stride = 15;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("doc_stride must be 0")));
  hp.doc_stride = 1;
  EXPECT_THAT(hp.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[16, 128]")));
  EXPECT_OK(Hyperparameters{}.Validate());
}

}  // namespace
}  // namespace adapterd::training
