// AdapterSlab::Create: the slab's allocation, apart from adapter_slab.cc so
// that the file clang's thread-safety analysis reads includes no tensor
// factories (see adapter_slab.cc).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <utility>

#include "common/status_macros.h"
#include "server/model/adapter_slab.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {

absl::StatusOr<std::shared_ptr<AdapterSlab>> AdapterSlab::Create(const BertConfig& encoder_config, Options options) {
  if (options.capacity < 1) return absl::InvalidArgumentError("an adapter slab needs at least one slot");
  if (options.bottleneck < 1) return absl::InvalidArgumentError("an adapter slab's bottleneck must be at least 1");
  if (!at::isFloatingType(options.dtype)) return absl::InvalidArgumentError("an adapter slab's dtype must be floating");
  auto slab = std::shared_ptr<AdapterSlab>(
      new AdapterSlab(options, SlotBytes(encoder_config, options.bottleneck, options.dtype)));
  RETURN_IF_ERROR(GuardTorch("allocate adapter slab", [&]() {
    c10::InferenceMode inference_mode;
    const int64_t s = options.capacity, d = encoder_config.hidden_size, m = options.bottleneck, k = UpRows(m);
    const at::TensorOptions o = at::TensorOptions().device(options.device).dtype(options.dtype);
    auto adapter = [&] {
      return AdapterStack::StackedAdapter{at::empty({s, d, m}, o), at::empty({s, m}, o), at::empty({s, k, d}, o)};
    };
    for (int64_t l = 0; l < encoder_config.num_hidden_layers; ++l) {
      AdapterStack::StackedLayer layer;
      layer.attention_adapter = adapter();
      layer.ffn_adapter = adapter();
      layer.attention_ln_weight = at::empty({s, d}, o);
      layer.attention_ln_bias = at::empty({s, d}, o);
      layer.output_ln_weight = at::empty({s, d}, o);
      layer.output_ln_bias = at::empty({s, d}, o);
      slab->layers_.push_back(std::move(layer));
    }
    slab->emb_ln_weight_ = at::empty({s, d}, o);
    slab->emb_ln_bias_ = at::empty({s, d}, o);
    slab->up_bias_selector_ = at::zeros({k - m}, o);
    slab->up_bias_selector_[0] = 1;
  }));
  return slab;
}

}  // namespace adapterd::model
