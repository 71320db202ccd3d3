// The oneDNN CPU kernels (server/model/cpu_kernels.h) against LibTorch's
// operators: the same values, the oneDNN path really taken where the
// contract says, and the ATen fallback everywhere else (autograd, fp64,
// dropout). Then the whole encoder, oneDNN against ATen, on every path.
#include "server/model/cpu_kernels.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "common/cpu_features.h"
#include "common/testing/status_matchers.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::model::testing::MakeEncoder;
using ::adapterd::model::testing::MakeInput;
using ::adapterd::model::testing::MakeTrainedLikeSet;
using ::adapterd::model::testing::MaxAbsDiff;
using ::adapterd::model::testing::TinyConfig;
using ::testing::HasSubstr;

// Restores the process-wide backend after a test that switches it.
class BackendGuard {
 public:
  BackendGuard() : saved_(GetMatmulBackend()) {}
  ~BackendGuard() { SetMatmulBackend(saved_); }

 private:
  MatmulBackend saved_;
};

at::Tensor Reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, Epilogue e) {
  at::Tensor y = at::linear(x.to(at::kDouble), w.to(at::kDouble), b.defined() ? b.to(at::kDouble) : b);
  if (e == Epilogue::kGeluTanh) return at::gelu(y, "tanh");
  return e == Epilogue::kGelu ? at::gelu(y) : y;
}

TEST(CpuKernels, ThisBuildUsesOneDnnByDefault) {
  ASSERT_TRUE(BuiltWithOneDnn()) << "configure with -DADAPTERD_WITH_ONEDNN=ON (the default)";
  EXPECT_EQ(GetMatmulBackend(), MatmulBackend::kOneDnn);
  EXPECT_THAT(DescribeCpuKernels(), HasSubstr("frozen matrix products: oneDNN 2."));
}

TEST(CpuKernels, AvxKernelsAreRequestedOnAvx512Cpus) {
  if (!CurrentHasAvx512Core()) return;  // nothing is requested elsewhere
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  ASSERT_NE(env, nullptr) << "set by this library (on AVX-512 CPUs) or by the environment";
  if (std::string(env) == "avx512") {
    EXPECT_THAT(DescribeCpuKernels(), HasSubstr("ATen CPU kernels: avx512"));
  }
}

TEST(CpuKernels, FrozenLinearMatchesAtenInFloat32) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  const at::Tensor w = at::randn({48, 40}), b = at::randn({48});
  // 2-D, 3-D, a non-contiguous input (a transposed view), and no bias.
  const at::Tensor inputs[] = {at::randn({7, 40}), at::randn({3, 5, 40}), at::randn({40, 9}).t()};
  for (const at::Tensor& x : inputs) {
    for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kGeluTanh}) {
      ASSERT_TRUE(FrozenLinearUsesOneDnn(x, w, b));
      const at::Tensor y = FrozenLinear(x, w, b, e);
      EXPECT_EQ(y.scalar_type(), at::kFloat);
      std::vector<int64_t> want = x.sizes().vec();
      want.back() = 48;
      EXPECT_EQ(y.sizes(), at::IntArrayRef(want));
      EXPECT_LT(MaxAbsDiff(y, Reference(x, w, b, e)), 1e-4);
    }
    EXPECT_LT(MaxAbsDiff(FrozenLinear(x, w, at::Tensor()), Reference(x, w, at::Tensor(), Epilogue::kNone)), 1e-4);
    // The two GELUs differ by up to 4.7e-4 (at |y| ~ 2.7): each epilogue is
    // the form it names, not the other.
    EXPECT_GT(MaxAbsDiff(FrozenLinear(x, w, b, Epilogue::kGeluTanh), Reference(x, w, b, Epilogue::kGelu)), 1e-4);
  }
}

TEST(CpuKernels, FrozenLinearMatchesAtenInBfloat16) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  const at::Tensor x = at::randn({6, 64}).to(at::kBFloat16), w = (at::randn({32, 64}) * 0.2).to(at::kBFloat16),
                   b = at::randn({32}).to(at::kBFloat16);
  ASSERT_TRUE(FrozenLinearUsesOneDnn(x, w, b));
  for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kGeluTanh}) {
    const at::Tensor y = FrozenLinear(x, w, b, e);
    EXPECT_EQ(y.scalar_type(), at::kBFloat16);
    const at::Tensor ref = Reference(x, w, b, e);
    // bf16 output rounding: 2^-8 relative.
    EXPECT_LT(MaxAbsDiff(y, ref), 1.0 / 128 * (ref.abs().max().item<double>() + 1));
  }
}

