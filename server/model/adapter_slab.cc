#include "server/model/adapter_slab.h"

// Tensor methods only (no ATen/ATen.h, no ATen/ops/*.h): clang's
// thread-safety analysis (tools/check_thread_safety.py) reads this file and
// cannot parse those headers. Create, which needs factories, is in
// adapter_slab_create.cc.
#include <ATen/core/Tensor.h>
#include <c10/core/InferenceMode.h>

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

using StackedAdapter = AdapterStack::StackedAdapter;

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
      at::Tensor down_t = slab_adapter.down_t[slot];        // [d, m*]
      at::Tensor down_bias = slab_adapter.down_bias[slot];  // [m*]
      at::Tensor up_t = slab_adapter.up_t_with_bias[slot];  // [k, d]
      down_t.zero_();
      down_bias.zero_();
      up_t.zero_();
      down_t.narrow(1, 0, m).copy_(a.down_weight.t());
      down_bias.narrow(0, 0, m).copy_(a.down_bias);
      up_t.narrow(0, 0, m).copy_(a.up_weight.t());
      // U's bias is row m* whatever the task's m: the gathered product meets
      // it there (AdapterStack's layout).
      at::Tensor up_bias = up_t[options_.bottleneck];
      up_bias.copy_(a.up_bias);
      return BottleneckAdapter{down_t.narrow(1, 0, m).t(), down_bias.narrow(0, 0, m), up_t.narrow(0, 0, m).t(),
                               up_bias};
    };
    auto write_ln = [&](const at::Tensor& weights, const at::Tensor& biases, const LayerNormAffine& ln) {
      at::Tensor w = weights[slot], b = biases[slot];
      w.copy_(ln.weight);
      b.copy_(ln.bias);
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
