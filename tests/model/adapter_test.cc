// Per-task parameters: adapter shapes and init, isolation of the encoder and
// of other tasks under training, mixed-task batches, and the adapter format.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <span>

#include "common/testing/status_matchers.h"
#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/adapter_slab.h"
#include "server/model/bert_encoder.h"
#include "server/model/cpu_kernels.h"
#include "server/model/safetensors.h"
#include "server/model/task_kinds.h"
#include "server/model/tensor_io.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace ::adapterd::model::testing;  // NOLINT

TEST(AdapterSet, ParameterCountPerAdapterIs2mdPlusDPlusM) {
  auto enc = MakeEncoder(TinyConfig());
  for (int64_t m : {1, 8, 64}) {
    ASSERT_OK_AND_ASSIGN(
        auto set, AdapterSet::CreateInitialized(enc->config(), enc->weights(), MakeAdapterConfig(3, m), 1, at::kCPU));
    const int64_t d = 32;
    const BottleneckAdapter& a = set->layers()[0].attention_adapter;
    const int64_t count = a.down_weight.numel() + a.down_bias.numel() + a.up_weight.numel() + a.up_bias.numel();
    EXPECT_EQ(count, 2 * m * d + d + m);
    EXPECT_EQ(count, AdapterParameterCount(d, m));
    // Whole set: 2 adapters and 2 LayerNorms per layer, the embedding
    // LayerNorm, and the head.
    const int64_t layers = 2;
    EXPECT_EQ(set->NumParameters(), layers * (2 * AdapterParameterCount(d, m) + 4 * d) + 2 * d + 3 * d + 3);
  }
}

TEST(AdapterSet, BertLargeAtM64IsAboutTwoPercentOfTheEncoder) {
  // Arithmetic from the shapes alone: 24 layers x 2 adapters x (2md+d+m).
  const int64_t d = 1024, m = 64, layers = 24;
  const int64_t adapters = layers * 2 * AdapterParameterCount(d, m);
  EXPECT_NEAR(static_cast<double>(adapters) / 1e6, 6.3, 0.1);
  EXPECT_LT(static_cast<double>(adapters) / 335e6, 0.025);
}

TEST(AdapterSet, InitIsTruncatedNormalWithZeroBiasesAndEncoderLayerNorms) {
  auto enc = MakeEncoder(TinyConfig());
  AdapterConfig c = MakeAdapterConfig(2, 64);
  c.init_std = 0.01;
  ASSERT_OK_AND_ASSIGN(auto set, AdapterSet::CreateInitialized(enc->config(), enc->weights(), c, 42, at::kCPU));
  std::vector<at::Tensor> ws;
  for (const AdapterLayer& l : set->layers()) {
    for (const BottleneckAdapter* a : {&l.attention_adapter, &l.ffn_adapter}) {
      ws.push_back(a->down_weight.flatten());
      ws.push_back(a->up_weight.flatten());
      EXPECT_EQ(a->down_bias.abs().max().item<float>(), 0.0f);
      EXPECT_EQ(a->up_bias.abs().max().item<float>(), 0.0f);
    }
  }
  at::Tensor all = at::cat(ws);  // 2 layers x 2 adapters x 2 x 64 x 32 = 16384 draws
  EXPECT_LE(all.abs().max().item<double>(), 0.02 + 1e-9);
  EXPECT_NEAR(all.mean().item<double>(), 0.0, 0.0005);
  // A normal truncated at 2 sigma has std 0.8796 sigma.
  EXPECT_NEAR(all.std().item<double>(), 0.008796, 0.0003);
  EXPECT_TRUE(BitEqual(set->layers()[1].output_layer_norm.weight, enc->weights().layers[1].output_ln_weight));
  EXPECT_TRUE(BitEqual(set->embedding_layer_norm().bias, enc->weights().emb_ln_bias));
  // Deterministic per seed, different across seeds.
  ASSERT_OK_AND_ASSIGN(auto same, AdapterSet::CreateInitialized(enc->config(), enc->weights(), c, 42, at::kCPU));
  ASSERT_OK_AND_ASSIGN(auto other, AdapterSet::CreateInitialized(enc->config(), enc->weights(), c, 43, at::kCPU));
  EXPECT_TRUE(BitEqual(set->layers()[0].ffn_adapter.up_weight, same->layers()[0].ffn_adapter.up_weight));
  EXPECT_FALSE(BitEqual(set->layers()[0].ffn_adapter.up_weight, other->layers()[0].ffn_adapter.up_weight));
}

TEST(AdapterSet, ZeroUpProjectionGivesThePlainEncoderExactly) {
  auto enc = MakeEncoder(TinyConfig());
  AdapterConfig c = MakeAdapterConfig(2, 16);
  c.init_std = 0.3;  // large D, so only the zero U can make the adapter vanish
  ASSERT_OK_AND_ASSIGN(auto set, AdapterSet::CreateInitialized(enc->config(), enc->weights(), c, 9, at::kCPU));
  for (const AdapterLayer& l : set->layers()) {
    l.attention_adapter.up_weight.zero_();
    l.ffn_adapter.up_weight.zero_();
  }
  EncoderInput input = MakeInput({{2, 11, 12, 13, 3}, {2, 14, 3}});
  ASSERT_OK_AND_ASSIGN(EncoderOutput plain, enc->Forward(input));
  ASSERT_OK_AND_ASSIGN(EncoderOutput adapted, enc->Forward(input, *set));
  EXPECT_TRUE(BitEqual(plain.last_hidden_state, adapted.last_hidden_state));
  EXPECT_TRUE(BitEqual(plain.pooled, adapted.pooled));
  // With the near-identity init (U != 0) the output moves, a little.
  ASSERT_OK_AND_ASSIGN(
      auto fresh, AdapterSet::CreateInitialized(enc->config(), enc->weights(), MakeAdapterConfig(2, 16), 9, at::kCPU));
  ASSERT_OK_AND_ASSIGN(EncoderOutput near, enc->Forward(input, *fresh));
  const double diff = MaxAbsDiff(plain.last_hidden_state, near.last_hidden_state);
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.1);
}

