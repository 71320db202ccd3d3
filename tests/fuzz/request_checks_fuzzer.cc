// Fuzzes the per-request checks (server/api/request_checks.h), fed with
// serialised request messages as gRPC delivers them: every RPC's request
// passes one of these before the server reads any state.
//
// Input: byte 0 picks the request type (kChecks); the rest is that message's
// wire bytes (inputs that do not parse as it are skipped, as gRPC would
// refuse them).
//
// Invariants: a check never crashes and fails only with INVALID_ARGUMENT and
// a valid UTF-8 message (it must not echo a caller's invalid bytes). A
// Predict that passes has 1+ texts, each and each pair at most
// kMaxTextBytes, pairs none or one per text, a valid task id, a version
// >= 0, a threshold in [0, 1] and top_k_answers in [0, 20]; an example that
// passes has only valid UTF-8, a non-empty text (or pre-split tokens and an
// empty text) within its limit, labels, tags and entity labels non-empty
// within their limit, one tag per token, entities with 0 <= start < end and
// answers with a text and answer_start >= 0 (what a task's kind needs of
// it is a training job's check); a job request that passes names 1..kMaxDatasetsPerJob
// datasets; a list request that passes has page_size >= 0 and a token of at
// most kMaxPageTokenBytes.
//
// Seeds: ADAPTERD_FUZZ_WRITE_SEEDS=DIR request_checks_fuzzer writes one valid
// request of each type into DIR and exits (tests/fuzz/corpus/request_checks).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "google/protobuf/stubs/logging.h"
#include "server/api/ids.h"
#include "server/api/request_checks.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::api {
namespace {

template <typename T>
bool Parse(std::string_view bytes, T* msg) {
  return msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

void CheckError(const absl::Status& s) {
  if (s.ok()) return;
  FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument) << "unexpected code " << s;
  FUZZ_CHECK(IsValidUtf8(std::string(s.message()))) << "the message echoes invalid UTF-8";
}

void FuzzPredict(std::string_view bytes) {
  v1::PredictRequest r;
  if (!Parse(bytes, &r)) return;
  const absl::Status s = CheckPredictRequest(r);
  CheckError(s);
  if (!s.ok()) return;
  FUZZ_CHECK(r.texts_size() >= 1);
  FUZZ_CHECK(r.text_pairs_size() == 0 || r.text_pairs_size() == r.texts_size());
  for (const std::string& t : r.texts()) FUZZ_CHECK(t.size() <= kMaxTextBytes);
  for (const std::string& t : r.text_pairs()) FUZZ_CHECK(t.size() <= kMaxTextBytes);
  FUZZ_CHECK(r.version() >= 0);
  FUZZ_CHECK(r.threshold() >= 0 && r.threshold() <= 1);
  FUZZ_CHECK(r.top_k_answers() >= 0 && r.top_k_answers() <= 20);
  FUZZ_CHECK(!r.task_id().empty() && r.task_id().size() <= kMaxIdBytes && r.task_id()[0] != '.');
}

void FuzzExample(std::string_view bytes) {
  v1::Example e;
  if (!Parse(bytes, &e)) return;
  const absl::Status s = CheckExample(e, 0);
  CheckError(s);
  if (!s.ok()) return;
  FUZZ_CHECK(e.text().empty() != e.tokens().empty()) << "a text, or tokens";
  FUZZ_CHECK(e.text().size() <= kMaxTextBytes && IsValidUtf8(e.text()));
  FUZZ_CHECK(e.text_pair().size() <= kMaxTextBytes && IsValidUtf8(e.text_pair()));
  const auto name = [](const std::string& n) {
    return !n.empty() && n.size() <= adapterd::training::kMaxLabelBytes && IsValidUtf8(n);
  };
  FUZZ_CHECK(e.label().empty() || name(e.label()));
  for (const std::string& l : e.labels()) FUZZ_CHECK(name(l));
  FUZZ_CHECK(e.tags_size() == e.tokens_size());
  for (const std::string& t : e.tags()) FUZZ_CHECK(name(t));
  for (const std::string& t : e.tokens()) FUZZ_CHECK(!t.empty() && IsValidUtf8(t));
  for (const auto& x : e.entities()) FUZZ_CHECK(x.start() >= 0 && x.end() > x.start() && name(x.label()));
  for (const auto& a : e.answers()) FUZZ_CHECK(!a.text().empty() && IsValidUtf8(a.text()) && a.answer_start() >= 0);
}

void FuzzUploadMetadata(std::string_view bytes) {
  v1::UploadDatasetRequest::Metadata m;
  if (!Parse(bytes, &m)) return;
  // The routing header comes from metadata: take it from the display name.
  const absl::Status s = CheckUploadMetadata(m, m.display_name().substr(0, 40));
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(m.display_name().size() <= kMaxDisplayNameBytes);
}

void FuzzCreateJob(std::string_view bytes) {
  v1::CreateTrainingJobRequest r;
  if (!Parse(bytes, &r)) return;
  const absl::Status s = CheckCreateTrainingJobRequest(r);
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(r.dataset_ids_size() >= 1 && r.dataset_ids_size() <= kMaxDatasetsPerJob);
}

void FuzzListJobs(std::string_view bytes) {
  v1::ListTrainingJobsRequest r;
  if (!Parse(bytes, &r)) return;
  const absl::Status s = CheckListTrainingJobsRequest(r);
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(r.page_size() >= 0 && r.page_token().size() <= kMaxPageTokenBytes);
}

void FuzzListTasks(std::string_view bytes) {
  v1::ListTasksRequest r;
  if (!Parse(bytes, &r)) return;
  const absl::Status s = CheckListTasksRequest(r);
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(r.page_size() >= 0 && r.page_token().size() <= kMaxPageTokenBytes);
}

void FuzzListDatasets(std::string_view bytes) {
  v1::ListDatasetsRequest r;
  if (!Parse(bytes, &r)) return;
  const absl::Status s = CheckListDatasetsRequest(r);
  CheckError(s);
  if (s.ok()) FUZZ_CHECK(r.page_size() >= 0 && r.page_token().size() <= kMaxPageTokenBytes);
}

template <typename T>
void FuzzSimple(std::string_view bytes, absl::Status (*check)(const T&)) {
  T r;
  if (!Parse(bytes, &r)) return;
  CheckError(check(r));
}

void FuzzOne(uint8_t kind, std::string_view bytes) {
  switch (kind % 16) {
    case 0:
      return FuzzPredict(bytes);
    case 1:
      return FuzzExample(bytes);
    case 2:
      return FuzzUploadMetadata(bytes);
    case 3:
      return FuzzCreateJob(bytes);
    case 4:
      return FuzzListJobs(bytes);
    case 5:
      return FuzzListTasks(bytes);
    case 6:
      return FuzzSimple<v1::GetDatasetRequest>(bytes, &CheckGetDatasetRequest);
    case 7:
      return FuzzSimple<v1::GetTrainingJobRequest>(bytes, &CheckGetTrainingJobRequest);
    case 8:
      return FuzzSimple<v1::CancelTrainingJobRequest>(bytes, &CheckCancelTrainingJobRequest);
    case 9:
      return FuzzSimple<v1::WatchTrainingJobRequest>(bytes, &CheckWatchTrainingJobRequest);
    case 10:
      return FuzzSimple<v1::GetTaskRequest>(bytes, &CheckGetTaskRequest);
    case 11:
      return FuzzSimple<v1::DeleteTaskRequest>(bytes, &CheckDeleteTaskRequest);
    case 12:
      return FuzzSimple<v1::ExportAdapterRequest>(bytes, &CheckExportAdapterRequest);
    case 13:
      return FuzzListDatasets(bytes);
    case 14:
      return FuzzSimple<v1::DeleteDatasetRequest>(bytes, &CheckDeleteDatasetRequest);
    default:
      return FuzzSimple<v1::ImportAdapterRequest::Metadata>(bytes, &CheckImportAdapterMetadata);
  }
}

void WriteSeed(const std::string& dir, const std::string& name, uint8_t kind,
               const google::protobuf::MessageLite& msg) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.put(static_cast<char>(kind));
  out << msg.SerializeAsString();
}

