// Per-task parameters: Houlsby bottleneck adapters, LayerNorm affines and a
// head (Houlsby et al., ICML 2019).
//
// Per encoder layer a task owns two adapters,
//   Adapter(x) = x + U act(D x + b_D) + b_U,   D: d->m, U: m->d,
// one after the attention output projection and one after the FFN output,
// each before its residual + LayerNorm; and the gain/bias of every LayerNorm
// (embeddings, attention output, layer output). The head, one Linear(d, K),
// maps the pooled output or each token's final state to K outputs, as the
// task's kind says (server/model/heads.h).
//
// AdapterSet is the trainable, single-task form (one task's tensors, which may
// require grad). AdapterStack is the inference form: T tasks' tensors cast to
// the encoder's device and dtype, stacked for gathered batched matmuls.
//
// Thread safety: both are immutable after creation except through the
// non-const accessors of AdapterSet, which only a task's trainer uses; share
// finished sets and stacks as std::shared_ptr<const T>.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTER_SET_H_
#define ADAPTERD_SERVER_MODEL_ADAPTER_SET_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_config.h"
#include "server/model/bert_config.h"
#include "server/model/encoder_weights.h"
#include "server/model/task_kinds.h"

namespace adapterd::model {

class AdapterSlab;

// One bottleneck adapter. Shapes: down_weight [m, d], down_bias [m],
// up_weight [d, m], up_bias [d] (torch Linear layout).
struct BottleneckAdapter {
  at::Tensor down_weight, down_bias, up_weight, up_bias;
};

struct LayerNormAffine {
  at::Tensor weight, bias;  // [d]
};

struct AdapterLayer {
  BottleneckAdapter attention_adapter;
  LayerNormAffine attention_layer_norm;
  BottleneckAdapter ffn_adapter;
  LayerNormAffine output_layer_norm;
};

class AdapterSet {
 public:
  // A freshly initialised set for `encoder`: near-identity adapters
  // (truncated normal D and U, zero biases), LayerNorm affines copied from the
  // encoder's, and a head with N(0, 0.02) truncated weights and zero bias.
  // Deterministic for a given seed whatever the device. Tensors are fp32 on
  // `device` and do not require grad until SetRequiresGrad(true).
  static absl::StatusOr<std::unique_ptr<AdapterSet>> CreateInitialized(const BertConfig& encoder_config,
                                                                       const EncoderWeights& encoder,
                                                                       const AdapterConfig& config, uint64_t seed,
                                                                       c10::Device device);

  // Adopts tensors (e.g. deserialised ones). Every shape is checked against
  // the configs; INVALID_ARGUMENT names the first wrong tensor.
  static absl::StatusOr<std::unique_ptr<AdapterSet>> FromParts(const BertConfig& encoder_config, AdapterConfig config,
                                                               LayerNormAffine embedding_layer_norm,
                                                               std::vector<AdapterLayer> layers, at::Tensor head_weight,
                                                               at::Tensor head_bias);

  // The inverse of Named(): adopts `tensors` given in Named()'s order
  // (checked as FromParts checks them). INVALID_ARGUMENT when their number
  // is not Named()'s for the encoder's layer count, or a shape is wrong.
  static absl::StatusOr<std::unique_ptr<AdapterSet>> FromNamedOrder(const BertConfig& encoder_config,
                                                                    AdapterConfig config,
                                                                    std::vector<at::Tensor> tensors);

  const AdapterConfig& config() const { return config_; }
  const LayerNormAffine& embedding_layer_norm() const { return embedding_layer_norm_; }
  const std::vector<AdapterLayer>& layers() const { return layers_; }
  const at::Tensor& head_weight() const { return head_weight_; }  // [num_outputs, d]
  const at::Tensor& head_bias() const { return head_bias_; }      // [num_outputs]