TEST(AdapterSet, OptimizerStepChangesOnlyThatTask) {
  auto enc = MakeEncoder(TinyConfig());
  auto task_a = MakeTrainedLikeSet(*enc, 3, 1);
  auto task_b = MakeTrainedLikeSet(*enc, 2, 2);
  std::map<std::string, at::Tensor> encoder_before;
  for (const auto& [name, t] : enc->weights().Named()) encoder_before[name] = t.clone();
  std::map<std::string, at::Tensor> a_before, b_before;
  for (const auto& [name, t] : task_a->Named()) a_before[name] = t.clone();
  for (const auto& [name, t] : task_b->Named()) b_before[name] = t.clone();

  task_a->SetRequiresGrad(true);
  torch::optim::AdamW opt(task_a->Parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
  EncoderInput input = MakeInput({{2, 11, 12, 13, 3}, {2, 14, 3}});
  at::Tensor labels = at::tensor({0, 2}, at::kLong);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    ASSERT_OK_AND_ASSIGN(EncoderOutput out, enc->Forward(input, *task_a, {.train = true}));
    at::Tensor loss = at::cross_entropy_loss(out.logits, labels);
    loss.backward();
    opt.step();
  }
  for (const auto& [name, t] : enc->weights().Named()) {
    EXPECT_TRUE(BitEqual(t, encoder_before[name])) << "encoder tensor changed: " << name;
    EXPECT_FALSE(t.grad().defined()) << name;
  }
  for (const auto& [name, t] : task_b->Named()) EXPECT_TRUE(BitEqual(t, b_before[name])) << name;
  int changed = 0;
  for (const auto& [name, t] : task_a->Named()) changed += BitEqual(t.detach(), a_before[name]) ? 0 : 1;
  EXPECT_EQ(changed, static_cast<int>(a_before.size())) << "every trainable tensor of task A moves";
}

TEST(AdapterSet, WeightDecayExcludesBiasesAndLayerNorms) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 2, 1);
  const size_t decayed = set->DecayedParameters().size();
  const size_t undecayed = set->UndecayedParameters().size();
  EXPECT_EQ(decayed, 2u * 2u * 2u + 1u);                   // D and U of 4 adapters, head weight
  EXPECT_EQ(undecayed, 2u * 2u * 2u + 2u * 4u + 2u + 1u);  // adapter biases, LNs, emb LN, head bias
  EXPECT_EQ(decayed + undecayed, set->Parameters().size());
}

class MixedTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    enc_ = MakeEncoder(TinyConfig());
    // Different bottlenecks and label counts, to exercise zero padding.
    sets_ = {MakeTrainedLikeSet(*enc_, 2, 11, 8), MakeTrainedLikeSet(*enc_, 3, 12, 16),
             MakeTrainedLikeSet(*enc_, 5, 13, 4), MakeTrainedLikeSet(*enc_, 2, 14, 8)};
    std::vector<std::shared_ptr<const AdapterSet>> c(sets_.begin(), sets_.end());
    auto stack = AdapterStack::Create(c, enc_->config(), at::kCPU, at::kFloat, /*build_gather_tensors=*/true);
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = *stack;
  }
  std::unique_ptr<BertEncoder> enc_;
  std::vector<std::shared_ptr<AdapterSet>> sets_;
  std::shared_ptr<const AdapterStack> stack_;
  std::vector<std::vector<int64_t>> rows_ = {
      {2, 5, 6, 7, 8, 9, 3}, {2, 10, 3}, {2, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3},
      {2, 20, 21, 3},        {2, 22, 3}, {2, 23, 24, 25, 26, 3}};
  std::vector<int64_t> slots_ = {2, 0, 1, 2, 3, 0};
};

TEST_F(MixedTaskTest, EachRowEqualsItsSingleTaskForward) {
  for (MixedStrategy s : {MixedStrategy::kSegments, MixedStrategy::kGatherBmm, MixedStrategy::kAuto}) {
    ASSERT_OK_AND_ASSIGN(EncoderOutput mixed, enc_->Forward(MakeInput(rows_), *stack_, slots_, {.strategy = s}));
    ASSERT_EQ(mixed.logits.size(1), 5);
    for (size_t i = 0; i < rows_.size(); ++i) {
      const AdapterSet& task = *sets_[static_cast<size_t>(slots_[i])];
      ASSERT_OK_AND_ASSIGN(EncoderOutput single, enc_->Forward(MakeInput({rows_[i]}), task));
      const int64_t len = static_cast<int64_t>(rows_[i].size());
      const int64_t labels = task.config().num_labels();
      at::Tensor row_hidden = mixed.last_hidden_state[static_cast<int64_t>(i)].narrow(0, 0, len);
      EXPECT_LT(MaxAbsDiff(row_hidden, single.last_hidden_state[0]), 1e-5) << "row " << i;
      EXPECT_LT(MaxAbsDiff(mixed.pooled[static_cast<int64_t>(i)], single.pooled[0]), 1e-5) << "row " << i;
      at::Tensor row_logits = mixed.logits[static_cast<int64_t>(i)];
      EXPECT_LT(MaxAbsDiff(row_logits.narrow(0, 0, labels), single.logits[0]), 1e-5) << "row " << i;
      for (int64_t j = labels; j < 5; ++j) {
        EXPECT_TRUE(std::isinf(row_logits[j].item<float>()) && row_logits[j].item<float>() < 0);
      }
    }
  }
}

// Every activation serves beside the others in one batch (segments: the
// gathered path needs one activation), each row as its task alone; gelu_new
// is GELU's tanh form: its oneDNN epilogue matches ATen's at::gelu(y,
// "tanh"), and it is not the exact form (same weights, other outputs).
TEST(AdapterActivations, EveryActivationServesMixedAndGeluNewIsTheTanhForm) {
  c10::InferenceMode guard;
  std::unique_ptr<BertEncoder> enc = MakeEncoder(TinyConfig());
  const std::vector<Activation> acts = {Activation::kGelu, Activation::kRelu, Activation::kTanh, Activation::kSilu,
                                        Activation::kGeluNew};
  std::vector<std::shared_ptr<const AdapterSet>> sets;
  for (Activation a : acts) {
    AdapterConfig c = MakeAdapterConfig(3, 8);
    c.activation = a;
    std::shared_ptr<AdapterSet> set = MakeTrainedLikeSet(*enc, c, /*seed=*/21);  // the same weights for each
    // Down projections ([m = 8, d]) large enough that the activations'
    // inputs reach |y| ~ 3, where the two GELUs differ most.
    for (at::Tensor& t : set->Parameters()) {
      if (t.dim() == 2 && t.size(0) == 8) t.mul_(30);
    }
    sets.push_back(set);
  }
  ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(sets, enc->config(), at::kCPU, at::kFloat,
                                                        /*build_gather_tensors=*/true));
  EXPECT_FALSE(stack->has_gather_tensors());
  const std::vector<std::vector<int64_t>> rows = {
      {2, 5, 6, 7, 3}, {2, 8, 9, 3}, {2, 10, 3}, {2, 11, 12, 3}, {2, 13, 14, 15, 3}};
  const std::vector<int64_t> slots = {4, 0, 2, 1, 3};
  ASSERT_OK_AND_ASSIGN(EncoderOutput mixed, enc->Forward(MakeInput(rows), *stack, slots, {}));
  std::vector<at::Tensor> alone(acts.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const AdapterSet& task = *sets[static_cast<size_t>(slots[i])];
    ASSERT_OK_AND_ASSIGN(EncoderOutput single, enc->Forward(MakeInput({rows[i]}), task));
    EXPECT_LT(MaxAbsDiff(mixed.logits[static_cast<int64_t>(i)], single.logits[0]), 1e-5)
        << ActivationName(task.config().activation);
  }
  const EncoderInput input = MakeInput({rows[0]});
  ASSERT_OK_AND_ASSIGN(EncoderOutput gelu_new, enc->Forward(input, *sets[4]));
  ASSERT_OK_AND_ASSIGN(EncoderOutput gelu, enc->Forward(input, *sets[0]));
  const double apart = MaxAbsDiff(gelu_new.last_hidden_state, gelu.last_hidden_state);
  EXPECT_GT(apart, 1e-6);
  EXPECT_LT(apart, 0.05);  // close forms: the difference is the approximation's
  const MatmulBackend saved = GetMatmulBackend();
  SetMatmulBackend(MatmulBackend::kATen);
  auto aten = enc->Forward(input, *sets[4]);
  SetMatmulBackend(saved);
  ASSERT_OK(aten.status());
  EXPECT_LT(MaxAbsDiff(gelu_new.last_hidden_state, aten->last_hidden_state), 1e-5);
  ASSERT_OK_AND_ASSIGN(Activation parsed, ParseActivation("gelu_new"));
  EXPECT_EQ(parsed, Activation::kGeluNew);
  EXPECT_THAT(ParseActivation("gelu_fast").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("gelu_new")));
}

