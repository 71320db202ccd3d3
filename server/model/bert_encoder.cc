#include "server/model/bert_encoder.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/model/cpu_kernels.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

enum class LnSite { kEmbeddings, kAttention, kOutput };
enum class AdapterSite { kAttention, kFfn };

at::Tensor Activate(Activation act, const at::Tensor& x) {
  switch (act) {
    case Activation::kGelu:
      return at::gelu(x);
    case Activation::kRelu:
      return at::relu(x);
    case Activation::kTanh:
      return at::tanh(x);
    case Activation::kSilu:
      return at::silu(x);
    case Activation::kGeluNew:
      return at::gelu(x, "tanh");
  }
  return at::gelu(x);
}

// Houlsby adapter: x + U act(D x + b_D) + b_U.
// The GELUs run as the down product's epilogue.
at::Tensor ApplyAdapter(const BottleneckAdapter& a, Activation act, const at::Tensor& x) {
  at::Tensor h = act == Activation::kGelu      ? FrozenLinear(x, a.down_weight, a.down_bias, Epilogue::kGelu)
                 : act == Activation::kGeluNew ? FrozenLinear(x, a.down_weight, a.down_bias, Epilogue::kGeluTanh)
                                               : Activate(act, FrozenLinear(x, a.down_weight, a.down_bias));
  return FrozenLinear(h, a.up_weight, a.up_bias).add_(x);
}

// LayerNorm over the last dimension with affine `w`, `b`. When `x` is wider
// than the affine (the fp32 residual stream of a bf16/fp16 encoder), the
// normalisation runs in x's dtype and the affine promotes to it. On CUDA the
// affine is widened first (2 x d elements) so that one kernel normalises and
// applies it, where a separate addcmul would be a second pass over the whole
// stream. CPUs keep the two steps, whose rounding their tests pin.
at::Tensor AffineLayerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  if (x.scalar_type() == w.scalar_type()) return at::layer_norm(x, {x.size(-1)}, w, b, eps);
  if (x.is_cuda()) return at::layer_norm(x, {x.size(-1)}, w.to(x.scalar_type()), b.to(x.scalar_type()), eps);
  return at::addcmul(b, at::layer_norm(x, {x.size(-1)}, {}, {}, eps), w);
}

// Whether every element of integer tensor `t` lies in [0, limit), computed
// where `t` is. Run() calls it before copying its inputs to the device: on
// the serving path they are on the host, and the check does not wait for
// the device.
bool AllBelow(const at::Tensor& t, int64_t limit) {
  auto [lo, hi] = at::aminmax(t);
  return lo.item<int64_t>() >= 0 && hi.item<int64_t>() < limit;
}

// `t` in `like`'s dtype (no copy when it already is).
at::Tensor As(const at::Tensor& t, const at::Tensor& like) { return t.to(like.scalar_type()); }

const BottleneckAdapter& AdapterOf(const AdapterSet& s, AdapterSite site, int64_t layer) {
  const AdapterLayer& l = s.layers()[static_cast<size_t>(layer)];
  return site == AdapterSite::kAttention ? l.attention_adapter : l.ffn_adapter;
}

const LayerNormAffine& LnOf(const AdapterSet& s, LnSite site, int64_t layer) {
  if (site == LnSite::kEmbeddings) return s.embedding_layer_norm();
  const AdapterLayer& l = s.layers()[static_cast<size_t>(layer)];
  return site == LnSite::kAttention ? l.attention_layer_norm : l.output_layer_norm;
}

// torch.finfo(dtype).min, which HF uses for masked attention scores.
double LowestValue(c10::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kHalf:
      return -65504.0;
    case at::kBFloat16:
      return -3.3895313892515355e38;
    default:
      return std::numeric_limits<float>::lowest();
  }
}

