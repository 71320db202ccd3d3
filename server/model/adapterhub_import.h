// An AdapterHub adapter directory as one adapterd task (docs/ADAPTER_FORMAT.md,
// "AdapterHub adapters"): the files `save_adapter` writes, given as
// name -> bytes, become an AdapterSet that computes what the `adapters`
// library computes for that adapter and head on the same encoder.
//
// The directory's files (exactly these names; others are refused naming them):
//   adapter_config.json                               required
//   adapter.safetensors | pytorch_adapter.bin          exactly one
//   head_config.json                                   required (a task needs a head)
//   model_head.safetensors | pytorch_model_head.bin    exactly one
// The .bin files are read by the safe torch.save reader (torch_archive.h),
// never by a Python unpickler.
//
// What the set holds:
//   - the adapters' D and U per layer and site, cast to fp32; a `leave_out`
//     layer gets an identity adapter (all four tensors zero: x + U act(D x +
//     b_D) + b_U = x exactly);
//   - the encoder's own LayerNorm affines, copied: the library trains adapters
//     and head only, and its file holds no LayerNorm;
//   - the head's last Linear (a zero bias where the head has none), the
//     kind and labels from head_config.json; a regression task's outputs are
//     its raw values (target mean 0, stddev 1).
//
// Checked against the serving encoder: hidden size (adapter and head
// configs), layer count (no tensor past it), and, for a head that reads the
// pooler, that the encoder has one. The directory has no fingerprint of the
// model it was trained on: a model of the same shape with other weights
// imports without complaint, and its predictions are then meaningless.
//
// Errors: INVALID_ARGUMENT naming the file and field or tensor for anything
// malformed or refused by ParseAdapterHubConfig/Head and FindAdapterHub*
// (adapterhub.h), a non-finite weight, or a mismatch with the encoder;
// UNIMPLEMENTED for what the format allows and adapterd does not compute
// yet: the Pfeiffer placement, a head of two layers, and a pooled head on
// h[CLS] where the encoder has a pooler (adapterd's pooled heads read the
// pooler's output then).
//
// Thread safety: a free function; reads its arguments only.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTERHUB_IMPORT_H_
#define ADAPTERD_SERVER_MODEL_ADAPTERHUB_IMPORT_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/adapterhub.h"
#include "server/model/bert_config.h"
#include "server/model/encoder_weights.h"

namespace adapterd::model {

// The directory's files: base name -> contents.
using AdapterHubFiles = std::map<std::string, std::string, std::less<>>;

struct ImportedAdapterHub {
  std::unique_ptr<AdapterSet> set;  // fp32, on the CPU, not requiring grad
  AdapterHubConfig adapter;         // as adapter_config.json says
  AdapterHubHead head;              // as head_config.json says
};

absl::StatusOr<ImportedAdapterHub> ImportAdapterHub(const AdapterHubFiles& files, const BertConfig& encoder_config,
                                                    const EncoderWeights& encoder);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTERHUB_IMPORT_H_
