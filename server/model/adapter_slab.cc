#include "server/model/adapter_slab.h"

// Tensor methods only (no ATen/ATen.h, no ATen/ops/*.h): clang's
// thread-safety analysis (tools/check_thread_safety.py) reads this file and
// cannot parse those headers. Create, which needs factories, is in
// adapter_slab_create.cc.
#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

using StackedAdapter = AdapterStack::StackedAdapter;

// Copies and zero fills of a slot on the host, element loops over raw
// pointers: a slot is ~170 small tensors, and through ATen each copy costs
// an operator's dispatch and, past 32K elements, a wake-up of the intra-op
// threads (6-7 ms a BERT-base slot, against ~1 ms here: docs/PERFORMANCE.md).
template <typename T>
void CopyElements(T* dst, int64_t ds0, int64_t ds1, const T* src, int64_t ss0, int64_t ss1, int64_t rows,
                  int64_t cols) {
  constexpr int64_t kTile = 32;  // a transposed copy in tiles that stay in cache
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        T* to = dst + r * ds0;
        const T* from = src + r * ss0;
        for (int64_t c = c0; c < c1; ++c) to[c * ds1] = from[c * ss1];
      }
    }
  }
}

// The (rows, cols) and strides of a 1-D or 2-D tensor, as a matrix.
struct Matrix {
  int64_t rows, cols, s0, s1;
};
Matrix AsMatrix(const at::Tensor& t) {
  if (t.dim() == 1) return {1, t.size(0), 0, t.stride(0)};
  return {t.size(0), t.size(1), t.stride(0), t.stride(1)};
}

// dst = src: CPU tensors of one shape (1-D or 2-D) and dtype; ATen's copy_
// otherwise (another device or dtype).
void SlotCopy(const at::Tensor& dst, const at::Tensor& src) {
  if (!dst.is_cpu() || !src.is_cpu() || dst.scalar_type() != src.scalar_type() || dst.dim() > 2) {
    dst.copy_(src);
    return;
  }
  const Matrix d = AsMatrix(dst), s = AsMatrix(src);
  char* to = static_cast<char*>(dst.data_ptr());
  const char* from = static_cast<const char*>(src.data_ptr());
  const int64_t size = static_cast<int64_t>(dst.element_size());
  if (d.s1 == 1 && s.s1 == 1) {
    for (int64_t r = 0; r < d.rows; ++r) std::memcpy(to + r * d.s0 * size, from + r * s.s0 * size, d.cols * size);
    return;
  }
  switch (size) {
    case 2:
      return CopyElements(reinterpret_cast<uint16_t*>(to), d.s0, d.s1, reinterpret_cast<const uint16_t*>(from), s.s0,
                          s.s1, d.rows, d.cols);
    case 4:
      return CopyElements(reinterpret_cast<uint32_t*>(to), d.s0, d.s1, reinterpret_cast<const uint32_t*>(from), s.s0,
                          s.s1, d.rows, d.cols);
    case 8:
      return CopyElements(reinterpret_cast<uint64_t*>(to), d.s0, d.s1, reinterpret_cast<const uint64_t*>(from), s.s0,
                          s.s1, d.rows, d.cols);
    default:
      dst.copy_(src);
  }
}

// dst = 0 for a 1-D or 2-D tensor whose last dimension has unit stride on
// the host; ATen's zero_ otherwise.
void SlotZero(const at::Tensor& dst) {
  const Matrix d = dst.dim() <= 2 ? AsMatrix(dst) : Matrix{0, 0, 0, 0};
  if (!dst.is_cpu() || dst.dim() > 2 || d.s1 != 1) {
    dst.zero_();
    return;
  }
  const int64_t size = static_cast<int64_t>(dst.element_size());
  char* to = static_cast<char*>(dst.data_ptr());
  for (int64_t r = 0; r < d.rows; ++r) std::memset(to + r * d.s0 * size, 0, d.cols * size);
}

}  // namespace

class AdapterSlab::FreeSlots {
 public:
  explicit FreeSlots(int64_t capacity) {
    // A stack: slot 0 is handed out first, then the most recently freed.
    for (int64_t i = capacity - 1; i >= 0; --i) free_.push_back(i);
  }
  // A free slot, or -1 when every slot is leased.
  int64_t Take() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return -1;
    const int64_t slot = free_.back();
    free_.pop_back();
    return slot;
  }
  void Give(int64_t slot) {
    absl::MutexLock lock(&mu_);
    free_.push_back(slot);
  }
  int64_t size() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(free_.size());
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<int64_t> free_ ABSL_GUARDED_BY(mu_);
};