absl::Status ExpectShape(const at::Tensor& t, const std::vector<int64_t>& want, const std::string& name) {
  if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat("encoder tensor '", name, "' is missing"));
  if (t.sizes() != at::IntArrayRef(want)) {
    return absl::InvalidArgumentError(absl::StrCat("encoder tensor '", name, "' has shape [",
                                                   absl::StrJoin(t.sizes(), ","), "], config expects [",
                                                   absl::StrJoin(want, ","), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

// Where the per-task parameters come from. One subclass per strategy; the
// encoder's layer loop is written once against this interface.
class BertEncoder::TaskOps {
 public:
  virtual ~TaskOps() = default;
  virtual at::Tensor LayerNorm(LnSite site, int64_t layer, const at::Tensor& x) const = 0;
  // May overwrite `x` (which autograd does not track) with the result: the
  // layer loop passes a sub-layer's output it does not read again.
  virtual at::Tensor Adapter(AdapterSite site, int64_t layer, const at::Tensor& x) const = 0;
  // The logits of the rows whose task's head reads the pooled vector, and
  // (TokenHead) of those whose head reads every token; each undefined when
  // no row's head reads that input (and for the plain encoder).
  virtual at::Tensor Head(const at::Tensor& pooled) const = 0;
  virtual at::Tensor TokenHead(const at::Tensor& hidden) const = 0;
};

// The encoder alone: its own LayerNorm affines, no adapters, no head.
class BertEncoder::PlainOps final : public TaskOps {
 public:
  PlainOps(const EncoderWeights& w, double eps) : w_(w), eps_(eps) {}
  at::Tensor LayerNorm(LnSite site, int64_t layer, const at::Tensor& x) const override {
    if (site == LnSite::kEmbeddings) return AffineLayerNorm(x, w_.emb_ln_weight, w_.emb_ln_bias, eps_);
    const EncoderLayerWeights& l = w_.layers[static_cast<size_t>(layer)];
    if (site == LnSite::kAttention) return AffineLayerNorm(x, l.attn_ln_weight, l.attn_ln_bias, eps_);
    return AffineLayerNorm(x, l.output_ln_weight, l.output_ln_bias, eps_);
  }
  at::Tensor Adapter(AdapterSite, int64_t, const at::Tensor& x) const override { return x; }
  at::Tensor Head(const at::Tensor&) const override { return {}; }
  at::Tensor TokenHead(const at::Tensor&) const override { return {}; }

 private:
  const EncoderWeights& w_;
  double eps_;
};

// Rows sorted by task: the adapters and the head run as one product per
// contiguous task segment, over all of the segment's tokens (a grouped
// product, without copying any task's weights). The task LayerNorms
// normalise every row at once and take each row's affine from the segments'
// affines stacked per call (T vectors of d, not T LayerNorm calls: on a
// 2-core CPU each small operator costs tens of microseconds of thread
// wake-up). With a single segment this is exactly the single-task forward.
class BertEncoder::SegmentOps final : public TaskOps {
 public:
  struct Segment {
    const AdapterSet* set;
    int64_t start, length;
  };
  SegmentOps(std::vector<Segment> segments, double eps, c10::Device device)
      : segments_(std::move(segments)), eps_(eps) {
    for (const Segment& seg : segments_) {
      const AdapterConfig& c = seg.set->config();
      int64_t& widest = ReadsTokens(c.kind) ? max_token_outputs_ : max_outputs_;
      widest = std::max(widest, c.num_outputs());
    }
    if (segments_.size() == 1) return;
    std::vector<int64_t> segment_of_row;
    for (size_t i = 0; i < segments_.size(); ++i) {
      segment_of_row.insert(segment_of_row.end(), static_cast<size_t>(segments_[i].length), static_cast<int64_t>(i));
    }
    segment_of_row_ = at::tensor(segment_of_row, at::kLong).to(device);
  }

  at::Tensor LayerNorm(LnSite site, int64_t layer, const at::Tensor& x) const override {
    if (segments_.size() == 1) {
      const LayerNormAffine& ln = LnOf(*segments_[0].set, site, layer);
      return AffineLayerNorm(x, ln.weight, ln.bias, eps_);
    }
    std::vector<at::Tensor> weights, biases;
    for (const Segment& seg : segments_) {
      const LayerNormAffine& ln = LnOf(*seg.set, site, layer);
      weights.push_back(ln.weight);
      biases.push_back(ln.bias);
    }
    at::Tensor w = at::stack(weights).index_select(0, segment_of_row_);  // [B, d]
    at::Tensor b = at::stack(biases).index_select(0, segment_of_row_);
    if (x.dim() == 3) {
      w = w.unsqueeze(1);
      b = b.unsqueeze(1);
    }
    return at::addcmul(b, at::layer_norm(x, {x.size(-1)}, {}, {}, eps_), w);
  }
  at::Tensor Adapter(AdapterSite site, int64_t layer, const at::Tensor& x) const override {
    return PerSegment(x, [&](const AdapterSet& s, const at::Tensor& xs) {
      return ApplyAdapter(AdapterOf(s, site, layer), s.config().activation, xs);
    });
  }
  at::Tensor Head(const at::Tensor& pooled) const override { return Logits(pooled, /*tokens=*/false); }
  at::Tensor TokenHead(const at::Tensor& hidden) const override { return Logits(hidden, /*tokens=*/true); }

 private:
  // Each segment's head over `x` (pooled [B, d] or hidden [B, L, d]) where
  // its kind reads that input, -inf where it does not; padded with -inf to
  // the widest such head. Undefined when no segment reads it.
  at::Tensor Logits(const at::Tensor& x, bool tokens) const {
    const int64_t width = tokens ? max_token_outputs_ : max_outputs_;
    if (width == 0) return {};
    return PerSegment(x, [&](const AdapterSet& s, const at::Tensor& xs) {
      std::vector<int64_t> shape = xs.sizes().vec();
      shape.back() = width;
      if (ReadsTokens(s.config().kind) != tokens) {
        return at::full(shape, -std::numeric_limits<double>::infinity(), xs.options());
      }
      at::Tensor logits = at::linear(xs, As(s.head_weight(), xs), As(s.head_bias(), xs));
      const int64_t pad = width - logits.size(-1);
      if (pad == 0) return logits;
      return at::constant_pad_nd(logits, {0, pad}, -std::numeric_limits<double>::infinity());
    });
  }

  template <typename Fn>
  at::Tensor PerSegment(const at::Tensor& x, Fn&& fn) const {
    if (segments_.size() == 1) return fn(*segments_[0].set, x);
    std::vector<at::Tensor> parts;
    parts.reserve(segments_.size());
    for (const Segment& seg : segments_) parts.push_back(fn(*seg.set, x.narrow(0, seg.start, seg.length)));
    return at::cat(parts, 0);
  }

  std::vector<Segment> segments_;
  // The widest head over the pooled vector, and over tokens (0: none).
  int64_t max_outputs_ = 0;
  int64_t max_token_outputs_ = 0;
  double eps_;
  at::Tensor segment_of_row_;  // [B] long: each row's index into segments_ (when > 1)
};

// Per-row weights gathered from the stack (or the slab it reads), batched
// matmuls. `adapter_index` holds each row's row of the adapter and
// LayerNorm tensors, `head_index` its row of the stacked heads.
class BertEncoder::GatherOps final : public TaskOps {
 public:
  GatherOps(const AdapterStack& stack, at::Tensor adapter_index, at::Tensor head_index, double eps)
      : stack_(stack), index_(std::move(adapter_index)), head_index_(std::move(head_index)), eps_(eps) {}

  at::Tensor LayerNorm(LnSite site, int64_t layer, const at::Tensor& x) const override {
    const at::Tensor* w;
    const at::Tensor* b;
    if (site == LnSite::kEmbeddings) {
      w = &stack_.stacked_emb_ln_weight();
      b = &stack_.stacked_emb_ln_bias();
    } else {
      const auto& l = stack_.stacked_layers()[static_cast<size_t>(layer)];
      w = site == LnSite::kAttention ? &l.attention_ln_weight : &l.output_ln_weight;
      b = site == LnSite::kAttention ? &l.attention_ln_bias : &l.output_ln_bias;
    }
    at::Tensor y = at::layer_norm(x, {x.size(-1)}, {}, {}, eps_);
    // The rows' affines in y's dtype ([B, d], small): a product of mixed
    // dtypes takes a slower kernel over the whole stream (docs/PERFORMANCE.md,
    // "GPU").
    return at::addcmul(As(Rows(*b), y).unsqueeze(1), y, As(Rows(*w), y).unsqueeze(1));
  }
  // x + U act(D x + b_D) + b_U, with b_U inside the product (the hidden
  // vector extended by [1, 0, ...] meets U's bias row) and x its
  // accumulator: overwritten in place unless autograd tracks it.
  at::Tensor Adapter(AdapterSite site, int64_t layer, const at::Tensor& x) const override {
    const auto& l = stack_.stacked_layers()[static_cast<size_t>(layer)];
    const AdapterStack::StackedAdapter& a = site == AdapterSite::kAttention ? l.attention_adapter : l.ffn_adapter;
    at::Tensor h = at::baddbmm(Rows(a.down_bias).unsqueeze(1), x, Rows(a.down_t));
    h = Activate(stack_.gather_activation(), h);
    const at::Tensor& tail = stack_.up_bias_selector();
    h = at::cat({h, tail.expand({h.size(0), h.size(1), tail.size(0)})}, -1);
    if (x.requires_grad() || !x.is_contiguous()) return at::baddbmm(x, h, Rows(a.up_t_with_bias));
    return x.baddbmm_(h, Rows(a.up_t_with_bias));
  }
  at::Tensor Head(const at::Tensor& pooled) const override {
    auto rows = [&](const at::Tensor& stacked) { return As(stacked.index_select(0, head_index_), pooled); };
    return at::baddbmm(rows(stack_.stacked_head_bias()).unsqueeze(1), pooled.unsqueeze(1),
                       rows(stack_.stacked_head_t()))
        .squeeze(1);
  }
  // A stack with gather tensors holds heads over the pooled vector only
  // (AdapterStack::Create).
  at::Tensor TokenHead(const at::Tensor&) const override { return {}; }

 private:
  at::Tensor Rows(const at::Tensor& stacked) const { return stacked.index_select(0, index_); }

  const AdapterStack& stack_;
  at::Tensor index_, head_index_;
  double eps_;
};

absl::StatusOr<std::unique_ptr<BertEncoder>> BertEncoder::Create(const BertConfig& config, EncoderWeights w,
                                                                 Options options) {
  RETURN_IF_ERROR(config.Validate());
  if (static_cast<int64_t>(w.layers.size()) != config.num_hidden_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoder has ", w.layers.size(), " layers, config says ", config.num_hidden_layers));
  }
  absl::Status shapes;
  ForEachEncoderTensor(config.num_hidden_layers, w.has_pooler(), [&](const EncoderTensorSpec& spec, int64_t layer) {
    if (shapes.ok()) shapes = ExpectShape(TensorOf(w, spec, layer), spec.Shape(config), CheckpointName(spec, layer));
  });
  RETURN_IF_ERROR(shapes);
  if (!at::isFloatingType(options.dtype)) return absl::InvalidArgumentError("encoder dtype must be floating point");
  RETURN_IF_ERROR(GuardTorch("place encoder weights", [&]() {
    auto place = [&](at::Tensor& t) {
      if (!t.defined()) return;
      t = t.detach().to(options.device, options.dtype).contiguous();
      if (options.trainable) t = t.clone();  // never train mapped checkpoint bytes
      t.requires_grad_(options.trainable);
    };
    for (at::Tensor* t : w.MutableTensors()) place(*t);
    // Where the tensors are: a device named without an index ("cuda") is
    // the current one, and adapters are compared with the encoder's device.
    options.device = w.word_embeddings.device();
  }));
  return std::unique_ptr<BertEncoder>(new BertEncoder(config, std::move(w), std::move(options)));
}

EncoderInput ToEncoderInput(const EncodedBatch& batch, c10::Device device) {
  auto tensor = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).view({batch.batch, batch.seq_len}).to(device);
  };
  return {tensor(batch.input_ids), tensor(batch.token_type_ids), tensor(batch.attention_mask)};
}

int64_t BertEncoder::NumParameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : weights_.Named()) n += t.numel();
  return n;
}