// A bf16 product is the fp32 product of the same operands rounded once to
// bf16: bit for bit where oneDNN has no bf16 matmul (the widened path,
// CPUs without AVX-512), within one bf16 step of it where oneDNN's own bf16
// kernel accumulates in another order. Not ATen's scalar bf16 GEMM, which
// takes ~60x as long there.
TEST(CpuKernels, Bf16FrozenLinearIsTheFp32ProductRoundedOnce) {
  c10::InferenceMode guard;
  at::manual_seed(6);
  const at::Tensor x = at::randn({2, 9, 96}).to(at::kBFloat16), w = (at::randn({80, 96}) * 0.2).to(at::kBFloat16),
                   b = at::randn({80}).to(at::kBFloat16);
  EXPECT_EQ(Bf16ProductsWidened(), !CurrentHasAvx512Core()) << DescribeCpuKernels();
  if (Bf16ProductsWidened()) {
    EXPECT_THAT(DescribeCpuKernels(), HasSubstr("bf16 ones widened to fp32"));
  }
  for (Epilogue e : {Epilogue::kNone, Epilogue::kGelu, Epilogue::kGeluTanh}) {
    const at::Tensor y = FrozenLinear(x, w, b, e);
    ASSERT_EQ(y.scalar_type(), at::kBFloat16);
    const at::Tensor wide = FrozenLinear(x.to(at::kFloat), w.to(at::kFloat), b.to(at::kFloat), e);
    const at::Tensor rounded = wide.to(at::kBFloat16);
    if (Bf16ProductsWidened()) {
      EXPECT_TRUE(at::equal(y, rounded)) << "largest difference " << MaxAbsDiff(y, rounded);
    } else {
      // One bf16 step (2^-7 relative) of the larger magnitude.
      const at::Tensor step = at::maximum(y.to(at::kFloat).abs(), rounded.to(at::kFloat).abs()) / 128 + 1e-6;
      EXPECT_TRUE(((y.to(at::kFloat) - rounded.to(at::kFloat)).abs() <= step).all().item<bool>());
    }
  }
}

TEST(CpuKernels, FrozenLinearGivesTheInputGradientThroughOneDnn) {
  at::manual_seed(5);
  for (auto [t, e] : {std::pair{at::kFloat, Epilogue::kGelu}, std::pair{at::kBFloat16, Epilogue::kGelu},
                      std::pair{at::kFloat, Epilogue::kGeluTanh}}) {
    const at::Tensor w = (at::randn({8, 6}) * 0.5).to(t), b = at::randn({8}).to(t);
    const at::Tensor x0 = at::randn({2, 4, 6}).to(t);
    at::Tensor x = x0.clone().requires_grad_(true);
    ASSERT_TRUE(FrozenLinearUsesOneDnn(x, w, b));  // frozen weights: autograd on x alone is fine
    at::Tensor y = FrozenLinear(x, w, b, e);
    ASSERT_TRUE(y.requires_grad());
    const at::Tensor g = at::randn(y.sizes()).to(t);
    y.backward(g);
    at::Tensor xr = x0.to(at::kDouble).requires_grad_(true);
    at::Tensor yr =
        at::gelu(at::linear(xr, w.to(at::kDouble), b.to(at::kDouble)), e == Epilogue::kGeluTanh ? "tanh" : "none");
    yr.backward(g.to(at::kDouble));
    const double tol = t == at::kFloat ? 1e-5 : 0.05;
    EXPECT_LT(MaxAbsDiff(y, yr), tol);
    ASSERT_TRUE(x.grad().defined());
    EXPECT_EQ(x.grad().scalar_type(), t);
    EXPECT_LT(MaxAbsDiff(x.grad(), xr.grad()), tol * 4);
    EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
  }
}

TEST(CpuKernels, FrozenLinearLeavesTrainableWeightsAndOtherTypesToAten) {
  at::manual_seed(5);
  const at::Tensor w = at::randn({8, 6}), b = at::randn({8});
  at::Tensor wt = w.clone().requires_grad_(true);
  EXPECT_FALSE(FrozenLinearUsesOneDnn(at::randn({4, 6}), wt, b));  // the weight gradient is ATen's
  FrozenLinear(at::randn({4, 6}), wt, b).sum().backward();
  ASSERT_TRUE(wt.grad().defined());
  {
    at::NoGradGuard no_grad;  // nothing to record: oneDNN may take it
    EXPECT_TRUE(FrozenLinearUsesOneDnn(at::randn({4, 6}), wt, b));
  }
  const at::Tensor xd = at::randn({4, 6}, at::kDouble), wd = w.to(at::kDouble), bd = b.to(at::kDouble);
  EXPECT_FALSE(FrozenLinearUsesOneDnn(xd, wd, bd));
  EXPECT_TRUE(at::equal(FrozenLinear(xd, wd, bd), at::linear(xd, wd, bd)));
  EXPECT_FALSE(FrozenLinearUsesOneDnn(at::randn({4, 6}), wd, bd));  // mixed dtypes
  // A weight with no unit stride is not a matrix oneDNN reads in place.
  const at::Tensor wide = at::randn({w.size(0), 2 * w.size(1)});
  EXPECT_FALSE(FrozenLinearUsesOneDnn(at::randn({4, 6}), wide.slice(1, 0, 12, 2), b));
  EXPECT_FALSE(FrozenLinearUsesOneDnn(at::randn({0, 6}), w, b));
  BackendGuard restore;
  SetMatmulBackend(MatmulBackend::kATen);
  EXPECT_FALSE(FrozenLinearUsesOneDnn(at::randn({4, 6}), w, b));
  EXPECT_THAT(DescribeCpuKernels(), HasSubstr("frozen matrix products: ATen"));
}

