#include "server/model/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <ATen/core/grad_mode.h>  // at::GradMode: no longer through ATen.h in LibTorch 2.x
#include <torch/version.h>

#include <optional>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_features.h"
#include "server/model/tensor_io.h"

#if ADAPTERD_WITH_ONEDNN
#include <torch/csrc/autograd/custom_function.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace adapterd::model {
namespace {

// What happened to ATEN_CPU_CAPABILITY when this library was loaded.
enum class CapabilityRequest { kLeftToEnvironment, kRequestedAvx512, kNoAvx512 };

// Runs during static initialisation, before any LibTorch operator has run
// (ATen computes its capability once, lazily, on the first dispatch).
CapabilityRequest RequestAvx512AtenKernels() {
  if (std::getenv("ATEN_CPU_CAPABILITY") != nullptr) return CapabilityRequest::kLeftToEnvironment;
#if defined(__x86_64__)
  if (CurrentHasAvx512Core()) {
    ::setenv("ATEN_CPU_CAPABILITY", "avx512", /*overwrite=*/0);
    return CapabilityRequest::kRequestedAvx512;
  }
#endif
  return CapabilityRequest::kNoAvx512;
}

const CapabilityRequest kCapabilityRequest = RequestAvx512AtenKernels();

std::atomic<MatmulBackend> g_backend{ADAPTERD_WITH_ONEDNN ? MatmulBackend::kOneDnn : MatmulBackend::kATen};

// The epilogue in ATen (what autograd records, and the fallback path).
at::Tensor AtenEpilogue(const at::Tensor& y, Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::kGelu:
      return at::gelu(y);
    case Epilogue::kGeluTanh:
      return at::gelu(y, "tanh");
    case Epilogue::kNone:
      break;
  }
  return y;
}

at::Tensor AtenLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, Epilogue epilogue) {
  return AtenEpilogue(at::linear(x, w, b), epilogue);
}

// LibTorch 1.13's CPU product of reduced-precision matrices whose right
// operand is not transposed (probs v) adds every partial sum into the bf16
// output, rounding each time, several times the error of one rounding
// (docs/PERFORMANCE.md, "bf16 without AVX-512"). Where oneDNN has
// no bf16 (CPUs without AVX-512), the attention of a bf16 or fp16 encoder
// therefore runs in fp32 on its bf16 inputs and rounds its output once, as
// oneDNN's products do. CUDA's kernels accumulate in fp32 already.
bool WidenAttention(const at::Tensor& qkv) {
  return !qkv.is_cuda() && (qkv.scalar_type() == at::kBFloat16 || qkv.scalar_type() == at::kHalf);
}

at::Tensor AtenSelfAttention(const at::Tensor& qkv_in, const at::Tensor& mask_in, int64_t heads, double dropout_p) {
  const bool widen = WidenAttention(qkv_in);
  const at::Tensor qkv = widen ? qkv_in.to(at::kFloat) : qkv_in;
  const at::Tensor mask = widen && mask_in.defined() ? mask_in.to(at::kFloat) : mask_in;
  const int64_t batch = qkv.size(0), len = qkv.size(1), d = qkv.size(2) / 3, dh = d / heads;
  at::Tensor parts = qkv.view({batch, len, 3, heads, dh}).permute({2, 0, 3, 1, 4});
  at::Tensor q = parts[0], k = parts[1], v = parts[2];
#if TORCH_VERSION_MAJOR >= 2
  // An undefined tensor in the optional mask is refused ("attn_mask.dtype:
  // nullptr"): no mask is nullopt.
  const std::optional<at::Tensor> attn_mask = mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  at::Tensor ctx = at::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, false);
#else
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)).div_(std::sqrt(static_cast<double>(dh)));
  if (mask.defined()) scores.add_(mask);
  at::Tensor probs = at::dropout(at::softmax(scores, -1), dropout_p, dropout_p > 0);
  at::Tensor ctx = at::matmul(probs, v);
#endif
  at::Tensor out = ctx.transpose(1, 2).reshape({batch, len, d});
  return widen ? out.to(qkv_in.scalar_type()) : out;
}

#if ADAPTERD_WITH_ONEDNN
const dnnl::engine& Engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One in-order CPU stream per calling thread.
dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

// How OneDnnProduct reads LibTorch's [N, K] weight.
enum class WeightUse {
  kTransposed,  // x w^T: the forward product, [.., K] -> [.., N]
  kAsIs,        // g w:   the input gradient, [.., N] -> [.., K]
};

