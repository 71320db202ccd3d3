// AdapterHub's `adapters` library (formerly adapter-transformers): what its
// `adapter_config.json` says, mapped onto what adapterd can run exactly
// (docs/ADAPTER_FORMAT.md, "AdapterHub adapters"): configs, heads and the
// tensors' names. Nothing here reads a file or builds a tensor; callers
// pass the JSON text and the tensors of a parsed weights file.
//
// The file, as `save_adapter` writes it:
//   {"config": {<BnConfig fields>}, "hidden_size": 768, "model_class": ...,
//    "model_name": "bert-base-uncased", "model_type": "bert", "name": ...,
//    "version": "adapters.1.0.0"}
//
// Every BnConfig field is read and either mapped, accepted because it only
// matters in training (dropout, init_weights, init_weights_seed,
// stochastic_depth, the phm_* options when phm_layer is false,
// inv_adapter_reduction_factor when inv_adapter is null), or refused with
// INVALID_ARGUMENT naming it when its value changes the forward in a way
// adapterd does not compute: ln_before, ln_after, a scaling other than 1,
// use_gating, phm_layer, is_parallel, cross_adapter,
// residual_before_ln other than true, original_ln_after false, an
// attention adapter without an FFN one, per-layer reduction factors that
// differ, an architecture other than "bottleneck", a model_type other than
// "bert", an unknown activation, and any field this reader does not know.
//
// Placements: mh_adapter + output_adapter with original_ln_before false is
// Houlsby's (adapterd's own; DoubleSeqBnConfig), output_adapter alone with
// original_ln_before true is Pfeiffer's (SeqBnConfig): the FFN adapter reads
// z = LN(h + x) and the layer ends LN(h + x + U act(D z)) with the same
// frozen LayerNorm. Other combinations are refused.
//
// Activations (lower-cased, as the library does): "swish"/"silu", "relu",
// "tanh", "gelu" (exact), "gelu_new" and "gelu_pytorch_tanh" (the tanh
// form). A file without a "version" key is an older library's, which
// renamed on load "gelu" to "gelu_new" and "gelu_orig" to "gelu"; so does
// this reader.
//
// Thread safety: free functions.
#ifndef ADAPTERD_SERVER_MODEL_ADAPTERHUB_H_
#define ADAPTERD_SERVER_MODEL_ADAPTERHUB_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/adapter_config.h"
#include "server/model/safetensors.h"
#include "server/model/task_kinds.h"