void WriteSeeds(const std::string& dir) {
  v1::PredictRequest predict;
  predict.set_task_id("task-1");
  predict.add_texts("a fine text");
  predict.add_texts("another one");
  predict.add_text_pairs("pair a");
  predict.add_text_pairs("pair b");
  predict.set_return_all_scores(true);
  WriteSeed(dir, "predict", 0, predict);
  v1::Example e;
  e.set_text("great movie");
  e.set_text_pair("indeed");
  e.set_label("pos");
  WriteSeed(dir, "example", 1, e);
  v1::UploadDatasetRequest::Metadata meta;
  meta.set_dataset_id("ds-1");
  meta.set_display_name("reviews");
  WriteSeed(dir, "upload_metadata", 2, meta);
  v1::CreateTrainingJobRequest job;
  job.set_task_id("task-1");
  job.set_request_id("req-1");
  job.add_dataset_ids("ds-1");
  job.set_validation_dataset_id("ds-2");
  job.mutable_hyperparameters()->set_epochs(3);
  WriteSeed(dir, "create_job", 3, job);
  v1::ListTrainingJobsRequest jobs;
  jobs.set_page_size(10);
  jobs.set_page_token("abc.0123456789abcdef");
  jobs.set_task_id("task-1");
  jobs.set_state(v1::JOB_STATE_RUNNING);
  WriteSeed(dir, "list_jobs", 4, jobs);
  v1::ListTasksRequest tasks;
  tasks.set_page_size(5);
  WriteSeed(dir, "list_tasks", 5, tasks);
  v1::WatchTrainingJobRequest watch;
  watch.set_job_id("job-0123456789abc012345.task-1");
  watch.set_after_seq(4);
  WriteSeed(dir, "watch", 9, watch);
  v1::ExportAdapterRequest exp;
  exp.set_task_id("task-1");
  exp.set_version(2);
  WriteSeed(dir, "export", 12, exp);
}

}  // namespace
}  // namespace adapterd::api

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in strings is logged by protobuf
  if (const char* dir = std::getenv("ADAPTERD_FUZZ_WRITE_SEEDS"); dir != nullptr && *dir != '\0') {
    adapterd::api::WriteSeeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  adapterd::api::FuzzOne(data[0], adapterd::fuzz::AsStringView(data + 1, size - 1));
  return 0;
}