MixedStrategy BertEncoder::ChooseStrategy(int64_t batch, int64_t distinct_tasks, bool stack_can_gather,
                                          c10::Device device) {
  // On CPUs, segments (docs/PERFORMANCE.md, "Many tasks at the cost of one",
  // has the measurements). The gather path must stack every task's adapters
  // into [T, ...] tensors for each batch and then copy each row's weights
  // again; segments copy no weights, run the adapters as one product per
  // task over its tokens, and normalise all rows in one LayerNorm.
  //
  // On CUDA, gathered when it can (docs/PERFORMANCE.md, "GPU"): each
  // segment's products are separate kernel launches, a few per adapter and
  // layer for every task, and the GPU waits on them; the gathered products
  // are a handful of launches whatever the number of tasks.
  (void)batch;  // the choice does not depend on the batch size
  if (device.is_cuda() && stack_can_gather && distinct_tasks > 1) return MixedStrategy::kGatherBmm;
  return MixedStrategy::kSegments;
}

absl::StatusOr<EncoderOutput> BertEncoder::Forward(const EncoderInput& input, const ForwardOptions& options) const {
  PlainOps ops(weights_, config_.layer_norm_eps);
  return Run(input, ops, options);
}

absl::StatusOr<EncoderOutput> BertEncoder::Forward(const EncoderInput& input, const AdapterSet& task,
                                                   const ForwardOptions& options) const {
  if (task.device() != options_.device || task.products_dtype() != options_.dtype) {
    return absl::InvalidArgumentError("adapter set is not on the encoder's device and dtype");
  }
  if (static_cast<int64_t>(task.layers().size()) != config_.num_hidden_layers ||
      task.head_weight().size(1) != config_.hidden_size) {
    return absl::InvalidArgumentError("adapter set does not fit this encoder");
  }
  if (!input.input_ids.defined() || input.input_ids.dim() != 2) {
    return absl::InvalidArgumentError("input_ids must be a [batch, seq_len] tensor");
  }
  SegmentOps ops({{&task, 0, input.input_ids.size(0)}}, config_.layer_norm_eps, options_.device);
  return Run(input, ops, options);
}