// A bf16 encoder multiplies in bf16 but keeps the residual stream, the
// LayerNorms and the head in fp32: its outputs are fp32, every path (single
// task, segments, gathered bmm) stays close to the fp32 reference, and the
// paths agree with each other as closely as fp32 rounding allows.
TEST_F(MixedTaskTest, Bf16EncoderKeepsAnFp32StreamOnEveryPath) {
  ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(TinyConfig(), 1));  // MakeEncoder's weights
  BertEncoder::Options opts;
  opts.dtype = at::kBFloat16;
  opts.fingerprint = enc_->fingerprint();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<BertEncoder> bf16, BertEncoder::Create(TinyConfig(), std::move(w), opts));
  std::vector<std::shared_ptr<const AdapterSet>> c(sets_.begin(), sets_.end());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const AdapterStack> stack,
                       AdapterStack::Create(c, bf16->config(), at::kCPU, at::kBFloat16, true));
  ASSERT_OK_AND_ASSIGN(EncoderOutput reference, enc_->Forward(MakeInput(rows_), *stack_, slots_));
  for (MixedStrategy s : {MixedStrategy::kSegments, MixedStrategy::kGatherBmm}) {
    ASSERT_OK_AND_ASSIGN(EncoderOutput out, bf16->Forward(MakeInput(rows_), *stack, slots_, {.strategy = s}));
    EXPECT_EQ(out.last_hidden_state.scalar_type(), at::kFloat);
    EXPECT_EQ(out.logits.scalar_type(), at::kFloat);
    for (size_t i = 0; i < rows_.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i);
      const int64_t labels = sets_[static_cast<size_t>(slots_[i])]->config().num_labels();
      const double diff = MaxAbsDiff(out.logits[r].narrow(0, 0, labels), reference.logits[r].narrow(0, 0, labels));
      EXPECT_LT(diff, 0.05) << "row " << i;
      EXPECT_GT(diff, 0.0) << "row " << i << ": bf16 computed exactly what fp32 did";
    }
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<AdapterSet> task, sets_[2]->Clone(at::kCPU, at::kBFloat16));
  ASSERT_OK_AND_ASSIGN(EncoderOutput single, bf16->Forward(MakeInput({rows_[0]}), *task));
  EXPECT_EQ(single.logits.scalar_type(), at::kFloat);
  EXPECT_LT(MaxAbsDiff(single.logits[0], reference.logits[0].narrow(0, 0, single.logits.size(1))), 0.05);
}

// With reduced_residual_stream the stream stays in bf16 (transformers' bf16
// forward): the outputs are bf16, every path stays near the fp32 reference,
// and the result is not the fp32-stream one.
TEST_F(MixedTaskTest, ReducedResidualStreamKeepsTheStreamInTheEncodersDtype) {
  std::unique_ptr<BertEncoder> by_stream[2];
  for (bool reduced : {false, true}) {
    ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(TinyConfig(), 1));  // MakeEncoder's weights
    BertEncoder::Options opts;
    opts.dtype = at::kBFloat16;
    opts.fingerprint = enc_->fingerprint();
    opts.reduced_residual_stream = reduced;
    ASSERT_OK_AND_ASSIGN(by_stream[reduced], BertEncoder::Create(TinyConfig(), std::move(w), opts));
  }
  std::vector<std::shared_ptr<const AdapterSet>> c(sets_.begin(), sets_.end());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<const AdapterStack> stack,
                       AdapterStack::Create(c, enc_->config(), at::kCPU, at::kBFloat16, true));
  ASSERT_OK_AND_ASSIGN(EncoderOutput reference, enc_->Forward(MakeInput(rows_), *stack_, slots_));
  for (MixedStrategy s : {MixedStrategy::kSegments, MixedStrategy::kGatherBmm}) {
    ASSERT_OK_AND_ASSIGN(EncoderOutput wide, by_stream[0]->Forward(MakeInput(rows_), *stack, slots_, {.strategy = s}));
    ASSERT_OK_AND_ASSIGN(EncoderOutput out, by_stream[1]->Forward(MakeInput(rows_), *stack, slots_, {.strategy = s}));
    EXPECT_EQ(out.last_hidden_state.scalar_type(), at::kBFloat16);
    EXPECT_EQ(out.pooled.scalar_type(), at::kBFloat16);
    EXPECT_EQ(out.logits.scalar_type(), at::kBFloat16);
    EXPECT_GT(MaxAbsDiff(out.last_hidden_state, wide.last_hidden_state), 0.0) << "the option changed nothing";
    for (size_t i = 0; i < rows_.size(); ++i) {
      const int64_t r = static_cast<int64_t>(i);
      const int64_t labels = sets_[static_cast<size_t>(slots_[i])]->config().num_labels();
      EXPECT_LT(MaxAbsDiff(out.logits[r].narrow(0, 0, labels), reference.logits[r].narrow(0, 0, labels)), 0.1)
          << "row " << i;
    }
  }
}

