// One adapterd task as an AdapterHub adapter directory (docs/ADAPTER_FORMAT.md,
// "AdapterHub export"): the files `save_adapter` writes, which the `adapters`
// library loads with `load_adapter` onto the same encoder and computes what
// adapterd computes. ImportAdapterHub (adapterhub_import.h) is its inverse:
// import(export(set)) gives back the set's tensors bit for bit (a regression
// head's target standardisation is folded into its Linear, so there the
// head's tensors are those of the folded Linear and the predictions agree to
// rounding).
//
// The files (name -> bytes):
//   adapter_config.json     build_full_config's envelope around a
//                           DoubleSeqBnConfig ("houlsby": both sites, the
//                           paper's placement, adapterd's) with the task's
//                           non_linearity, a reduction_factor for which the
//                           library's `int(d // reduction_factor)` is the
//                           task's m, leave_out [] and a "version" (a file
//                           without one would read "gelu" as the tanh form);
//   pytorch_adapter.bin     torch.save's zip of the adapter tensors under the
//                           library's keys, every layer and both sites
//                           (bert.encoder.layer.{i}.attention.output.adapters.{name}.
//                           adapter_down.0.weight, ... and .output.adapters. for
//                           the FFN site), fp32: the exact key set, since the
//                           library only warns on a missing key and keeps a
//                           random tensor;
//   head_config.json        the head: classification (num_labels >= 2, or 1 for
//                           regression), multilabel_classification, tagging or
//                           question_answering; layers 1; label2id; use_pooler
//                           when the pooled kinds read the encoder's pooler
//                           (adapterd's do exactly when it has one);
//   pytorch_model_head.bin  heads.{name}.1.weight and .bias, fp32.
//
// What the format cannot hold: the LayerNorm affines. The library trains
// adapters and head only and uses the encoder's LayerNorms; a task trained
// with its LayerNorms (adapterd's default, the paper's regime) computes
// something else there. Unless `accept_layer_norm_loss`, such a set is refused
// with FAILED_PRECONDITION naming the first LayerNorm that differs from the
// encoder's; with it, the export drops them and the library will use the
// encoder's.
//
// Errors: INVALID_ARGUMENT for a name the library's keys cannot carry;
// FAILED_PRECONDITION as above, or for a set whose geometry is not the
// encoder's.
//
// Thread safety: a free function; reads its arguments only.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTERHUB_EXPORT_H_
#define ADAPTERD_SERVER_MODEL_ADAPTERHUB_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/model/adapter_set.h"
#include "server/model/adapterhub_import.h"
#include "server/model/bert_config.h"
#include "server/model/encoder_weights.h"

namespace adapterd::model {

// The library's version whose save_adapter this export follows; written as
// "version" in both configs.
inline constexpr char kAdapterHubExportVersion[] = "adapters.1.2.0";

struct AdapterHubExportOptions {
  // The adapter's and head's name: the infix of every key, and the name
  // load_adapter gives it unless told otherwise. 1-128 characters of
  // [A-Za-z0-9_-] (a '.' would split the library's module path).
  std::string name;
  // build_full_config's model_name: informational (the library looks
  // nothing up by it when loading from a directory).
  std::string model_name;
  // Export a set whose LayerNorms differ from the encoder's, without them.
  bool accept_layer_norm_loss = false;
};

absl::StatusOr<AdapterHubFiles> ExportAdapterHub(const AdapterSet& set, const BertConfig& encoder_config,
                                                 const EncoderWeights& encoder, const AdapterHubExportOptions& options);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTERHUB_EXPORT_H_