absl::StatusOr<EncoderOutput> BertEncoder::Forward(const EncoderInput& input, const AdapterStack& stack,
                                                   std::span<const int64_t> row_slots,
                                                   const ForwardOptions& options) const {
  if (!input.input_ids.defined() || input.input_ids.dim() != 2) {
    return absl::InvalidArgumentError("input_ids must be a [batch, seq_len] tensor");
  }
  const int64_t batch = input.input_ids.size(0);
  if (static_cast<int64_t>(row_slots.size()) != batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("row_slots has ", row_slots.size(), " entries for a batch of ", batch));
  }
  if (stack.slot(0).device() != options_.device || stack.slot(0).dtype() != options_.dtype) {
    return absl::InvalidArgumentError("adapter stack is not on the encoder's device and dtype");
  }
  std::vector<int64_t> distinct(row_slots.begin(), row_slots.end());
  for (int64_t s : distinct) {
    if (s < 0 || s >= stack.size()) {
      return absl::InvalidArgumentError(absl::StrCat("row slot ", s, " is outside the stack of ", stack.size()));
    }
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const int64_t num_distinct = static_cast<int64_t>(distinct.size());
  int64_t max_labels = 0;
  for (int64_t s : distinct) {
    if (!ReadsTokens(stack.slot(s).config().kind))
      max_labels = std::max(max_labels, stack.slot(s).config().num_outputs());
  }

  MixedStrategy strategy = options.strategy;
  if (strategy == MixedStrategy::kAuto) {
    strategy = ChooseStrategy(batch, num_distinct, stack.has_gather_tensors(), options_.device);
  }
  if (strategy == MixedStrategy::kGatherBmm && !stack.has_gather_tensors()) {
    return absl::FailedPreconditionError(
        "gathered-bmm strategy needs a stack built with gather tensors and one activation");
  }

  if (strategy == MixedStrategy::kGatherBmm) {
    return GuardTorch("mixed-task forward", [&]() -> absl::StatusOr<EncoderOutput> {
      std::vector<int64_t> adapter_rows;
      adapter_rows.reserve(row_slots.size());
      for (int64_t s : row_slots) adapter_rows.push_back(stack.adapter_row(s));
      at::Tensor head_index =
          at::tensor(std::vector<int64_t>(row_slots.begin(), row_slots.end()), at::kLong).to(options_.device);
      at::Tensor adapter_index =
          stack.reads_slab() ? at::tensor(adapter_rows, at::kLong).to(options_.device) : head_index;
      GatherOps ops(stack, adapter_index, head_index, config_.layer_norm_eps);
      ASSIGN_OR_RETURN(EncoderOutput out, Run(input, ops, options));
      if (out.logits.size(-1) > max_labels) out.logits = out.logits.narrow(-1, 0, max_labels);
      return out;
    });
  }

  // Segments: stable-sort rows by slot, run, then restore the caller's order.
  std::vector<int64_t> order(static_cast<size_t>(batch));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return row_slots[a] < row_slots[b]; });
  std::vector<SegmentOps::Segment> segments;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t slot = row_slots[order[i]];
    if (segments.empty() || segments.back().set != &stack.slot(slot)) {
      segments.push_back({&stack.slot(slot), i, 0});
    }
    ++segments.back().length;
  }
  const bool sorted = std::is_sorted(row_slots.begin(), row_slots.end());
  std::optional<SegmentOps> ops;
  RETURN_IF_ERROR(GuardTorch("mixed-task forward",
                             [&]() { ops.emplace(std::move(segments), config_.layer_norm_eps, options_.device); }));
  if (sorted) return Run(input, *ops, options);
  return GuardTorch("mixed-task forward", [&]() -> absl::StatusOr<EncoderOutput> {
    at::Tensor perm = at::tensor(order, at::kLong);
    auto permute = [&](const at::Tensor& t) { return t.defined() ? t.index_select(0, perm.to(t.device())) : t; };
    EncoderInput sorted_input{permute(input.input_ids), permute(input.token_type_ids), permute(input.attention_mask)};
    ASSIGN_OR_RETURN(EncoderOutput out, Run(sorted_input, *ops, options));
    at::Tensor inverse = at::empty_like(perm);
    inverse.index_put_({perm}, at::arange(batch, at::kLong));
    inverse = inverse.to(options_.device);
    out.last_hidden_state = out.last_hidden_state.index_select(0, inverse);
    out.pooled = out.pooled.index_select(0, inverse);
    if (out.logits.defined()) out.logits = out.logits.index_select(0, inverse);
    if (out.token_logits.defined()) out.token_logits = out.token_logits.index_select(0, inverse);
    return out;
  });
}