TEST_F(MixedTaskTest, RowsAreInvariantToOtherRowsLengthsAndTasks) {
  ASSERT_OK_AND_ASSIGN(EncoderOutput base, enc_->Forward(MakeInput(rows_), *stack_, slots_));
  // Row 1 again, among different companions (other tasks, longer rows, more padding).
  std::vector<std::vector<int64_t>> other_rows = {
      {2, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 3}, rows_[1], {2, 43, 3}};
  std::vector<int64_t> other_slots = {3, slots_[1], 1};
  for (MixedStrategy s : {MixedStrategy::kSegments, MixedStrategy::kGatherBmm}) {
    ASSERT_OK_AND_ASSIGN(EncoderOutput out,
                         enc_->Forward(MakeInput(other_rows, 20), *stack_, other_slots, {.strategy = s}));
    EXPECT_LT(MaxAbsDiff(out.pooled[1], base.pooled[1]), 1e-5);
    EXPECT_LT(MaxAbsDiff(out.logits[1].narrow(0, 0, 2), base.logits[1].narrow(0, 0, 2)), 1e-5);
    EXPECT_LT(MaxAbsDiff(out.last_hidden_state[1].narrow(0, 0, 3), base.last_hidden_state[1].narrow(0, 0, 3)), 1e-5);
  }
}

TEST_F(MixedTaskTest, BothStrategiesAgreeAndTasksReallyDiffer) {
  ASSERT_OK_AND_ASSIGN(EncoderOutput seg,
                       enc_->Forward(MakeInput(rows_), *stack_, slots_, {.strategy = MixedStrategy::kSegments}));
  ASSERT_OK_AND_ASSIGN(EncoderOutput gat,
                       enc_->Forward(MakeInput(rows_), *stack_, slots_, {.strategy = MixedStrategy::kGatherBmm}));
  EXPECT_LT(MaxAbsDiff(seg.last_hidden_state, gat.last_hidden_state), 1e-5);
  EXPECT_LT(MaxAbsDiff(seg.pooled, gat.pooled), 1e-5);
  at::Tensor finite = at::isfinite(seg.logits);
  EXPECT_TRUE(at::equal(finite, at::isfinite(gat.logits)));
  EXPECT_LT(MaxAbsDiff(seg.logits.masked_select(finite), gat.logits.masked_select(finite)), 1e-5);
  // The same row under two different tasks gives different outputs.
  ASSERT_OK_AND_ASSIGN(EncoderOutput t0, enc_->Forward(MakeInput({rows_[0]}), *sets_[0]));
  ASSERT_OK_AND_ASSIGN(EncoderOutput t3, enc_->Forward(MakeInput({rows_[0]}), *sets_[3]));
  EXPECT_GT(MaxAbsDiff(t0.pooled, t3.pooled), 1e-3);
}

TEST(MixedStrategyRule, SegmentsOnCpusGatheredOnCudaWhenTheStackCanGather) {
  const c10::Device cpu(c10::kCPU), cuda(c10::kCUDA, 0);
  EXPECT_EQ(BertEncoder::ChooseStrategy(32, 8, true, cpu), MixedStrategy::kSegments);
  EXPECT_EQ(BertEncoder::ChooseStrategy(1000, 1000, true, cpu), MixedStrategy::kSegments);
  EXPECT_EQ(BertEncoder::ChooseStrategy(1000, 1000, true, cuda), MixedStrategy::kGatherBmm);
  EXPECT_EQ(BertEncoder::ChooseStrategy(32, 2, true, cuda), MixedStrategy::kGatherBmm);
  // One task is the single-task forward; a stack without gather tensors
  // (several activations) can only run segments.
  EXPECT_EQ(BertEncoder::ChooseStrategy(32, 1, true, cuda), MixedStrategy::kSegments);
  EXPECT_EQ(BertEncoder::ChooseStrategy(32, 8, false, cuda), MixedStrategy::kSegments);
}