// The product through oneDNN, or an undefined tensor when oneDNN has no
// implementation for these types on this CPU (the caller falls back). A
// bf16 product where oneDNN has no bf16 matmul runs widened (see
// Bf16ProductsWidened in the header).
at::Tensor OneDnnProduct(const at::Tensor& x_in, const at::Tensor& w, const at::Tensor& b, Epilogue epilogue,
                         WeightUse use) {
  using dnnl::memory;
  if (x_in.scalar_type() == at::kBFloat16 && Bf16ProductsWidened()) {
    at::Tensor y =
        OneDnnProduct(x_in.to(at::kFloat), w.to(at::kFloat), b.defined() ? b.to(at::kFloat) : b, epilogue, use);
    return y.defined() ? y.to(at::kBFloat16) : y;
  }
  const at::Tensor x = x_in.contiguous();
  const bool transposed = use == WeightUse::kTransposed;
  const int64_t k = transposed ? w.size(1) : w.size(0), n = transposed ? w.size(0) : w.size(1);
  const int64_t m = x.numel() / k;
  const memory::data_type dt = x.scalar_type() == at::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  // The weight [N, K], read in place through its strides (a plain matrix,
  // PlainMatrix): as the [K, N] right-hand matrix of the forward, or as the
  // [N, K] one of the input gradient.
  const memory::dims wei_strides =
      transposed ? memory::dims{w.stride(1), w.stride(0)} : memory::dims{w.stride(0), w.stride(1)};
  const memory::desc src_md({m, k}, dt, memory::format_tag::ab);
  const memory::desc wei_md({k, n}, dt, wei_strides);
  const memory::desc dst_md({m, n}, dt, memory::format_tag::ab);
  const memory::desc bias_md = b.defined() ? memory::desc({1, n}, dt, memory::format_tag::ab) : memory::desc();
  dnnl::post_ops post_ops;
  if (epilogue == Epilogue::kGelu) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  if (epilogue == Epilogue::kGeluTanh) post_ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md), attr, Engine());
  } catch (const dnnl::error&) {
    return {};  // e.g. bf16 on a CPU without AVX-512
  }
  std::vector<int64_t> out_sizes = x.sizes().vec();
  out_sizes.back() = n;
  at::Tensor y = at::empty(out_sizes, x.options());
  // oneDNN reads the weights and bias in place and never writes them.
  memory src(src_md, Engine(), x.data_ptr());
  memory wei(wei_md, Engine(), w.data_ptr());
  memory dst(dst_md, Engine(), y.data_ptr());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, memory(bias_md, Engine(), b.data_ptr()));
  dnnl::matmul(pd).execute(Stream(), args);
  Stream().wait();
  return y;
}

// x w^T + b for an x autograd tracks and a frozen w, b: both directions
// through oneDNN. Frozen weights need no weight gradient, so the backward is
// the one product g w.
class FrozenLinearFunction : public torch::autograd::Function<FrozenLinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w,
                            const at::Tensor& b) {
    ctx->saved_data["w"] = w;
    at::Tensor y = OneDnnProduct(x, w, b, Epilogue::kNone, WeightUse::kTransposed);
    return y.defined() ? y : at::linear(x, w, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor w = ctx->saved_data["w"].toTensor();
    at::Tensor gx = OneDnnProduct(grads[0], w, at::Tensor(), Epilogue::kNone, WeightUse::kAsIs);
    if (!gx.defined()) gx = at::matmul(grads[0], w);
    return {gx, at::Tensor(), at::Tensor()};
  }
};

