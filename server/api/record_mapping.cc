#include "server/api/record_mapping.h"

#include <string>

#include "server/api/grpc_status.h"
#include "server/model/task_kinds.h"
#include "server/training/kind_records.h"

namespace adapterd::api {
namespace {

// `from` as a `To` of the same shape, through the wire form both share
// (record_mapping_test.cc checks the shapes). Parsing what was just
// serialised cannot fail.
template <typename To, typename From>
To SameShapeCopy(const From& from) {
  To to;
  to.ParseFromString(from.SerializeAsString());
  return to;
}

}  // namespace

v1::JobState ToApi(storage::v1::JobState state) { return static_cast<v1::JobState>(state); }
v1::TaskState ToApi(storage::v1::TaskState state) { return static_cast<v1::TaskState>(state); }
storage::v1::JobState ToRecord(v1::JobState state) { return static_cast<storage::v1::JobState>(state); }
// The API's kinds keep the stored numbers: the two casts below are the mapping.
#define ADAPTERD_SAME_KIND(name)                                                                           \
  static_assert(static_cast<int>(v1::TASK_KIND_##name) == static_cast<int>(storage::v1::TASK_KIND_##name), \
                "the API's TASK_KIND_" #name " must keep the stored number")
ADAPTERD_SAME_KIND(UNSPECIFIED);
ADAPTERD_SAME_KIND(SEQUENCE_CLASSIFICATION);
ADAPTERD_SAME_KIND(MULTI_LABEL_CLASSIFICATION);
ADAPTERD_SAME_KIND(REGRESSION);
ADAPTERD_SAME_KIND(TOKEN_CLASSIFICATION);
ADAPTERD_SAME_KIND(EXTRACTIVE_QA);
#undef ADAPTERD_SAME_KIND
static_assert(static_cast<int>(v1::TaskKind_MAX) == static_cast<int>(storage::v1::TaskKind_MAX),
              "a kind was added to one enum and not the other");

v1::TaskKind ToApi(storage::v1::TaskKind kind) {
  return kind == storage::v1::TASK_KIND_UNSPECIFIED ? v1::TASK_KIND_SEQUENCE_CLASSIFICATION
                                                    : static_cast<v1::TaskKind>(kind);
}
storage::v1::TaskKind ToRecord(v1::TaskKind kind) { return static_cast<storage::v1::TaskKind>(kind); }

v1::Hyperparameters ToApi(const storage::v1::Hyperparameters& h) { return SameShapeCopy<v1::Hyperparameters>(h); }
v1::EpochMetrics ToApi(const storage::v1::EpochMetrics& m, storage::v1::TaskKind kind) {
  v1::EpochMetrics out = SameShapeCopy<v1::EpochMetrics>(m);
  if (out.epoch() <= 0 || (kind != storage::v1::TASK_KIND_UNSPECIFIED && !storage::v1::TaskKind_IsValid(kind))) {
    return out;
  }
  const model::KindSpec& spec = model::SpecOf(training::ModelKind(kind));
  const std::string field(model::MetricField(spec.selection));
  // A double field of EpochMetrics by MetricField's contract
  // (record_mapping_test checks every kind's).
  const google::protobuf::FieldDescriptor* f = v1::EpochMetrics::descriptor()->FindFieldByName(field);
  v1::SelectionMetric& s = *out.mutable_selection();
  s.set_field(field);
  s.set_label(std::string(spec.selection_label));
  s.set_value(out.GetReflection()->GetDouble(out, f));
  s.set_fraction(spec.selection_is_fraction);
  return out;
}

v1::JobEvent ToApi(const storage::v1::JobEvent& e, storage::v1::TaskKind kind) {
  v1::JobEvent out = SameShapeCopy<v1::JobEvent>(e);
  if (e.has_epoch_metrics()) *out.mutable_epoch_metrics() = ToApi(e.epoch_metrics(), kind);
  return out;
}
storage::v1::Hyperparameters ToRecord(const v1::Hyperparameters& h) {
  return SameShapeCopy<storage::v1::Hyperparameters>(h);
}
storage::v1::DatasetChunk ToRecord(const v1::DatasetChunk& c) { return SameShapeCopy<storage::v1::DatasetChunk>(c); }

v1::TrainingJob ToApi(const storage::v1::JobRecord& j) {
  v1::TrainingJob out;
  out.set_job_id(j.job_id());
  out.set_task_id(j.task_id());
  out.set_request_id(j.request_id());
  out.set_state(ToApi(j.state()));
  *out.mutable_hyperparameters() = ToApi(j.hyperparameters());
  for (const auto& d : j.dataset_ids()) out.add_dataset_ids(d);
  out.set_validation_dataset_id(j.validation_dataset_id());
  out.set_error_message(CallerMessage(j.error_message()));
  out.set_result_version(j.result_version());
  *out.mutable_progress() = SameShapeCopy<v1::JobProgress>(j.progress());
  *out.mutable_best_metrics() = ToApi(j.best_metrics(), j.task_kind());
  for (const auto& l : j.labels()) out.add_labels(l);
  out.set_num_train_examples(j.num_train_examples());
  out.set_num_validation_examples(j.num_validation_examples());
  out.set_attempts(j.attempts());
  out.set_created_at_micros(j.created_at_micros());
  out.set_updated_at_micros(j.updated_at_micros());
  out.set_started_at_micros(j.started_at_micros());
  out.set_finished_at_micros(j.finished_at_micros());
  out.set_task_kind(ToApi(j.task_kind()));
  return out;
}

v1::Dataset ToApi(const storage::v1::DatasetRecord& r) {
  v1::Dataset out;
  out.set_dataset_id(r.dataset_id());
  out.set_num_examples(r.num_examples());
  out.set_num_bytes(r.num_bytes());
  for (const auto& [label, n] : r.label_counts()) (*out.mutable_label_counts())[label] = n;
  out.set_display_name(r.display_name());
  out.set_created_at_micros(r.created_at_micros());
  out.set_content_sha256(r.content_sha256());
  out.set_file_sha256(r.file_sha256());
  return out;
}

v1::Task ToApi(const storage::v1::TaskRecord& t) {
  v1::Task out;
  out.set_task_id(t.task_id());
  for (const auto& l : t.labels()) out.add_labels(l);
  *out.mutable_adapter_config() = SameShapeCopy<v1::AdapterConfig>(t.adapter_config());
  out.set_state(ToApi(t.state()));
  out.set_current_version(t.current_version());
  for (int64_t v : t.versions()) out.add_versions(v);
  out.set_current_job_id(t.current_job_id());
  out.set_encoder_fingerprint(t.encoder_fingerprint());
  out.set_created_at_micros(t.created_at_micros());
  out.set_updated_at_micros(t.updated_at_micros());
  out.set_task_kind(ToApi(t.task_kind()));
  return out;
}

}  // namespace adapterd::api