absl::StatusOr<EncoderOutput> BertEncoder::Run(const EncoderInput& input, const TaskOps& ops,
                                               const ForwardOptions& options) const {
  const bool train = options.train;
  const at::Tensor& ids_in = input.input_ids;
  if (!ids_in.defined() || ids_in.dim() != 2 || !at::isIntegralType(ids_in.scalar_type(), false)) {
    return absl::InvalidArgumentError("input_ids must be an integer [batch, seq_len] tensor");
  }
  const int64_t batch = ids_in.size(0), len = ids_in.size(1);
  if (batch == 0 || len == 0) return absl::InvalidArgumentError("empty batch or empty sequences");
  if (len > config_.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence length ", len, " exceeds max_position_embeddings ", config_.max_position_embeddings));
  }
  for (const at::Tensor* t : {&input.token_type_ids, &input.attention_mask}) {
    if (t->defined() && t->sizes() != ids_in.sizes()) {
      return absl::InvalidArgumentError("token_type_ids and attention_mask must match input_ids' shape");
    }
  }
  return GuardTorch("encoder forward", [&]() -> absl::StatusOr<EncoderOutput> {
    const auto dev = options_.device;
    // Range checks before the copy (each is a device round trip otherwise).
    if (!options.inputs_checked && !AllBelow(ids_in, config_.vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat("input_ids must be in [0, ", config_.vocab_size, ")"));
    }
    if (!options.inputs_checked && input.token_type_ids.defined() &&
        !AllBelow(input.token_type_ids, config_.type_vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat("token_type_ids must be in [0, ", config_.type_vocab_size, ")"));
    }
    at::Tensor ids = ids_in.to(dev, at::kLong);
    at::Tensor types = input.token_type_ids.defined() ? input.token_type_ids.to(dev, at::kLong) : at::zeros_like(ids);
    const double p_hidden = train ? config_.hidden_dropout_prob : 0.0;
    const double p_attn = train ? config_.attention_probs_dropout_prob : 0.0;
    const EncoderWeights& w = weights_;
    const int64_t heads = config_.num_attention_heads;

    // A bf16 or fp16 encoder multiplies in its dtype, but keeps the residual
    // stream, the LayerNorms and the head in fp32 (as mixed-precision
    // inference does): summing residuals in bf16 alone lost enough to flip
    // 0.7% of held-out labels against fp32 (docs/PERFORMANCE.md), unless
    // Options::reduced_residual_stream asks for the encoder's dtype.
    const at::ScalarType stream = options_.dtype == at::kDouble      ? at::kDouble
                                  : options_.reduced_residual_stream ? options_.dtype
                                                                     : at::kFloat;
    const bool mixed = options_.dtype != stream;
    auto narrow = [&](const at::Tensor& t) { return mixed ? t.to(options_.dtype) : t; };
    at::Tensor h = at::embedding(w.word_embeddings, ids).to(stream);
    h = h + w.position_embeddings.narrow(0, 0, len).unsqueeze(0).to(stream);
    h = h + at::embedding(w.token_type_embeddings, types).to(stream);
    h = at::dropout(ops.LayerNorm(LnSite::kEmbeddings, 0, h), p_hidden, train);

    // Additive mask [B, 1, 1, L]: 0 for real tokens, the dtype's lowest value
    // for padding, as HF does (exp underflows to exactly 0).
    at::Tensor mask;
    if (input.attention_mask.defined()) {
      at::Tensor m = input.attention_mask.to(dev, options_.dtype);
      mask = (1.0 - m).mul_(LowestValue(options_.dtype)).view({batch, 1, 1, len});
    }
    for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
      const EncoderLayerWeights& l = w.layers[static_cast<size_t>(i)];
      at::Tensor ctx = SelfAttention(FrozenLinear(narrow(h), l.qkv_weight, l.qkv_bias), mask, heads, p_attn);
      at::Tensor a = at::dropout(FrozenLinear(ctx, l.attn_out_weight, l.attn_out_bias), p_hidden, train);
      a = ops.Adapter(AdapterSite::kAttention, i, a);
      at::Tensor h1 = ops.LayerNorm(LnSite::kAttention, i, a + h);
      at::Tensor f = FrozenLinear(narrow(h1), l.intermediate_weight, l.intermediate_bias, Epilogue::kGelu);
      f = at::dropout(FrozenLinear(f, l.output_weight, l.output_bias), p_hidden, train);
      f = ops.Adapter(AdapterSite::kFfn, i, f);
      h = ops.LayerNorm(LnSite::kOutput, i, f + h1);
    }
    EncoderOutput out;
    out.last_hidden_state = h;
    at::Tensor cls = h.select(1, 0);
    out.pooled = w.has_pooler() ? at::tanh(FrozenLinear(narrow(cls), w.pooler_weight, w.pooler_bias).to(stream)) : cls;
    out.logits = ops.Head(out.pooled);
    out.token_logits = ops.TokenHead(h);
    return out;
  });
}

absl::StatusOr<std::string> ComputeEncoderFingerprint(const BertConfig& config, const EncoderWeights& weights) {
  EncoderFingerprinter fp(config);
  RETURN_IF_ERROR(GuardTorch("fingerprint encoder", [&]() -> absl::Status {
    for (const auto& [name, t] : weights.Named()) {
      ASSIGN_OR_RETURN(DType dtype, FromScalarType(t.scalar_type()));
      at::Tensor c = t.detach().to(at::kCPU).contiguous();
      fp.Add(name, DTypeName(dtype), c.sizes().vec(), c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
    }
    return absl::OkStatus();
  }));
  return fp.Finish();
}

}  // namespace adapterd::model
