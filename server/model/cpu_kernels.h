// The CPU kernels the encoder's frozen matrix products and elementwise work
// run on (docs/PERFORMANCE.md, "CPU kernels").
//
// FrozenLinear(x, w, b, epilogue) computes epilogue(at::linear(x, w, b)) for
// the encoder's frozen weights:
//   - on CPU, for float32 and bfloat16 with x, w and b in one dtype and w, b
//     frozen (not requiring grad), through a oneDNN matmul primitive reading
//     LibTorch's [N, K] weight in place through its strides (no packed copy,
//     no extra memory): row-major, or a transposed or column-range view of a
//     wider matrix (a resident slab slot's adapters, adapter_slab.h),
//     with the epilogue fused as a post-op; oneDNN's primitive cache makes a
//     repeated shape a lookup. When autograd tracks x
//     (adapter training: the adapters below make every layer's input require
//     grad), the backward is the input gradient g w, also through oneDNN, and
//     the epilogue runs in ATen so autograd sees it;
//   - otherwise (CUDA, float16, float64, weights that require grad, a build
//     without oneDNN, or the kATen backend) through at::linear and the ATen
//     epilogue.
// Both paths give the same values up to floating-point reassociation:
// tests/model/cpu_kernels_test.cc bounds the difference.
//
// bf16 on CPUs where oneDNN has no bf16 matmul (no AVX-512: oneDNN 2.6
// needs avx512_core for bf16): FrozenLinear widens the operands to fp32,
// runs oneDNN's fp32 product with the epilogue, and rounds the output to
// bf16 once, which is what oneDNN's bf16 product computes (fp32
// accumulation, bias and epilogue, one rounding). The alternative,
// at::linear in bf16, is LibTorch 1.13's scalar bf16 GEMM there, which is
// many times slower than fp32 (docs/PERFORMANCE.md, "bf16 without
// AVX-512"). The weights stay
// bf16 in memory; each product converts its weight, which costs memory
// traffic of one pass over the weight.
//
// Why: Debian's LibTorch 1.13 sends fp32 at::linear to OpenBLAS, which is
// slower than oneDNN's brgemm kernels on the same weights; and the exact-erf
// GELU after the FFN's first product is a separate pass over the
// activations that the post-op removes (docs/PERFORMANCE.md has the
// figures).
//
// ATen kernels: LibTorch picks its vector kernels (ATEN_CPU_CAPABILITY) on
// its first operator call, and Debian's 1.13 picks AVX2 even on CPUs with
// AVX-512. Linking this library requests "avx512" before that, on CPUs with
// AVX-512 F/BW/DQ/VL, unless the environment already sets
// ATEN_CPU_CAPABILITY: the batched attention products and the softmax run
// faster in the AVX-512 kernels (docs/PERFORMANCE.md).
//
// Thread safety: every function may be called from any thread; the backend
// switch is meant for benchmarks and tests, set before serving starts.
#ifndef ADAPTERD_SERVER_MODEL_CPU_KERNELS_H_
#define ADAPTERD_SERVER_MODEL_CPU_KERNELS_H_

#include <ATen/core/Tensor.h>

#include <string>

namespace adapterd::model {

// What FrozenLinear applies to the product (bias included).
enum class Epilogue {
  kNone,
  kGelu,      // exact (erf) GELU, as at::gelu's default
  kGeluTanh,  // GELU's tanh approximation, at::gelu(y, "tanh") ("gelu_new")
};

// Which library FrozenLinear uses when both could.
enum class MatmulBackend {
  kOneDnn,  // the default when the build has oneDNN
  kATen,    // at::linear (OpenBLAS for fp32 with Debian's LibTorch)
};

// epilogue(x w^T + b): x [..., K], w [N, K], b [N] (or undefined) -> [..., N]
// in x's dtype. Throws what at::linear throws for mismatched inputs (callers
// run under GuardTorch).
at::Tensor FrozenLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                        Epilogue epilogue = Epilogue::kNone);

// True when FrozenLinear(x, w, b, ...) would run through oneDNN.
bool FrozenLinearUsesOneDnn(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// Multi-head self-attention over a fused projection (HF BertSelfAttention):
//   qkv  [B, L, 3d] = [q | k | v], head h of each at columns [h*dh, (h+1)*dh)
//   mask [B, 1, 1, L] additive (0, or the dtype's lowest for padding), in
//        qkv's dtype, or undefined (no padding)
//   ctx  [B, L, d] = concat over h of softmax(q_h k_h^T / sqrt(dh) + mask) v_h
// With dropout_p > 0 the probabilities go through dropout (training). On CPU
// in float32/bfloat16 without dropout or autograd this is three oneDNN
// primitives reading q, k and v in place from qkv (scale and mask fused into
// the first product, softmax in place, the second product written straight
// into ctx's [B, L, d] layout); otherwise the same math in ATen operators,
// which on CPU compute a bfloat16/float16 attention in float32 and round the
// output once (LibTorch 1.13's own bf16 probs-v product rounds each partial
// sum). Either way the output has qkv's dtype.
at::Tensor SelfAttention(const at::Tensor& qkv, const at::Tensor& mask, int64_t heads, double dropout_p);

// True when SelfAttention(qkv, mask, heads, dropout_p) would run through oneDNN.
bool SelfAttentionUsesOneDnn(const at::Tensor& qkv, const at::Tensor& mask, double dropout_p);

// Process-wide; default kOneDnn when built with oneDNN, else kATen.
void SetMatmulBackend(MatmulBackend backend);
MatmulBackend GetMatmulBackend();
// True when this build links oneDNN (ADAPTERD_WITH_ONEDNN).
bool BuiltWithOneDnn();

// True when oneDNN is built in but has no bf16 matmul on this CPU, so that
// FrozenLinear computes bf16 products widened to fp32 (above). Probed once.
bool Bf16ProductsWidened();

// With the kOneDnn backend, sets OpenBLAS to one thread (SetBlasThreads):
// it then computes only ATen's leftovers and its pool cannot fight OpenMP's
// workers (docs/PERFORMANCE.md, "Wait policy"). Returns whether it did.
// Process-global: call at start-up, after SetComputeThreads.
bool OneBlasThreadUnderOneDnn();

// One line for the startup log, e.g. "ATen CPU kernels: avx512 (requested:
// the CPU has AVX-512); frozen matrix products: oneDNN 2.6.3".
std::string DescribeCpuKernels();

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_CPU_KERNELS_H_