// softmax(q k^T * scale + mask) v with q, k, v read in place (strided) from
// qkv, or an undefined tensor when oneDNN has no implementation here.
at::Tensor OneDnnSelfAttention(const at::Tensor& qkv_in, const at::Tensor& mask, int64_t heads) {
  using dnnl::memory;
  const at::Tensor qkv = qkv_in.contiguous();
  const int64_t b = qkv.size(0), l = qkv.size(1), d = qkv.size(2) / 3, dh = d / heads;
  const memory::data_type dt = qkv.scalar_type() == at::kBFloat16 ? memory::data_type::bf16 : memory::data_type::f32;
  // Element (b, h, i, e) of q is qkv[b, i, h*dh + e]; k and v follow at +d, +2d.
  const memory::dims head_strides{l * 3 * d, dh, 3 * d, 1};
  const memory::desc q_md({b, heads, l, dh}, dt, head_strides);
  const memory::desc kt_md({b, heads, dh, l}, dt, {l * 3 * d, dh, 1, 3 * d});  // k transposed
  const memory::desc v_md({b, heads, l, dh}, dt, head_strides);
  const memory::desc scores_md({b, heads, l, l}, dt, memory::format_tag::abcd);
  // ctx (b, h, i, e) lands at [b, i, h*dh + e]: the [B, L, d] layout.
  const memory::desc ctx_md({b, heads, l, dh}, dt, {l * d, dh, d, 1});
  const memory::desc mask_md({b, 1, 1, l}, dt, memory::format_tag::abcd);

  dnnl::primitive_attr scores_attr;
  scores_attr.set_output_scales(0, {static_cast<float>(1.0 / std::sqrt(static_cast<double>(dh)))});
  if (mask.defined()) {
    dnnl::post_ops post_ops;
    post_ops.append_binary(dnnl::algorithm::binary_add, mask_md);
    scores_attr.set_post_ops(post_ops);
  }
  dnnl::matmul::primitive_desc scores_pd;
  dnnl::softmax_forward::primitive_desc softmax_pd;
  dnnl::matmul::primitive_desc ctx_pd;
  try {
    scores_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_md, kt_md, scores_md), scores_attr, Engine());
    softmax_pd = dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, scores_md, 3), Engine());
    ctx_pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(scores_md, v_md, ctx_md), Engine());
  } catch (const dnnl::error&) {
    return {};
  }
  at::Tensor scores = at::empty({b, heads, l, l}, qkv.options());
  at::Tensor ctx = at::empty({b, l, d}, qkv.options());
  char* base = static_cast<char*>(qkv.data_ptr());
  const int64_t step = d * static_cast<int64_t>(qkv.element_size());
  memory q(q_md, Engine(), base), kt(kt_md, Engine(), base + step), v(v_md, Engine(), base + 2 * step);
  memory scores_mem(scores_md, Engine(), scores.data_ptr()), ctx_mem(ctx_md, Engine(), ctx.data_ptr());
  std::unordered_map<int, memory> scores_args{{DNNL_ARG_SRC, q}, {DNNL_ARG_WEIGHTS, kt}, {DNNL_ARG_DST, scores_mem}};
  at::Tensor mask_c;
  if (mask.defined()) {
    mask_c = mask.contiguous();
    scores_args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                        memory(mask_md, Engine(), mask_c.data_ptr()));
  }
  dnnl::matmul(scores_pd).execute(Stream(), scores_args);
  dnnl::softmax_forward(softmax_pd).execute(Stream(), {{DNNL_ARG_SRC, scores_mem}, {DNNL_ARG_DST, scores_mem}});
  dnnl::matmul(ctx_pd).execute(Stream(), {{DNNL_ARG_SRC, scores_mem}, {DNNL_ARG_WEIGHTS, v}, {DNNL_ARG_DST, ctx_mem}});
  Stream().wait();
  return ctx;
}
#endif

// The oneDNN paths take: the kOneDnn backend; defined, strided, CPU tensors
// of `first`'s dtype, float32 or bfloat16 (undefined optional ones pass);
// nothing autograd must record, except in `first` when `first_may_need_grad`.
bool OneDnnCanTake(std::initializer_list<const at::Tensor*> tensors, bool first_may_need_grad = false) {
  if (!BuiltWithOneDnn() || g_backend.load(std::memory_order_relaxed) != MatmulBackend::kOneDnn) return false;
  const at::Tensor& first = **tensors.begin();
  if (!first.defined()) return false;
  const at::ScalarType t = first.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16) return false;
  bool grad_needed = false;
  for (const at::Tensor* v : tensors) {
    if (!v->defined()) continue;
    if (!v->device().is_cpu() || v->layout() != at::kStrided || v->is_quantized() || v->scalar_type() != t) {
      return false;
    }
    grad_needed = grad_needed || (v->requires_grad() && !(first_may_need_grad && v == &first));
  }
  return !(grad_needed && at::GradMode::is_enabled());
}

// A 2-D tensor oneDNN can read in place as a matrix: one dimension of unit
// stride, the other's stride at least the first's size (row-major, or a
// transposed view of one, possibly a column range of a wider matrix: a slab
// slot's adapters, AdapterSlab). Size-1 dimensions carry the stride a dense
// layout would give them, so that oneDNN sees plain strides.
bool PlainMatrix(const at::Tensor& w) {
  if (w.dim() != 2 || w.size(0) < 2 || w.size(1) < 2) return w.dim() == 2 && w.is_contiguous();
  const bool row_major = w.stride(1) == 1 && w.stride(0) >= w.size(1);
  const bool column_major = w.stride(0) == 1 && w.stride(1) >= w.size(0);
  return row_major || column_major;
}

}  // namespace