  // Every tensor under its adapter-format name (docs/ADAPTER_FORMAT.md), in
  // a fixed order. The tensors are the set's own (not copies).
  std::vector<std::pair<std::string, at::Tensor>> Named() const;
  // The tensors an optimiser updates (all of Named()).
  std::vector<at::Tensor> Parameters() const;
  // Total element count of Parameters().
  int64_t NumParameters() const;
  // Parameters that AdamW decays: adapter and head weight matrices (not
  // biases, not LayerNorm affines), as in the paper's optimiser.
  std::vector<at::Tensor> DecayedParameters() const;
  std::vector<at::Tensor> UndecayedParameters() const;

  void SetRequiresGrad(bool requires_grad);
  // A deep copy on `device` with floating tensors cast to `dtype`; the copy
  // does not require grad.
  absl::StatusOr<std::unique_ptr<AdapterSet>> Clone(c10::Device device, c10::ScalarType dtype) const;

  c10::Device device() const { return head_weight_.device(); }
  c10::ScalarType dtype() const { return head_weight_.scalar_type(); }
  // The adapters' dtype: what their products run in. dtype() for every set
  // but the trainer's mixed-precision working set (adapters in bf16 beside
  // fp32 LayerNorms and head, which apply in the encoder's fp32 residual
  // stream).
  c10::ScalarType products_dtype() const {
    return layers_.empty() ? dtype() : layers_.front().attention_adapter.down_weight.scalar_type();
  }
  // Bytes held by all tensors.
  int64_t ByteSize() const;

  // A set made by AdapterSlab::Store: its adapter and LayerNorm tensors are
  // views of that slab's slot, which the set holds until it is destroyed.
  // Null and -1 for a set with tensors of its own (Clone's copy included).
  const AdapterSlab* slab() const { return slab_; }
  int64_t slab_slot() const { return slab_slot_; }

 private:
  friend class AdapterSlab;
  AdapterSet() = default;

  AdapterConfig config_;
  LayerNormAffine embedding_layer_norm_;
  std::vector<AdapterLayer> layers_;
  at::Tensor head_weight_, head_bias_;
  // Slab-backed sets only (AdapterSlab::Store): the slot's lease, which
  // returns the slot to the slab when the set is destroyed.
  std::shared_ptr<const void> slab_lease_;
  const AdapterSlab* slab_ = nullptr;
  int64_t slab_slot_ = -1;
};

// Number of parameters of one adapter: 2md + d + m.
inline int64_t AdapterParameterCount(int64_t hidden, int64_t bottleneck) {
  return 2 * bottleneck * hidden + hidden + bottleneck;
}

// Number of parameters of one task's set (AdapterSet::Named()): per layer two
// adapters and two LayerNorm affines, the embedding LayerNorm, and the head
// of `outputs` outputs (AdapterConfig::num_outputs()).
inline int64_t AdapterSetParameterCount(int64_t layers, int64_t hidden, int64_t bottleneck, int64_t outputs) {
  return layers * (2 * AdapterParameterCount(hidden, bottleneck) + 4 * hidden) + 2 * hidden + outputs * hidden +
         outputs;
}

// T tasks' parameters on one device, in one dtype, for mixed-task batches.
// Slot i holds sets[i]. Besides the per-slot sets (used by the per-task
// segment strategy), it keeps per-layer stacks for the gathered-bmm strategy:
// D^T as [T, d, m*] and its bias [T, m*]; U^T with U's bias as one more row,
// [T, k, d] with row m* the bias and rows past it zero (k = m* + 1 rounded up
// to a multiple of 8, which keeps a bf16 product's rows 16-byte aligned), so
// that a hidden vector extended by [1, 0, ...] (up_bias_selector()) meets the
// bias inside the product; LayerNorm affines [T, d]. m* is the largest
// bottleneck: smaller adapters are zero-padded, which leaves their output
// exactly unchanged because the padded rows of U^T are zero. Gathering needs
// one activation for all slots; has_gather_tensors() is false otherwise (and
// when not asked for).
//
// When every slot's set lives in one AdapterSlab (AdapterSlab::Store), the
// adapter and LayerNorm tensors are the slab's own, [capacity, ...], not a
// copy: slot i's row in them is adapter_row(i), its slab slot. Only the
// heads (a few [d, C] matrices) are stacked for the batch.
class AdapterStack {
 public:
  struct StackedAdapter {
    at::Tensor down_t, down_bias;  // [T, d, m*], [T, m*]
    at::Tensor up_t_with_bias;     // [T, k, d]: U^T, then U's bias, then zeros
  };
  struct StackedLayer {
    StackedAdapter attention_adapter, ffn_adapter;
    at::Tensor attention_ln_weight, attention_ln_bias, output_ln_weight, output_ln_bias;
  };

