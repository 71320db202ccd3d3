#include "server/training/hyperparameters.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/model/adapter_set.h"
#include "server/model/text_pieces.h"

namespace adapterd::training {
namespace {

absl::Status Range(bool ok, const char* field, const std::string& what) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("hyperparameter ", field, " ", what));
}

}  // namespace

absl::Status Hyperparameters::Validate() const {
  RETURN_IF_ERROR(Range(learning_rate > 0 && learning_rate <= 1, "learning_rate", "must be in (0, 1]"));
  RETURN_IF_ERROR(Range(epochs >= 1 && epochs <= 1000, "epochs", "must be in [1, 1000]"));
  RETURN_IF_ERROR(Range(batch_size >= 1 && batch_size <= 4096, "batch_size", "must be in [1, 4096]"));
  RETURN_IF_ERROR(
      Range(micro_batch_size >= 0 && micro_batch_size <= batch_size, "micro_batch_size", "must be in [0, batch_size]"));
  RETURN_IF_ERROR(Range(bottleneck_size >= 1 && bottleneck_size <= 4096, "bottleneck_size", "must be in [1, 4096]"));
  RETURN_IF_ERROR(model::ParseActivation(activation).status());
  RETURN_IF_ERROR(Range(init_std >= 0 && init_std <= 1, "init_std", "must be in [0, 1]"));
  RETURN_IF_ERROR(Range(max_seq_len >= 8 && max_seq_len <= 4096, "max_seq_len", "must be in [8, 4096]"));
  RETURN_IF_ERROR(
      Range(validation_fraction > 0 && validation_fraction < 1, "validation_fraction", "must be in (0, 1)"));
  RETURN_IF_ERROR(Range(warmup_fraction >= 0 && warmup_fraction < 1, "warmup_fraction", "must be in [0, 1)"));
  RETURN_IF_ERROR(Range(weight_decay >= 0 && weight_decay <= 1, "weight_decay", "must be in [0, 1]"));
  RETURN_IF_ERROR(Range(max_grad_norm > 0 && std::isfinite(max_grad_norm), "max_grad_norm", "must be finite and > 0"));
  RETURN_IF_ERROR(Range(adam_beta1 >= 0 && adam_beta1 < 1, "adam_beta1", "must be in [0, 1)"));
  RETURN_IF_ERROR(Range(adam_beta2 >= 0 && adam_beta2 < 1, "adam_beta2", "must be in [0, 1)"));
  RETURN_IF_ERROR(Range(adam_epsilon > 0 && adam_epsilon < 1, "adam_epsilon", "must be in (0, 1)"));
  RETURN_IF_ERROR(Range(checkpoint_every_steps >= 0, "checkpoint_every_steps", "must be >= 0"));
  RETURN_IF_ERROR(Range(
      doc_stride == 0 || (doc_stride >= model::MinDocStride(max_seq_len) && doc_stride <= max_seq_len), "doc_stride",
      absl::StrCat("must be 0 (a third of max_seq_len) or in [max_seq_len / 8, max_seq_len] = [",
                   model::MinDocStride(max_seq_len), ", ", max_seq_len, "]")));
  RETURN_IF_ERROR(Range(max_question_len >= 1 && max_question_len <= 4096, "max_question_len", "must be in [1, 4096]"));
  RETURN_IF_ERROR(Range(max_answer_len >= 1 && max_answer_len <= 4096, "max_answer_len", "must be in [1, 4096]"));
  return absl::OkStatus();
}

absl::StatusOr<Hyperparameters> ResolveHyperparameters(const storage::v1::Hyperparameters& r,
                                                       const Hyperparameters& d) {
  Hyperparameters hp = d;
  if (r.has_learning_rate()) hp.learning_rate = r.learning_rate();
  if (r.has_epochs()) hp.epochs = r.epochs();
  if (r.has_batch_size()) hp.batch_size = r.batch_size();
  if (r.has_bottleneck_size()) hp.bottleneck_size = r.bottleneck_size();
  if (r.has_activation()) hp.activation = r.activation();
  if (r.has_max_seq_len()) hp.max_seq_len = r.max_seq_len();
  if (r.has_seed()) hp.seed = r.seed();
  if (r.has_validation_fraction()) hp.validation_fraction = r.validation_fraction();
  if (r.has_warmup_fraction()) hp.warmup_fraction = r.warmup_fraction();
  if (r.has_weight_decay()) hp.weight_decay = r.weight_decay();
  if (r.has_max_grad_norm()) hp.max_grad_norm = r.max_grad_norm();
  if (r.has_checkpoint_every_steps()) hp.checkpoint_every_steps = r.checkpoint_every_steps();
  if (r.has_doc_stride()) hp.doc_stride = r.doc_stride();
  if (r.has_max_question_len()) hp.max_question_len = r.max_question_len();
  if (r.has_max_answer_len()) hp.max_answer_len = r.max_answer_len();
  if (r.has_freeze_layer_norms()) {
    hp.trainable = r.freeze_layer_norms() ? TrainableParts::kAdaptersAndHead : TrainableParts::kAdapters;
  }
  if (hp.doc_stride == 0) hp.doc_stride = model::DefaultDocStride(hp.max_seq_len);
  if (hp.micro_batch_size > hp.batch_size) hp.micro_batch_size = hp.batch_size;
  RETURN_IF_ERROR(hp.Validate());
  return hp;
}

storage::v1::Hyperparameters ToProto(const Hyperparameters& hp) {
  storage::v1::Hyperparameters r;
  r.set_learning_rate(hp.learning_rate);
  r.set_epochs(hp.epochs);
  r.set_batch_size(hp.batch_size);
  r.set_bottleneck_size(static_cast<int32_t>(hp.bottleneck_size));
  r.set_activation(hp.activation);
  r.set_max_seq_len(hp.max_seq_len);
  r.set_seed(hp.seed);
  r.set_validation_fraction(hp.validation_fraction);
  r.set_warmup_fraction(hp.warmup_fraction);
  r.set_weight_decay(hp.weight_decay);
  r.set_max_grad_norm(hp.max_grad_norm);
  r.set_checkpoint_every_steps(hp.checkpoint_every_steps);
  r.set_doc_stride(hp.doc_stride);
  r.set_max_question_len(hp.max_question_len);
  r.set_max_answer_len(hp.max_answer_len);
  r.set_freeze_layer_norms(hp.trainable == TrainableParts::kAdaptersAndHead);
  return r;
}

}  // namespace adapterd::training