bool FrozenLinearUsesOneDnn(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  if (!w.defined() || !OneDnnCanTake({&x, &w, &b}, /*first_may_need_grad=*/true)) return false;
  if (!PlainMatrix(w)) return false;
  if (x.dim() < 1 || x.size(-1) != w.size(1) || x.numel() == 0) return false;
  return !b.defined() || (b.dim() == 1 && b.size(0) == w.size(0) && b.is_contiguous());
}

bool SelfAttentionUsesOneDnn(const at::Tensor& qkv, const at::Tensor& mask, double dropout_p) {
  if (dropout_p > 0 || !OneDnnCanTake({&qkv, &mask})) return false;
  if (qkv.dim() != 3 || qkv.numel() == 0 || qkv.size(2) % 3 != 0) return false;
  return !mask.defined() || mask.sizes() == at::IntArrayRef({qkv.size(0), 1, 1, qkv.size(1)});
}

at::Tensor SelfAttention(const at::Tensor& qkv, const at::Tensor& mask, int64_t heads, double dropout_p) {
#if ADAPTERD_WITH_ONEDNN
  if (SelfAttentionUsesOneDnn(qkv, mask, dropout_p) && qkv.size(2) % (3 * heads) == 0) {
    at::Tensor ctx = OneDnnSelfAttention(qkv, mask, heads);
    if (ctx.defined()) return ctx;
  }
#endif
  return AtenSelfAttention(qkv, mask, heads, dropout_p);
}

at::Tensor FrozenLinear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, Epilogue epilogue) {
#if ADAPTERD_WITH_ONEDNN
  if (FrozenLinearUsesOneDnn(x, w, b)) {
    if (x.requires_grad() && at::GradMode::is_enabled()) {
      return AtenEpilogue(FrozenLinearFunction::apply(x, w, b), epilogue);
    }
    at::Tensor y = OneDnnProduct(x, w, b, epilogue, WeightUse::kTransposed);
    if (y.defined()) return y;
  }
#endif
  return AtenLinear(x, w, b, epilogue);
}

void SetMatmulBackend(MatmulBackend backend) {
  g_backend.store(BuiltWithOneDnn() ? backend : MatmulBackend::kATen, std::memory_order_relaxed);
}

MatmulBackend GetMatmulBackend() { return g_backend.load(std::memory_order_relaxed); }

bool BuiltWithOneDnn() { return ADAPTERD_WITH_ONEDNN != 0; }

bool Bf16ProductsWidened() {
#if ADAPTERD_WITH_ONEDNN
  // Asked once: can oneDNN build a bf16 matmul on this CPU?
  static const bool widened = [] {
    using dnnl::memory;
    const memory::desc md({16, 16}, memory::data_type::bf16, memory::format_tag::ab);
    try {
      [[maybe_unused]] const dnnl::matmul::primitive_desc probe(dnnl::matmul::desc(md, md, md), Engine());
      return false;
    } catch (const dnnl::error&) {
      return true;
    }
  }();
  return widened;
#else
  return false;
#endif
}

bool OneBlasThreadUnderOneDnn() {
  if (GetMatmulBackend() != MatmulBackend::kOneDnn) return false;
  SetBlasThreads(1);
  return true;
}

std::string DescribeCpuKernels() {
  // at::native::get_cpu_capability() is not exported; show_config() reports
  // it as "CPU capability usage: AVX512".
  std::string aten = "unknown";
  const std::string config = at::show_config();
  constexpr std::string_view kKey = "CPU capability usage: ";
  if (const size_t at = config.find(kKey); at != std::string::npos) {
    const size_t begin = at + kKey.size();
    aten = absl::AsciiStrToLower(config.substr(begin, config.find('\n', begin) - begin));
  }
  const char* why = "";
  switch (kCapabilityRequest) {
    case CapabilityRequest::kLeftToEnvironment:
      why = " (ATEN_CPU_CAPABILITY from the environment)";
      break;
    case CapabilityRequest::kRequestedAvx512:
      why = " (requested: the CPU has AVX-512)";
      break;
    case CapabilityRequest::kNoAvx512:
      why = " (LibTorch's choice: no AVX-512 here)";
      break;
  }
  std::string matmul = "ATen (at::linear)";
#if ADAPTERD_WITH_ONEDNN
  if (GetMatmulBackend() == MatmulBackend::kOneDnn) {
    const dnnl_version_t* v = dnnl_version();
    matmul = absl::StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch,
                          Bf16ProductsWidened() ? " (bf16 ones widened to fp32: no bf16 matmul on this CPU)" : "");
  }
#endif
  return absl::StrCat("ATen CPU kernels: ", aten, why, "; frozen matrix products: ", matmul);
}

}  // namespace adapterd::model