TEST_F(MixedTaskTest, BadSlotsAndMissingGatherTensorsAreErrors) {
  EXPECT_THAT(enc_->Forward(MakeInput(rows_), *stack_, std::vector<int64_t>{0, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("row_slots")));
  EXPECT_THAT(enc_->Forward(MakeInput(rows_), *stack_, std::vector<int64_t>{0, 1, 2, 3, 4, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside the stack")));
  std::vector<std::shared_ptr<const AdapterSet>> c(sets_.begin(), sets_.end());
  ASSERT_OK_AND_ASSIGN(auto no_gather, AdapterStack::Create(c, enc_->config(), at::kCPU, at::kFloat, false));
  EXPECT_THAT(enc_->Forward(MakeInput(rows_), *no_gather, slots_, {.strategy = MixedStrategy::kGatherBmm}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("gather")));
  EXPECT_OK(enc_->Forward(MakeInput(rows_), *no_gather, slots_));  // kAuto falls back to segments
}

// The resident slab (adapter_slab.h): the tasks of MixedTaskTest, stored in
// a slab of m* = 16 (their bottlenecks are 8, 16, 4 and 8).
class SlabTest : public MixedTaskTest {
 protected:
  std::shared_ptr<AdapterSlab> MakeSlab(int64_t capacity, int64_t bottleneck = 16) {
    auto slab = AdapterSlab::Create(enc_->config(), {.capacity = capacity, .bottleneck = bottleneck});
    EXPECT_TRUE(slab.ok()) << slab.status();
    return slab.ok() ? *slab : nullptr;
  }
  // The rows' outputs from a stack of `sets` (gathered or by segments)
  // against each row's task alone, from its own tensors.
  void ExpectEachRowIsItsTaskAlone(const std::vector<std::shared_ptr<const AdapterSet>>& sets, MixedStrategy s) {
    ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(sets, enc_->config(), at::kCPU, at::kFloat, true));
    ASSERT_TRUE(stack->reads_slab());
    ASSERT_OK_AND_ASSIGN(EncoderOutput mixed, enc_->Forward(MakeInput(rows_), *stack, slots_, {.strategy = s}));
    for (size_t i = 0; i < rows_.size(); ++i) {
      const AdapterSet& own = *sets_[static_cast<size_t>(slots_[i])];
      ASSERT_OK_AND_ASSIGN(EncoderOutput single, enc_->Forward(MakeInput({rows_[i]}), own));
      const int64_t len = static_cast<int64_t>(rows_[i].size());
      EXPECT_LT(
          MaxAbsDiff(mixed.last_hidden_state[static_cast<int64_t>(i)].narrow(0, 0, len), single.last_hidden_state[0]),
          1e-5)
          << "row " << i;
      EXPECT_LT(
          MaxAbsDiff(mixed.logits[static_cast<int64_t>(i)].narrow(0, 0, own.config().num_labels()), single.logits[0]),
          1e-5)
          << "row " << i;
    }
  }
};

TEST_F(SlabTest, StoredSetsAreViewsOfTheirSlotWithTheSameValues) {
  auto slab = MakeSlab(4);
  for (size_t t = 0; t < sets_.size(); ++t) {
    ASSERT_OK_AND_ASSIGN(auto stored, slab->Store(*sets_[t]));
    EXPECT_EQ(stored->slab(), slab.get());
    EXPECT_EQ(stored->slab_slot(), 0);  // each set is dropped before the next: slot 0 again
    const auto a = sets_[t]->Named(), b = stored->Named();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(BitEqual(a[i].second, b[i].second)) << a[i].first;
    // The attention adapter's D of layer 1 lives in the slab's memory.
    const at::Tensor& slab_d = slab->layers()[1].attention_adapter.down_t;
    const at::Tensor& view_d = stored->layers()[1].attention_adapter.down_weight;
    EXPECT_EQ(view_d.data_ptr(), slab_d[0].data_ptr());
  }
  EXPECT_EQ(slab->used(), 0);
}

TEST_F(SlabTest, MixedBatchesFromTheSlabEqualEachTaskAloneOnBothStrategies) {
  auto slab = MakeSlab(8);
  std::vector<std::shared_ptr<const AdapterSet>> stored;
  for (const auto& s : sets_) {
    ASSERT_OK_AND_ASSIGN(auto st, slab->Store(*s));
    stored.push_back(st);
  }
  EXPECT_EQ(slab->used(), 4);
  // Segments read each slot through its views (strided weights in the
  // oneDNN products); the gathered path reads the slab by slot.
  ExpectEachRowIsItsTaskAlone(stored, MixedStrategy::kSegments);
  ExpectEachRowIsItsTaskAlone(stored, MixedStrategy::kGatherBmm);
  // Rows gather from the tasks' slab slots, not from the stack's order.
  std::vector<std::shared_ptr<const AdapterSet>> reversed(stored.rbegin(), stored.rend());
  ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(reversed, enc_->config(), at::kCPU, at::kFloat, true));
  EXPECT_EQ(stack->adapter_row(0), stored.back()->slab_slot());
}

// A slot given back and reused by a task with a narrower bottleneck holds
// nothing of its last task: the padded units past the new task's m are
// zero, so the new task's outputs are its own.
TEST_F(SlabTest, AReusedSlotNeverServesItsLastTasksWeights) {
  auto slab = MakeSlab(1);
  {
    ASSERT_OK_AND_ASSIGN(auto wide, slab->Store(*sets_[1]));  // m = 16 fills the slot
    EXPECT_EQ(wide->slab_slot(), 0);
    EXPECT_THAT(slab->Store(*sets_[2]), StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("slab slots")));
  }
  ASSERT_OK_AND_ASSIGN(auto narrow, slab->Store(*sets_[2]));  // m = 4 in the same slot
  ASSERT_EQ(narrow->slab_slot(), 0);
  std::vector<std::shared_ptr<const AdapterSet>> one = {narrow, narrow};
  // Two stack entries of one task: the gathered path (not the single-task
  // one) reads the slot's whole width.
  ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(one, enc_->config(), at::kCPU, at::kFloat, true));
  ASSERT_OK_AND_ASSIGN(EncoderOutput gathered, enc_->Forward(MakeInput(rows_), *stack, std::vector<int64_t>(6, 0),
                                                             {.strategy = MixedStrategy::kGatherBmm}));
  ASSERT_OK_AND_ASSIGN(EncoderOutput own, enc_->Forward(MakeInput(rows_), *sets_[2]));
  EXPECT_LT(MaxAbsDiff(gathered.last_hidden_state, own.last_hidden_state), 1e-5);
  EXPECT_LT(MaxAbsDiff(gathered.logits, own.logits), 1e-5);
}

TEST_F(SlabTest, SetsThatDoNotFitAreRefused) {
  auto slab = MakeSlab(2, /*bottleneck=*/8);
  EXPECT_THAT(slab->Store(*sets_[1]), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("wider")));
  ASSERT_OK_AND_ASSIGN(auto bf16, sets_[0]->Clone(at::kCPU, at::kBFloat16));
  EXPECT_THAT(slab->Store(*bf16), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype")));
  auto other = MakeEncoder(TinyBertConfig(45, 48));
  auto wider_encoder = MakeTrainedLikeSet(*other, 2, 1, 8);
  EXPECT_THAT(slab->Store(*wider_encoder), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fit")));
  EXPECT_EQ(slab->used(), 0);
  EXPECT_THAT(AdapterSlab::Create(enc_->config(), {.capacity = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("slot")));
  // A slot's bytes: per layer two adapters (D^T, its bias, U^T with its
  // bias row padded to a multiple of 8) and two LayerNorms, plus the
  // embedding LayerNorm; fp32.
  const int64_t d = 32, m = 8, k = 16, layers = 2;
  EXPECT_EQ(AdapterSlab::SlotBytes(enc_->config(), m, at::kFloat),
            (layers * (2 * (d * m + m + k * d) + 4 * d) + 2 * d) * 4);
}

TEST(AdapterFormat, RoundTripIsBitExactWithMetadata) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 3, 5, 8);
  ASSERT_OK_AND_ASSIGN(std::string bytes, SerializeAdapterSet(*set, enc->fingerprint(), {{"task_id", "sentiment"}}));
  ASSERT_OK_AND_ASSIGN(AdapterFileInfo info, ReadAdapterInfo(bytes));
  EXPECT_EQ(info.format_version, kAdapterFormatVersion);
  EXPECT_EQ(info.config.bottleneck_size, 8);
  EXPECT_EQ(info.config.labels, set->config().labels);
  EXPECT_EQ(info.encoder_fingerprint, enc->fingerprint());
  EXPECT_EQ(info.extra.at("task_id"), "sentiment");
  ASSERT_OK_AND_ASSIGN(auto back, DeserializeAdapterSet(bytes, enc->config(), enc->fingerprint(), at::kCPU));
  auto a = set->Named();
  auto b = back->Named();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(BitEqual(a[i].second, b[i].second)) << a[i].first;
  }
  EncoderInput input = MakeInput({{2, 7, 8, 3}});
  ASSERT_OK_AND_ASSIGN(EncoderOutput o1, enc->Forward(input, *set));
  ASSERT_OK_AND_ASSIGN(EncoderOutput o2, enc->Forward(input, *back));
  EXPECT_TRUE(BitEqual(o1.logits, o2.logits));
  // Serialisation is deterministic.
  ASSERT_OK_AND_ASSIGN(std::string again, SerializeAdapterSet(*back, enc->fingerprint(), {{"task_id", "sentiment"}}));
  EXPECT_EQ(bytes, again);
}

