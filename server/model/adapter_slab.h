// AdapterSlab: many tasks' adapters resident in one preallocated set of
// per-layer, per-site tensors on the serving device, in the serving dtype
// (docs/ARCHITECTURE.md, "The resident adapter slab").
//
// A slab has `capacity` slots. Per encoder layer it holds, for every slot s,
// exactly the layout the gathered mixed-task forward reads
// (AdapterStack::StackedLayer):
//   attention / ffn adapter   down_t [S, d, m*]  D^T, zero past the task's m
//                             down_bias [S, m*]
//                             up_t_with_bias [S, k, d]  U^T (rows < m), zeros,
//                             U's bias (row m*), zeros (k = m* + 1 rounded up to 8)
//   LayerNorm affines         [S, d] for the attention and output LayerNorms
// and the embedding LayerNorm's affine [S, d]. m* is the slab's bottleneck
// width: a task whose bottleneck m <= m* fits; its rows and columns past m
// are written as zeros, which leaves its outputs exactly those of its own
// tensors (the padded hidden units meet zero rows of U^T).
//
// Store(set) copies a task's adapters into a free slot and returns an
// AdapterSet whose adapter and LayerNorm tensors are views of that slot (no
// second copy; the head, whose width varies by task, is the set's own), and
// which holds the slot's lease: the slot returns to the free list when the
// last reference to that set is gone. A batch that holds the set therefore
// always reads its own task's weights: a slot is never rewritten while any
// set that views it is alive (tests/model/adapter_slab_test.cc checks a reused
// slot against the new task's own forward).
//
// A mixed batch whose tasks all live in one slab is gathered straight from
// the slab by slot (AdapterStack::Create sees the leases): no per-batch stack
// of the tasks' weights and no per-task operator, whatever the number of
// tasks (bench/model_bench's BM_MixedSlabGather counts the operators).
//
// Memory: the tensors are allocated once, at Create, with at::empty: on a CPU
// the pages of slots never written are not resident; on CUDA the whole slab
// is device memory from the start (it is the device tier's byte budget).
//
// Errors: Create: INVALID_ARGUMENT for a capacity < 1 or a bottleneck < 1.
// Store: INVALID_ARGUMENT when the set does not fit (other layer count or
// hidden size, another device or dtype, or m > m*); RESOURCE_EXHAUSTED when
// every slot is leased (the caller serves the set's own tensors instead).
//
// Thread safety: Store and the release of leases may run concurrently with
// each other and with forwards that read other slots: each slot is written
// only while nobody else can reference it (before Store returns its set), and
// the free list is guarded by a mutex. Forwards read slots through views and
// through the tensors returned by layers() and friends, which never change
// identity.
//
// Ownership: create with Create (a std::shared_ptr: leases keep the slab's
// bookkeeping alive after its owner drops it; views keep its memory alive).
#ifndef ADAPTERD_SERVER_MODEL_ADAPTER_SLAB_H_
#define ADAPTERD_SERVER_MODEL_ADAPTER_SLAB_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"

namespace adapterd::model {

class AdapterSlab : public std::enable_shared_from_this<AdapterSlab> {
 public:
  ~AdapterSlab();
  struct Options {
    int64_t capacity = 0;     // slots (>= 1)
    int64_t bottleneck = 64;  // m*: the widest bottleneck a slot holds (>= 1)
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
  };

  static absl::StatusOr<std::shared_ptr<AdapterSlab>> Create(const BertConfig& encoder_config, Options options);

  // Bytes one slot occupies for an encoder of `config` (what a cache counts
  // per slotted task, whatever the task's own bottleneck).
  static int64_t SlotBytes(const BertConfig& config, int64_t bottleneck, c10::ScalarType dtype);

  // See the header comment. The returned set is on the slab's device and
  // dtype, never requires grad, and its slab_slot() is this slab's slot.
  absl::StatusOr<std::shared_ptr<const AdapterSet>> Store(const AdapterSet& set);

  int64_t capacity() const { return options_.capacity; }
  int64_t bottleneck() const { return options_.bottleneck; }
  int64_t slot_bytes() const { return slot_bytes_; }
  c10::Device device() const { return options_.device; }
  c10::ScalarType dtype() const { return options_.dtype; }
  // Slots leased now.
  int64_t used() const;

  // The slab's tensors, [capacity, ...] (layout in the header comment).
  const std::vector<AdapterStack::StackedLayer>& layers() const { return layers_; }
  const at::Tensor& emb_ln_weight() const { return emb_ln_weight_; }
  const at::Tensor& emb_ln_bias() const { return emb_ln_bias_; }
  // [k - m*]: 1 then zeros (AdapterStack::up_bias_selector()).
  const at::Tensor& up_bias_selector() const { return up_bias_selector_; }

 private:
  class Lease;
  // The free slots and their lock (adapter_slab.cc).
  class FreeSlots;
  AdapterSlab(Options options, int64_t slot_bytes);
  // Rows of a slot's U^T with U's bias: m*, the bias, zeros to a multiple of 8.
  static int64_t UpRows(int64_t bottleneck);

  const Options options_;
  const int64_t slot_bytes_;
  std::vector<AdapterStack::StackedLayer> layers_;
  at::Tensor emb_ln_weight_, emb_ln_bias_, up_bias_selector_;
  const std::unique_ptr<FreeSlots> free_;
};

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTER_SLAB_H_