  // INVALID_ARGUMENT when `sets` is empty or a set does not fit the encoder.
  static absl::StatusOr<std::shared_ptr<const AdapterStack>> Create(
      std::span<const std::shared_ptr<const AdapterSet>> sets, const BertConfig& encoder_config, c10::Device device,
      c10::ScalarType dtype, bool build_gather_tensors);

  int64_t size() const { return static_cast<int64_t>(slots_.size()); }
  const AdapterSet& slot(int64_t i) const { return *slots_[static_cast<size_t>(i)]; }
  // The widest head over the pooled vector among the slots.
  int64_t max_labels() const { return max_labels_; }
  // Built when asked for, every slot has the same activation and every
  // slot's head reads the pooled vector.
  bool has_gather_tensors() const { return !layers_.empty(); }
  // Valid only when has_gather_tensors().
  Activation gather_activation() const { return activation_; }
  // The row of stacked_layers()' and the stacked LayerNorm tensors that holds
  // slot i's adapters: i, or its slab slot when reads_slab().
  int64_t adapter_row(int64_t i) const { return slab_rows_.empty() ? i : slab_rows_[static_cast<size_t>(i)]; }
  // The gather tensors are a slab's (no per-stack copy of the adapters).
  bool reads_slab() const { return !slab_rows_.empty(); }
  const std::vector<StackedLayer>& stacked_layers() const { return layers_; }
  // [k - m*]: 1 then zeros, in the stack's dtype: what a bottleneck vector is
  // extended by to meet up_t_with_bias's bias row.
  const at::Tensor& up_bias_selector() const { return up_bias_selector_; }
  const at::Tensor& stacked_emb_ln_weight() const { return emb_ln_weight_; }
  const at::Tensor& stacked_emb_ln_bias() const { return emb_ln_bias_; }
  // [T, d, max_labels] and [T, max_labels]; padded logits get -inf bias.
  const at::Tensor& stacked_head_t() const { return head_t_; }
  const at::Tensor& stacked_head_bias() const { return head_bias_; }

 private:
  AdapterStack() = default;
  // Create's first step: checks each set against the encoder and takes it
  // (a copy on `device` in `dtype` where it is elsewhere) into slots_,
  // noting the widest bottleneck (`max_m`) and pooled head. True when the
  // gather tensors can be built: one activation, every head over the
  // pooled vector.
  absl::StatusOr<bool> AdoptSlots(std::span<const std::shared_ptr<const AdapterSet>> sets,
                                  const BertConfig& encoder_config, c10::Device device, c10::ScalarType dtype,
                                  int64_t* max_m);
  // Create's second step: the slots' tensors stacked for gathered products,
  // or the slab's when every slot lives in one (then only the heads are
  // stacked here).
  absl::Status BuildGatherTensors(const BertConfig& encoder_config, c10::Device device, c10::ScalarType dtype,
                                  int64_t max_m);
  // The slab every slot lives in, or null.
  const AdapterSlab* CommonSlab() const;

  std::vector<std::shared_ptr<const AdapterSet>> slots_;
  int64_t max_labels_ = 0;
  Activation activation_ = Activation::kGelu;
  std::vector<StackedLayer> layers_;
  at::Tensor emb_ln_weight_, emb_ln_bias_, head_t_, head_bias_, up_bias_selector_;
  // Each slot's slab slot when the gather tensors are a slab's; empty otherwise.
  std::vector<int64_t> slab_rows_;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTER_SET_H_
