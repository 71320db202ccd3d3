// The task kind as storage records it (storage::v1::TaskKind) and as the
// model knows it (model::TaskKind): one mapping, used wherever the two meet,
// with the numbers the records keep pinned here at compile time (a record
// written by one build must mean the same kind in every later one).
// UNSPECIFIED, what jobs and tasks stored before kinds existed hold, is
// sequence classification.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_TRAINING_KIND_RECORDS_H_
#define ADAPTERD_SERVER_TRAINING_KIND_RECORDS_H_

#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/model/task_kinds.h"
#include "server/training/task_rows.h"

namespace adapterd::training {

#define ADAPTERD_SAME_KIND(model_kind, record_kind)                                                            \
  static_assert(                                                                                               \
      static_cast<int>(model::TaskKind::model_kind) == static_cast<int>(storage::v1::TASK_KIND_##record_kind), \
      "model::TaskKind::" #model_kind                                                                          \
      " must keep the number of stored "                                                                       \
      "TASK_KIND_" #record_kind)
ADAPTERD_SAME_KIND(kSequenceClassification, SEQUENCE_CLASSIFICATION);
ADAPTERD_SAME_KIND(kMultiLabelClassification, MULTI_LABEL_CLASSIFICATION);
ADAPTERD_SAME_KIND(kRegression, REGRESSION);
ADAPTERD_SAME_KIND(kTokenClassification, TOKEN_CLASSIFICATION);
ADAPTERD_SAME_KIND(kExtractiveQa, EXTRACTIVE_QA);
#undef ADAPTERD_SAME_KIND
static_assert(storage::v1::TaskKind_MAX == storage::v1::TASK_KIND_EXTRACTIVE_QA,
              "a stored kind was added: map it to a model::TaskKind above");

// `kind` must be UNSPECIFIED or a valid stored kind (TaskKind_IsValid).
inline model::TaskKind ModelKind(storage::v1::TaskKind kind) {
  return kind == storage::v1::TASK_KIND_UNSPECIFIED ? model::TaskKind::kSequenceClassification
                                                    : static_cast<model::TaskKind>(kind);
}

inline storage::v1::TaskKind RecordKind(model::TaskKind kind) { return static_cast<storage::v1::TaskKind>(kind); }

// An epoch's validation metrics as events and checkpoints store them
// (storage::v1::EpochMetrics). Records written before the kinds had no
// micro_f1: classification's is its accuracy.
inline Evaluation EvaluationOfRecord(const storage::v1::EpochMetrics& m) {
  Evaluation v;
  v.loss = m.val_loss();
  v.accuracy = m.val_accuracy();
  v.micro_f1 = m.micro_f1() == 0 ? m.val_accuracy() : m.micro_f1();
  v.macro_f1 = m.macro_f1();
  v.f1 = m.f1();
  v.exact_match = m.exact_match();
  v.spearman = m.spearman();
  v.pearson = m.pearson();
  v.mse = m.mse();
  return v;
}

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_KIND_RECORDS_H_