// A resident slab's adapters are views: a transposed matrix (column-major),
// or a column range of a wider one (row-major with a longer row stride).
// oneDNN reads both in place, with at::linear's values.
TEST(CpuKernels, FrozenLinearReadsStridedWeightsInPlace) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({5, 6}), b = at::randn({4});
  const at::Tensor column_major = at::randn({6, 4}).t();                      // [4, 6], strides (1, 4)
  const at::Tensor column_range = at::randn({4, 9}).narrow(1, 2, 6);          // [4, 6], strides (9, 1)
  const at::Tensor transposed_range = at::randn({6, 7}).narrow(1, 0, 4).t();  // [4, 6], strides (1, 7)
  for (const at::Tensor& w : {column_major, column_range, transposed_range}) {
    ASSERT_FALSE(w.is_contiguous());
    EXPECT_TRUE(FrozenLinearUsesOneDnn(x, w, b)) << w.strides();
    EXPECT_LT((FrozenLinear(x, w, b) - at::linear(x, w, b)).abs().max().item<float>(), 1e-5) << w.strides();
    EXPECT_LT((FrozenLinear(x, w, b, Epilogue::kGelu) - at::gelu(at::linear(x, w, b))).abs().max().item<float>(), 1e-5);
  }
}

// HF's attention written out in fp64 from a fused [B, L, 3d] projection.
at::Tensor ReferenceAttention(const at::Tensor& qkv, const at::Tensor& mask, int64_t heads) {
  const int64_t b = qkv.size(0), l = qkv.size(1), d = qkv.size(2) / 3, dh = d / heads;
  at::Tensor p = qkv.to(at::kDouble).view({b, l, 3, heads, dh}).permute({2, 0, 3, 1, 4});
  at::Tensor scores = at::matmul(p[0], p[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(dh));
  if (mask.defined()) scores = scores + mask.to(at::kDouble).clamp_min(-1e300);
  return at::matmul(at::softmax(scores, -1), p[2]).transpose(1, 2).reshape({b, l, d});
}

TEST(CpuKernels, SelfAttentionMatchesTheReferenceWithPadding) {
  c10::InferenceMode guard;
  at::manual_seed(6);
  for (at::ScalarType t : {at::kFloat, at::kBFloat16}) {
    const int64_t batch = 3, len = 9, heads = 4, d = 32;
    const at::Tensor qkv = at::randn({batch, len, 3 * d}).to(t);
    // Row 0 full, row 1 five real tokens, row 2 one.
    at::Tensor real = at::ones({batch, len});
    real[1].narrow(0, 5, len - 5).zero_();
    real[2].narrow(0, 1, len - 1).zero_();
    const double lowest = t == at::kFloat ? std::numeric_limits<float>::lowest() : -3.3895313892515355e38;
    const at::Tensor mask = (1.0 - real).mul(lowest).view({batch, 1, 1, len}).to(t);
    const double tol = t == at::kFloat ? 1e-5 : 0.05;
    for (const at::Tensor& m : {mask, at::Tensor()}) {
      ASSERT_TRUE(SelfAttentionUsesOneDnn(qkv, m, 0.0));
      const at::Tensor ctx = SelfAttention(qkv, m, heads, 0.0);
      EXPECT_EQ(ctx.sizes(), at::IntArrayRef({batch, len, d}));
      EXPECT_EQ(ctx.scalar_type(), t);
      EXPECT_LT(MaxAbsDiff(ctx, ReferenceAttention(qkv, m, heads)), tol) << (m.defined() ? "mask" : "no mask");
    }
    // A padded row's context does not depend on what sits in its padding.
    at::Tensor noisy = qkv.clone();
    noisy[2].narrow(0, 1, len - 1).normal_();
    EXPECT_LT(MaxAbsDiff(SelfAttention(noisy, mask, heads, 0.0)[2], SelfAttention(qkv, mask, heads, 0.0)[2]), 1e-6);
  }
}

// A bf16 attention over a long context is as close to the fp64 reference
// as a few bf16 roundings allow, through either backend. LibTorch 1.13's
// own bf16 probs-times-v product rounds every partial sum to bf16 (over this
// 128-token context: 0.021 relative error, 11 roundings' worth); the ATen
// fallback, what a CPU without AVX-512 runs, must not inherit that.
TEST(CpuKernels, Bf16AttentionOverALongContextKeepsItsErrorToAFewRoundings) {
  BackendGuard restore;
  c10::InferenceMode guard;
  at::manual_seed(16);
  const int64_t batch = 2, len = 128, heads = 4, d = 256;
  const at::Tensor qkv = at::randn({batch, len, 3 * d}).to(at::kBFloat16);
  const at::Tensor reference = ReferenceAttention(qkv, at::Tensor(), heads);
  const double one_rounding = std::ldexp(1.0, -9);  // bf16's relative rounding error, 2^-9
  for (MatmulBackend backend : {MatmulBackend::kATen, MatmulBackend::kOneDnn}) {
    SetMatmulBackend(backend);
    const at::Tensor ctx = SelfAttention(qkv, at::Tensor(), heads, 0.0);
    ASSERT_EQ(ctx.scalar_type(), at::kBFloat16);
    const double relative = (ctx.to(at::kDouble) - reference).norm().item<double>() / reference.norm().item<double>();
    RecordProperty(backend == MatmulBackend::kATen ? "aten_relative_error" : "onednn_relative_error",
                   std::to_string(relative));
    EXPECT_LT(relative, 4 * one_rounding) << "backend " << static_cast<int>(backend);
  }
}

TEST(CpuKernels, SelfAttentionWithDropoutOrAutogradUsesAten) {
  at::manual_seed(7);
  const at::Tensor qkv = at::randn({2, 5, 24});
  EXPECT_FALSE(SelfAttentionUsesOneDnn(qkv, at::Tensor(), 0.1));
  EXPECT_FALSE(SelfAttentionUsesOneDnn(qkv.clone().requires_grad_(true), at::Tensor(), 0.0));
  EXPECT_FALSE(SelfAttentionUsesOneDnn(qkv, at::zeros({2, 1, 1, 4}), 0.0));  // mask of the wrong length
  at::Tensor x = qkv.clone().requires_grad_(true);
  SelfAttention(x, at::Tensor(), 2, 0.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_GT(x.grad().abs().sum().item<double>(), 0.0);
}

// The whole encoder through oneDNN against the same encoder through ATen:
// plain, one task, segments and gathered paths, fp32 and bf16.
TEST(CpuKernels, EncoderAgreesWithTheAtenBackendOnEveryPath) {
  c10::InferenceMode guard;
  auto enc = MakeEncoder(TinyConfig());
  auto set_a = MakeTrainedLikeSet(*enc, 3, 21), set_b = MakeTrainedLikeSet(*enc, 2, 22, 4);
  const std::vector<std::shared_ptr<const AdapterSet>> sets = {set_a, set_b};
  ASSERT_OK_AND_ASSIGN(auto stack, AdapterStack::Create(sets, enc->config(), at::kCPU, at::kFloat, true));
  const EncoderInput input = MakeInput({{2, 5, 6, 7, 3}, {2, 8, 3}, {2, 9, 10, 11, 12, 13, 3}});
  const std::vector<int64_t> slots = {1, 0, 1};
  auto run_all = [&]() {
    std::vector<at::Tensor> outs;
    outs.push_back(enc->Forward(input).value().last_hidden_state);
    outs.push_back(enc->Forward(input, *set_a).value().logits);
    for (MixedStrategy s : {MixedStrategy::kSegments, MixedStrategy::kGatherBmm}) {
      EncoderOutput o = enc->Forward(input, *stack, slots, {.strategy = s}).value();
      outs.push_back(o.pooled);
      outs.push_back(o.logits.masked_fill(at::isinf(o.logits), 0));
    }
    return outs;
  };
  const std::vector<at::Tensor> onednn = run_all();
  BackendGuard restore;
  SetMatmulBackend(MatmulBackend::kATen);
  const std::vector<at::Tensor> aten = run_all();
  ASSERT_EQ(onednn.size(), aten.size());
  for (size_t i = 0; i < onednn.size(); ++i) {
    EXPECT_LT(MaxAbsDiff(onednn[i], aten[i]), 1e-5) << "output " << i;
    EXPECT_GT(onednn[i].abs().sum().item<double>(), 0.0) << "output " << i;
  }
}

}  // namespace
}  // namespace adapterd::model