// An import checks a file as it arrives: its header alone gives the file's
// size and metadata, and no valid file is larger than MaxAdapterFileBytes.
TEST(AdapterFormat, TheHeaderAloneGivesTheSizeAndBoundsIt) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 3, 5, 8);
  int64_t numel = 0;
  for (const auto& [name, t] : set->Named()) numel += t.numel();
  const BertConfig& c = enc->config();
  EXPECT_EQ(AdapterSetParameterCount(c.num_hidden_layers, c.hidden_size, 8, 3), numel);
  ASSERT_OK_AND_ASSIGN(std::string bytes, SerializeAdapterSet(*set, enc->fingerprint()));
  auto span = [&](size_t n) { return std::span<const std::byte>(reinterpret_cast<const std::byte*>(bytes.data()), n); };
  // Too short to tell.
  ASSERT_OK_AND_ASSIGN(auto none, ReadSafetensorsHeader(span(7)));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK_AND_ASSIGN(none, ReadSafetensorsHeader(span(20)));
  EXPECT_FALSE(none.has_value());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  ASSERT_OK_AND_ASSIGN(auto header, ReadSafetensorsHeader(span(8 + header_len)));
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->total_bytes, bytes.size());
  ASSERT_OK_AND_ASSIGN(AdapterFileInfo info, ReadAdapterInfo(header->metadata));
  EXPECT_EQ(info.config.bottleneck_size, 8);
  EXPECT_GE(MaxAdapterFileBytes(c, info, static_cast<int64_t>(8 + header_len)), static_cast<int64_t>(bytes.size()));
  // In F32 the bound is exact.
  EXPECT_EQ(MaxAdapterFileBytes(c, info, static_cast<int64_t>(8 + header_len)), static_cast<int64_t>(bytes.size()));
  // A prefix no file starts with is refused as soon as it shows.
  std::string bad = bytes.substr(0, 8 + header_len);
  bad[8] = '[';
  EXPECT_THAT(ReadSafetensorsHeader({reinterpret_cast<const std::byte*>(bad.data()), bad.size()}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  std::string huge(8, '\0');
  huge[6] = 1;  // a 2^48-byte header
  EXPECT_THAT(ReadSafetensorsHeader({reinterpret_cast<const std::byte*>(huge.data()), huge.size()}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceeds the limit")));
}

// The serving cache loads straight into the encoder's dtype: the same values
// as loading fp32 and converting, with no fp32 copy in between.
TEST(AdapterFormat, LoadsStraightIntoTheRequestedDtype) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 3, 5, 8);
  ASSERT_OK_AND_ASSIGN(std::string bytes, SerializeAdapterSet(*set, enc->fingerprint()));
  ASSERT_OK_AND_ASSIGN(
      auto bf16, DeserializeAdapterSet(bytes, enc->config(), enc->fingerprint(), at::kCPU, {.dtype = at::kBFloat16}));
  EXPECT_EQ(bf16->dtype(), at::kBFloat16);
  ASSERT_OK_AND_ASSIGN(auto converted, set->Clone(at::kCPU, at::kBFloat16));
  auto a = converted->Named();
  auto b = bf16->Named();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].second.scalar_type(), at::kBFloat16) << b[i].first;
    EXPECT_TRUE(BitEqual(a[i].second, b[i].second)) << a[i].first;
  }
  EXPECT_THAT(DeserializeAdapterSet(bytes, enc->config(), enc->fingerprint(), at::kCPU, {.dtype = at::kLong}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("floating-point")));
}

TEST(AdapterFormat, LoadingOnAnotherEncoderIsRefused) {
  auto enc = MakeEncoder(TinyConfig(), 1);
  auto other = MakeEncoder(TinyConfig(), 2);
  ASSERT_NE(enc->fingerprint(), other->fingerprint());
  auto set = MakeTrainedLikeSet(*enc, 2, 5);
  ASSERT_OK_AND_ASSIGN(std::string bytes, SerializeAdapterSet(*set, enc->fingerprint()));
  EXPECT_THAT(DeserializeAdapterSet(bytes, other->config(), other->fingerprint(), at::kCPU),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("trained on model")));
  BertConfig wider = TinyConfig();
  wider.num_hidden_layers = 3;
  EXPECT_THAT(DeserializeAdapterSet(bytes, wider, enc->fingerprint(), at::kCPU),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("layers")));
}

// Re-serialises `bytes` after `edit` changes its tensors or metadata.
std::string Rewrite(
    const std::string& bytes,
    const std::function<void(std::map<std::string, at::Tensor>&, std::map<std::string, std::string>&)>& edit) {
  auto file = SafetensorsFile::FromString(bytes);
  EXPECT_TRUE(file.ok());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, view] : file->tensors()) {
    tensors[name] = *ViewToTensor(view, file->holder(), at::kCPU, at::kFloat);
  }
  std::map<std::string, std::string> md(file->metadata().begin(), file->metadata().end());
  edit(tensors, md);
  SafetensorsWriter w;
  for (auto& [k, v] : md) w.SetMetadata(k, v);
  for (auto& [name, t] : tensors) EXPECT_OK(AddTensor(w, name, t, DType::kF32));
  return w.Serialize();
}