// A slot held by a slab-backed AdapterSet; returns it to the slab when the
// set goes.
class AdapterSlab::Lease {
 public:
  Lease(std::shared_ptr<AdapterSlab> slab, int64_t slot) : slab_(std::move(slab)), slot_(slot) {}
  ~Lease() { slab_->free_->Give(slot_); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  std::shared_ptr<AdapterSlab> slab_;
  int64_t slot_;
};

AdapterSlab::AdapterSlab(Options options, int64_t slot_bytes)
    : options_(options), slot_bytes_(slot_bytes), free_(std::make_unique<FreeSlots>(options.capacity)) {}

AdapterSlab::~AdapterSlab() = default;

int64_t AdapterSlab::UpRows(int64_t bottleneck) { return (bottleneck + 1 + 7) / 8 * 8; }

int64_t AdapterSlab::SlotBytes(const BertConfig& config, int64_t bottleneck, c10::ScalarType dtype) {
  const int64_t d = config.hidden_size, m = bottleneck;
  const int64_t adapter = d * m + m + UpRows(m) * d;
  const int64_t per_layer = 2 * adapter + 4 * d;
  return (config.num_hidden_layers * per_layer + 2 * d) * static_cast<int64_t>(c10::elementSize(dtype));
}

int64_t AdapterSlab::used() const { return options_.capacity - free_->size(); }

absl::StatusOr<std::shared_ptr<const AdapterSet>> AdapterSlab::Store(const AdapterSet& set) {
  const int64_t m = set.config().bottleneck_size;
  if (set.device() != options_.device || set.dtype() != options_.dtype) {
    return absl::InvalidArgumentError("adapter set is not on the slab's device and dtype");
  }
  if (set.layers().size() != layers_.size() || set.head_weight().size(1) != emb_ln_weight_.size(1)) {
    return absl::InvalidArgumentError("adapter set does not fit the slab's encoder");
  }
  if (m > options_.bottleneck) {
    return absl::InvalidArgumentError(
        absl::StrCat("bottleneck ", m, " is wider than the slab's ", options_.bottleneck));
  }
  const int64_t slot = free_->Take();
  if (slot < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("all ", options_.capacity, " adapter slab slots are in use"));
  }
  // From here the slot is ours alone: the lease gives it back on any exit.
  auto lease = std::make_shared<const Lease>(shared_from_this(), slot);
  auto stored = std::unique_ptr<AdapterSet>(new AdapterSet());
  RETURN_IF_ERROR(GuardTorch("store adapter set in slab", [&]() {
    c10::InferenceMode inference_mode;
    // Writes the slot's part of one slab adapter from `a` (zeros past the
    // task's bottleneck: a reused slot keeps nothing of its last task) and
    // returns the views of it, in AdapterSet's shapes, that the set keeps.
    auto write_adapter = [&](const StackedAdapter& slab_adapter, const BottleneckAdapter& a) {
      const int64_t wide = options_.bottleneck;
      at::Tensor down_t = slab_adapter.down_t[slot];        // [d, m*]
      at::Tensor down_bias = slab_adapter.down_bias[slot];  // [m*]
      at::Tensor up_t = slab_adapter.up_t_with_bias[slot];  // [k, d]
      SlotCopy(down_t.narrow(1, 0, m), a.down_weight.t());
      SlotCopy(down_bias.narrow(0, 0, m), a.down_bias);
      SlotCopy(up_t.narrow(0, 0, m), a.up_weight.t());
      // U's bias is row m* whatever the task's m: the gathered product meets
      // it there (AdapterStack's layout). Rows past it are zero.
      at::Tensor up_bias = up_t[wide];
      SlotCopy(up_bias, a.up_bias);
      SlotZero(up_t.narrow(0, wide + 1, up_t.size(0) - wide - 1));
      if (m < wide) {  // the units past the task's bottleneck
        SlotZero(down_t.narrow(1, m, wide - m));
        SlotZero(down_bias.narrow(0, m, wide - m));
        SlotZero(up_t.narrow(0, m, wide - m));
      }
      return BottleneckAdapter{down_t.narrow(1, 0, m).t(), down_bias.narrow(0, 0, m), up_t.narrow(0, 0, m).t(),
                               up_bias};
    };
    auto write_ln = [&](const at::Tensor& weights, const at::Tensor& biases, const LayerNormAffine& ln) {
      at::Tensor w = weights[slot], b = biases[slot];
      SlotCopy(w, ln.weight);
      SlotCopy(b, ln.bias);
      return LayerNormAffine{w, b};
    };
    stored->config_ = set.config();
    stored->embedding_layer_norm_ = write_ln(emb_ln_weight_, emb_ln_bias_, set.embedding_layer_norm());
    for (size_t l = 0; l < layers_.size(); ++l) {
      const AdapterStack::StackedLayer& sl = layers_[l];
      const AdapterLayer& from = set.layers()[l];
      stored->layers_.push_back({write_adapter(sl.attention_adapter, from.attention_adapter),
                                 write_ln(sl.attention_ln_weight, sl.attention_ln_bias, from.attention_layer_norm),
                                 write_adapter(sl.ffn_adapter, from.ffn_adapter),
                                 write_ln(sl.output_ln_weight, sl.output_ln_bias, from.output_layer_norm)});
    }
    stored->head_weight_ = set.head_weight().detach().clone();
    stored->head_bias_ = set.head_bias().detach().clone();
  }));
  stored->slab_lease_ = std::move(lease);
  stored->slab_ = this;
  stored->slab_slot_ = slot;
  return std::shared_ptr<const AdapterSet>(std::move(stored));
}

}  // namespace adapterd::model