namespace adapterd::model {

enum class AdapterPlacement {
  kHoulsby,   // both sites, the paper's (and adapterd's) placement
  kPfeiffer,  // the FFN site only, reading LN(h + x)
};
std::string_view AdapterPlacementName(AdapterPlacement p);

struct AdapterHubConfig {
  std::string name;        // the adapter's name: its tensors' key infix
  std::string model_name;  // e.g. "bert-base-uncased": informational only (no fingerprint in the file)
  std::string version;     // empty when the file has none
  int64_t hidden_size = 0;
  AdapterPlacement placement = AdapterPlacement::kHoulsby;
  // hidden_size // reduction_factor, as the library computes it (floor).
  int64_t bottleneck_size = 0;
  Activation activation = Activation::kSilu;
  // Layers the library put no adapter in (identity there), sorted, unique.
  std::vector<int64_t> leave_out;
  // "nice"/"glow" when the config names invertible adapters (empty: none).
  // The library drops them from task adapters whose file has no invertible
  // weights (old presets named them without using them); so does
  // FindAdapterHubWeights, which refuses a file that holds some.
  std::string inv_adapter;
};

// The library's bottleneck size for a reduction factor: Python's
// `int(hidden_size // reduction_factor)` (float floor division, as CPython
// computes it), which is not always floor(hidden_size / reduction_factor).
int64_t AdapterHubBottleneckSize(int64_t hidden_size, double reduction_factor);
// The reduction factor to write for bottleneck size m: d / m, an integer when
// m divides d, otherwise the largest double at or under d / m for which
// AdapterHubBottleneckSize gives back m (a factor under 1 for m > d, which
// the library computes as well). Requires m >= 1.
double AdapterHubReductionFactor(int64_t hidden_size, int64_t bottleneck_size);
// The name the library's configs give an activation ("swish" for silu; "gelu"
// is the exact form in a file with a "version").
std::string_view AdapterHubActivationName(Activation a);

// Parses and checks `adapter_config.json`. INVALID_ARGUMENT naming the field
// for malformed JSON, a missing or mistyped field, and every refusal above.
absl::StatusOr<AdapterHubConfig> ParseAdapterHubConfig(std::string_view json);

// A Linear's tensors in a weights file (borrowed views; bias null where the
// Linear has none).
struct AdapterHubLinear {
  const TensorView* weight = nullptr;
  const TensorView* bias = nullptr;
};
// One adapter: down [m, d] + [m], up [d, m] + [d].
struct AdapterHubAdapterWeights {
  AdapterHubLinear down, up;
};
// Per layer, per site; nullopt where the adapter has none (a leave_out
// layer; Pfeiffer's attention site).
struct AdapterHubWeights {
  std::vector<std::optional<AdapterHubAdapterWeights>> attention, ffn;
};

// Finds `config`'s tensors in a weights file's tensors (pytorch_adapter.bin
// through torch_archive.h, or adapter.safetensors), by the library's names:
//   [bert.]encoder.layer.{i}.attention.output.adapters.{name}.adapter_down.0.weight
//   ... .adapter_down.0.bias, .adapter_up.weight, .adapter_up.bias
//   [bert.]encoder.layer.{i}.output.adapters.{name}. ...        (the FFN site)
// and the older library's `attention_text_{task,lang}_adapters` /
// `layer_text_{task,lang}_adapters` for `adapters`. The set must be exact
// (the library only warns on a missing key, keeping random weights): every
// site the placement has in every layer but leave_out's, no other tensor,
// each of float dtype (F32, F16, BF16) and its shape for `config`'s d and m,
// `num_layers` layers. INVALID_ARGUMENT naming the tensor otherwise. The
// views borrow `tensors`.
absl::StatusOr<AdapterHubWeights> FindAdapterHubWeights(const std::map<std::string, TensorView, std::less<>>& tensors,
                                                        const AdapterHubConfig& config, int64_t num_layers);

// A prediction head (`head_config.json`), mapped onto a task kind:
//   classification, num_labels >= 2       -> sequence classification
//   classification, num_labels 1          -> regression (mean 0, stddev 1: the raw output)
//   multilabel_classification             -> multi-label classification
//   tagging                               -> token classification
//   question_answering, num_labels 2      -> extractive QA (start, end)
// Other head types are refused naming them. The library's head is a stack
// of `layers` blocks, Dropout then Linear, with the activation after every
// Linear but the last: its weights are heads.{name}.{i}.{weight,bias} at
// the Linears' indices in that stack (1 and 4 for two layers with an
// activation). Labels come from label2id in id order ("LABEL_i" where it
// is null, as transformers names them).
struct AdapterHubHead {
  std::string name;
  TaskKind kind = TaskKind::kSequenceClassification;
  std::vector<std::string> labels;
  int64_t layers = 1;  // 1 or 2
  // The activation between two layers (layers == 2); nullopt for none.
  std::optional<Activation> activation;
  // The pooled kinds read the pooler's output (true) or h[CLS] (false);
  // always false for the token kinds.
  bool use_pooler = false;
  bool bias = true;  // the last Linear's
  int64_t hidden_size = 0;
};
absl::StatusOr<AdapterHubHead> ParseAdapterHubHead(std::string_view json);

// The head's Linears in the head weights file: `dense` [d, d] + [d] for a
// two-layer head, `out` [K, d] (+ [K] when bias) for every head, found by
// the library's names (heads.{name}.{i}.*); the set must be exact, each
// float and of its shape. INVALID_ARGUMENT naming the tensor otherwise.
struct AdapterHubHeadWeights {
  AdapterHubLinear dense, out;
};
absl::StatusOr<AdapterHubHeadWeights> FindAdapterHubHeadWeights(
    const std::map<std::string, TensorView, std::less<>>& tensors, const AdapterHubHead& head);

}  // namespace adapterd::model

#endif  // ADAPTERD_SERVER_MODEL_ADAPTERHUB_H_