TEST(AdapterFormat, MalformedFilesAreInvalidArgumentNamingTheProblem) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 2, 5);
  ASSERT_OK_AND_ASSIGN(std::string good, SerializeAdapterSet(*set, enc->fingerprint()));
  struct Case {
    std::string what;
    std::string bytes;
    std::string message;
  };
  std::vector<Case> cases = {
      {"garbage", "not a safetensors file at all", "safetensors"},
      {"truncated", good.substr(0, good.size() / 2), "safetensors"},
      {"missing tensor", Rewrite(good, [](auto& t, auto&) { t.erase("layers.1.ffn_adapter.up.bias"); }),
       "'layers.1.ffn_adapter.up.bias' is missing"},
      {"unexpected tensor", Rewrite(good, [](auto& t, auto&) { t["layers.9.x"] = at::zeros({1}); }),
       "unexpected tensor 'layers.9.x'"},
      {"mis-shaped",
       Rewrite(good,
               [](auto& t, auto&) {
                 t["head.weight"] = at::zeros({3, 32});
               }),
       "'head.weight' has shape [3,32]"},
      {"not an adapter", Rewrite(good, [](auto&, auto& m) { m["format"] = "pt"; }), "not an adapter file"},
      {"future version", Rewrite(good, [](auto&, auto& m) { m["format_version"] = "99"; }), "format_version 99"},
      {"bad labels", Rewrite(good, [](auto&, auto& m) { m["labels"] = "[1,2]"; }), "labels"},
      {"one label", Rewrite(good, [](auto&, auto& m) { m["labels"] = "[\"a\"]"; }), "at least 2 labels"},
      {"bad activation", Rewrite(good, [](auto&, auto& m) { m["activation"] = "swish9"; }), "swish9"},
      {"missing key", Rewrite(good, [](auto&, auto& m) { m.erase("bottleneck_size"); }), "bottleneck_size"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(DeserializeAdapterSet(c.bytes, enc->config(), enc->fingerprint(), at::kCPU),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
  EXPECT_THAT(SerializeAdapterSet(*set, enc->fingerprint(), {{"labels", "x"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reserved")));
}

TEST(AdapterFormat, NonFiniteTensorsAreRefusedNamingThem) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 2, 5);
  EXPECT_OK(CheckFinite(*set));
  ASSERT_OK_AND_ASSIGN(std::string good, SerializeAdapterSet(*set, enc->fingerprint()));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    const std::string poisoned =
        Rewrite(good, [bad](auto& t, auto&) { t["layers.0.attention_adapter.down.bias"][1] = bad; });
    EXPECT_THAT(DeserializeAdapterSet(poisoned, enc->config(), enc->fingerprint(), at::kCPU),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'layers.0.attention_adapter.down.bias'"), HasSubstr("NaN or infinite"))));
    // The serving cache skips the check (stored bytes were checked on the
    // way in); CheckFinite then still names the tensor.
    ASSERT_OK_AND_ASSIGN(auto loaded, DeserializeAdapterSet(poisoned, enc->config(), enc->fingerprint(), at::kCPU,
                                                            {.check_finite = false}));
    EXPECT_THAT(CheckFinite(*loaded),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'layers.0.attention_adapter.down.bias'")));
  }
}

TEST(AdapterFormat, FormatOneFilesMatchTheWeightsFingerprint) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 2, 5);
  ASSERT_OK_AND_ASSIGN(std::string v3, SerializeAdapterSet(*set, "sha256:model"));
  ASSERT_OK_AND_ASSIGN(AdapterFileInfo info, ReadAdapterInfo(v3));
  EXPECT_EQ(info.format_version, 3);
  // A version 2 file: no kind, so sequence classification.
  const std::string v2 = Rewrite(v3, [](auto&, auto& m) {
    m["format_version"] = "2";
    m.erase("task_kind");
  });
  ASSERT_OK_AND_ASSIGN(AdapterFileInfo info2, ReadAdapterInfo(v2));
  EXPECT_EQ(info2.format_version, 2);
  EXPECT_EQ(info2.config.kind, TaskKind::kSequenceClassification);
  const std::string v1 = Rewrite(v2, [](auto&, auto& m) {
    m["format_version"] = "1";
    m["encoder_fingerprint"] = "sha256:weights";
  });
  const AdapterLoadOptions options{.v1_fingerprint = "sha256:weights"};
  EXPECT_OK(DeserializeAdapterSet(v2, enc->config(), "sha256:model", at::kCPU, options));
  ASSERT_OK_AND_ASSIGN(auto from_v1, DeserializeAdapterSet(v1, enc->config(), "sha256:model", at::kCPU, options));
  EXPECT_TRUE(BitEqual(from_v1->head_weight(), set->head_weight()));
  // Each version is held to its own fingerprint.
  EXPECT_THAT(
      DeserializeAdapterSet(v1, enc->config(), "sha256:model", at::kCPU, {.v1_fingerprint = "sha256:other-weights"}),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("format 1")));
  EXPECT_THAT(DeserializeAdapterSet(v2, enc->config(), "sha256:weights", at::kCPU, options),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("vocabulary")));
}

// A set of each kind, with what its head needs.
AdapterConfig KindConfig(TaskKind kind) {
  AdapterConfig c = MakeAdapterConfig(3, 8);
  c.kind = kind;
  if (kind == TaskKind::kTokenClassification) {
    c.labels = BioTagSet(std::vector<std::string>{"PER", "LOC"});
    c.tagging_max_seq_len = 40;
  }
  if (kind == TaskKind::kRegression || kind == TaskKind::kExtractiveQa) c.labels.clear();
  c.target = {.mean = 3.25, .stddev = 0.1 + 1.0 / 3};
  c.qa = {
      .max_seq_len = 48, .doc_stride = 16, .max_question_tokens = 12, .max_answer_tokens = 7, .allow_no_answer = true};
  return c;
}

TEST(AdapterFormat, EveryKindRoundTripsWithWhatItsHeadNeeds) {
  auto enc = MakeEncoder(TinyConfig());
  for (TaskKind kind : {TaskKind::kSequenceClassification, TaskKind::kMultiLabelClassification, TaskKind::kRegression,
                        TaskKind::kTokenClassification, TaskKind::kExtractiveQa}) {
    SCOPED_TRACE(std::string(TaskKindName(kind)));
    const AdapterConfig c = KindConfig(kind);
    auto set = MakeTrainedLikeSet(*enc, c, 9);
    EXPECT_EQ(set->head_weight().size(0), c.num_outputs());
    ASSERT_OK_AND_ASSIGN(std::string bytes, SerializeAdapterSet(*set, enc->fingerprint()));
    ASSERT_OK_AND_ASSIGN(auto back, DeserializeAdapterSet(bytes, enc->config(), enc->fingerprint(), at::kCPU));
    const AdapterConfig& b = back->config();
    EXPECT_EQ(b.kind, kind);
    EXPECT_EQ(b.labels, c.labels);
    if (kind == TaskKind::kRegression) {
      EXPECT_EQ(b.target.mean, c.target.mean);  // bit for bit through %.17g
      EXPECT_EQ(b.target.stddev, c.target.stddev);
    }
    if (kind == TaskKind::kExtractiveQa) {
      EXPECT_EQ(b.qa, c.qa);
    }
    EXPECT_EQ(b.tagging_max_seq_len, c.tagging_max_seq_len);
    // The window each kind's rows are cut at, within a limit.
    const int32_t trained = kind == TaskKind::kExtractiveQa ? 48 : kind == TaskKind::kTokenClassification ? 40 : 512;
    EXPECT_EQ(b.window_length(512), trained);
    EXPECT_EQ(b.window_length(24), 24);
    EXPECT_TRUE(BitEqual(back->head_weight(), set->head_weight()));
  }
  EXPECT_EQ(KindConfig(TaskKind::kRegression).num_outputs(), 1);
  EXPECT_EQ(KindConfig(TaskKind::kExtractiveQa).num_outputs(), 2);
  EXPECT_EQ(KindConfig(TaskKind::kTokenClassification).num_outputs(), 5);
}

TEST(AdapterFormat, WhatAKindCannotHaveIsInvalidArgument) {
  auto enc = MakeEncoder(TinyConfig());
  ASSERT_OK_AND_ASSIGN(std::string regression,
                       SerializeAdapterSet(*MakeTrainedLikeSet(*enc, KindConfig(TaskKind::kRegression), 1), "fp"));
  ASSERT_OK_AND_ASSIGN(
      std::string tags,
      SerializeAdapterSet(*MakeTrainedLikeSet(*enc, KindConfig(TaskKind::kTokenClassification), 1), "fp"));
  ASSERT_OK_AND_ASSIGN(std::string qa,
                       SerializeAdapterSet(*MakeTrainedLikeSet(*enc, KindConfig(TaskKind::kExtractiveQa), 1), "fp"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Rewrite(regression, [](auto&, auto& m) { m["task_kind"] = "poetry"; }), "unknown task_kind 'poetry'"},
      {Rewrite(regression, [](auto&, auto& m) { m.erase("task_kind"); }), "'task_kind' is missing"},
      {Rewrite(regression, [](auto&, auto& m) { m["target_stddev"] = "0"; }), "stddev positive"},
      {Rewrite(regression, [](auto&, auto& m) { m["labels"] = "[\"a\",\"b\"]"; }), "no labels"},
      {Rewrite(tags, [](auto&, auto& m) { m["labels"] = "[\"O\",\"I-PER\",\"B-PER\"]"; }), "\"O\" then"},
      {Rewrite(tags, [](auto&, auto& m) { m["labels"] = "[\"O\",\"B-PER\",\"I-PER\",\"B-PER\",\"I-PER\"]"; }),
       "distinct"},
      {Rewrite(qa, [](auto&, auto& m) { m["qa_max_seq_len"] = "10"; }), "max_seq_len >= max_question_tokens + 4"},
      {Rewrite(qa, [](auto&, auto& m) { m["qa_allow_no_answer"] = "yes"; }), "must be 0 or 1"},
      {Rewrite(tags, [](auto&, auto& m) { m["tagging_max_seq_len"] = "2"; }), "'tagging_max_seq_len' is out of range"},
      // An eighth of the 48-token window is 6: a stride of 1 planned a window per context token.
      {Rewrite(qa, [](auto&, auto& m) { m["qa_doc_stride"] = "5"; }), "doc_stride >= max_seq_len / 8"},
      {Rewrite(qa, [](auto&, auto& m) { m["qa_doc_stride"] = "1"; }), "doc_stride >= max_seq_len / 8"},
  };
  EXPECT_OK(ReadAdapterInfo(Rewrite(qa, [](auto&, auto& m) { m["qa_doc_stride"] = "6"; })).status());
  for (const auto& [bytes, message] : cases) {
    EXPECT_THAT(ReadAdapterInfo(bytes), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message))) << message;
  }
  AdapterConfig two_tags = KindConfig(TaskKind::kTokenClassification);
  two_tags.labels = {"O", "B-PER"};
  EXPECT_THAT(two_tags.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"O\" then")));
}

// Heads that read every token, alone and mixed with a classifier: each
// row's logits are those it gets alone, and -inf for the input its head
// does not read.
TEST_F(MixedTaskTest, TokenHeadsGiveEveryPositionsLogitsAloneAndMixed) {
  std::vector<std::shared_ptr<const AdapterSet>> sets = {
      MakeTrainedLikeSet(*enc_, KindConfig(TaskKind::kExtractiveQa), 21),
      MakeTrainedLikeSet(*enc_, KindConfig(TaskKind::kTokenClassification), 22), sets_[1],
      MakeTrainedLikeSet(*enc_, KindConfig(TaskKind::kRegression), 23)};
  ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(sets, enc_->config(), at::kCPU, at::kFloat, true));
  EXPECT_FALSE(stack->has_gather_tensors());  // gathered heads read the pooled vector only
  EXPECT_EQ(stack->max_labels(), 3);
  const std::vector<int64_t> slots = {0, 1, 2, 3, 1, 0};
  ASSERT_OK_AND_ASSIGN(EncoderOutput mixed, enc_->Forward(MakeInput(rows_), *stack, slots));
  ASSERT_TRUE(mixed.logits.defined());
  ASSERT_TRUE(mixed.token_logits.defined());
  EXPECT_EQ(mixed.token_logits.size(2), 5);  // the tagger's 5 tags; QA's 2 padded with -inf
  for (size_t r = 0; r < rows_.size(); ++r) {
    SCOPED_TRACE(r);
    const AdapterSet& set = stack->slot(slots[r]);
    ASSERT_OK_AND_ASSIGN(EncoderOutput alone, enc_->Forward(MakeInput({rows_[r]}), set));
    const int64_t length = static_cast<int64_t>(rows_[r].size());
    const int64_t k = set.config().num_outputs();
    if (ReadsTokens(set.config().kind)) {
      EXPECT_FALSE(alone.logits.defined());
      ASSERT_EQ(alone.token_logits.sizes(), (std::vector<int64_t>{1, length, k}));
      // The head over each token's final state, nothing else.
      EXPECT_LT(
          MaxAbsDiff(alone.token_logits[0], at::linear(alone.last_hidden_state[0], set.head_weight(), set.head_bias())),
          1e-6);
      EXPECT_LT(MaxAbsDiff(mixed.token_logits[static_cast<int64_t>(r)].narrow(0, 0, length).narrow(1, 0, k),
                           alone.token_logits[0]),
                1e-5);
      EXPECT_TRUE(mixed.logits[static_cast<int64_t>(r)].isinf().all().item<bool>());
    } else {
      EXPECT_FALSE(alone.token_logits.defined());
      EXPECT_LT(MaxAbsDiff(mixed.logits[static_cast<int64_t>(r)].narrow(0, 0, k), alone.logits[0]), 1e-5);
      EXPECT_TRUE(mixed.token_logits[static_cast<int64_t>(r)].isinf().all().item<bool>());
    }
  }
}

TEST(AdapterFormat, HalfPrecisionFilesLoadCloseToFp32) {
  auto enc = MakeEncoder(TinyConfig());
  auto set = MakeTrainedLikeSet(*enc, 2, 5);
  ASSERT_OK_AND_ASSIGN(std::string f32, SerializeAdapterSet(*set, enc->fingerprint()));
  ASSERT_OK_AND_ASSIGN(std::string bf16, SerializeAdapterSet(*set, enc->fingerprint(), {}, DType::kBF16));
  auto payload = [](const std::string& bytes) {
    absl::StatusOr<SafetensorsFile> file = SafetensorsFile::FromString(bytes);
    size_t n = 0;
    if (file.ok()) {
      for (const auto& [name, view] : file->tensors()) n += view.data.size();
    }
    return n;
  };
  EXPECT_EQ(payload(bf16) * 2, payload(f32));
  ASSERT_OK_AND_ASSIGN(auto back, DeserializeAdapterSet(bf16, enc->config(), enc->fingerprint(), at::kCPU));
  EXPECT_EQ(back->dtype(), at::kFloat);
  EXPECT_LT(MaxAbsDiff(back->head_weight(), set->head_weight()), 0.01);
}

}  // namespace
}  // namespace adapterd::model
