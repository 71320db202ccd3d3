#include "server/api/request_checks.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "server/api/ids.h"
#include "server/serving/predict_checks.h"

namespace adapterd::api {
namespace {

absl::Status CheckText(const std::string& text, const std::string& what) {
  if (text.size() > kMaxTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", text.size(), " bytes; the limit is ", kMaxTextBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckPageRequest(int32_t page_size, const std::string& page_token) {
  if (page_size < 0) return absl::InvalidArgumentError("page_size must not be negative");
  if (page_token.size() > kMaxPageTokenBytes) {
    return absl::InvalidArgumentError("page_token is not one this server issued (too long)");
  }
  return absl::OkStatus();
}

absl::Status CheckJobId(const std::string& job_id) { return ValidateId("job_id", job_id, kMaxMintedIdBytes); }

}  // namespace

absl::Status CheckPredictRequest(const v1::PredictRequest& request) {
  RETURN_IF_ERROR(ValidateId("task_id", request.task_id()));
  RETURN_IF_ERROR(serving::CheckPredictInputs(request.texts(), request.text_pairs(), request.version()));
  RETURN_IF_ERROR(serving::CheckPredictOptions(request.threshold(), request.top_k_answers()));
  for (int i = 0; i < request.texts_size(); ++i) {
    RETURN_IF_ERROR(CheckText(request.texts(i), absl::StrCat("texts[", i, "]")));
  }
  for (int i = 0; i < request.text_pairs_size(); ++i) {
    RETURN_IF_ERROR(CheckText(request.text_pairs(i), absl::StrCat("text_pairs[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status CheckUploadMetadata(const v1::UploadDatasetRequest::Metadata& metadata, const std::string& route_task) {
  if (metadata.dataset_id().empty()) {
    if (!route_task.empty()) RETURN_IF_ERROR(ValidateId("x-task-id metadata", route_task));
  } else {
    // A client's id is 1-128 bytes; only ids the server mints are longer.
    RETURN_IF_ERROR(ValidateId("dataset_id", metadata.dataset_id()));
  }
  if (!IsValidUtf8(metadata.display_name()) || metadata.display_name().size() > kMaxDisplayNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("display_name must be valid UTF-8 of at most ", kMaxDisplayNameBytes, " bytes"));
  }
  if (!v1::DatasetFormat_IsValid(metadata.file_format())) {
    return absl::InvalidArgumentError(
        absl::StrCat("file_format ", metadata.file_format(), " is not a DatasetFormat (AUTO, CSV, JSONL or SQUAD)"));
  }
  if (!IsValidUtf8(metadata.file_name()) || metadata.file_name().size() > kMaxDisplayNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("file_name must be valid UTF-8 of at most ", kMaxDisplayNameBytes, " bytes"));
  }
  if (!metadata.file_name().empty() && metadata.file_format() == v1::DATASET_FORMAT_UNSPECIFIED) {
    return absl::InvalidArgumentError("file_name names a file: set file_format too (DATASET_FORMAT_AUTO to detect it)");
  }
  return absl::OkStatus();
}

absl::Status CheckExample(const v1::Example& e, int64_t index) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("example ", index, ": ", what));
  };
  const training::Example example = training::ExampleFromProto(e);
  if (absl::Status fields = training::CheckExampleFields(example); !fields.ok()) {
    return bad(fields.message());
  }
  if (e.text().size() > kMaxTextBytes || e.text_pair().size() > kMaxTextBytes) {
    return bad(absl::StrCat("text or text_pair over the limit of ", kMaxTextBytes, " bytes"));
  }
  for (const auto& [name, n] : {std::pair<const char*, int>{"labels", e.labels_size()},
                                {"tokens", e.tokens_size()},
                                {"tags", e.tags_size()},
                                {"entities", e.entities_size()},
                                {"answers", e.answers_size()}}) {
    if (n > kMaxListEntriesPerExample) {
      return bad(absl::StrCat(name, " has ", n, " entries; the limit is ", kMaxListEntriesPerExample));
    }
  }
  if (const size_t bytes = training::ExampleBytes(example); bytes > kMaxExampleBytes) {
    return bad(absl::StrCat("its strings total ", bytes, " bytes; the limit is ", kMaxExampleBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckGetDatasetRequest(const v1::GetDatasetRequest& request) {
  return ValidateId("dataset_id", request.dataset_id(), kMaxMintedIdBytes);
}

absl::Status CheckListDatasetsRequest(const v1::ListDatasetsRequest& request) {
  return CheckPageRequest(request.page_size(), request.page_token());
}

absl::Status CheckDeleteDatasetRequest(const v1::DeleteDatasetRequest& request) {
  return ValidateId("dataset_id", request.dataset_id(), kMaxMintedIdBytes);
}

absl::Status CheckCreateTrainingJobRequest(const v1::CreateTrainingJobRequest& request) {
  RETURN_IF_ERROR(ValidateId("task_id", request.task_id()));
  if (!request.request_id().empty()) RETURN_IF_ERROR(ValidateId("request_id", request.request_id()));
  if (request.dataset_ids().empty()) return absl::InvalidArgumentError("dataset_ids is empty");
  if (request.dataset_ids_size() > kMaxDatasetsPerJob) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset_ids has ", request.dataset_ids_size(), " entries; the limit is ", kMaxDatasetsPerJob));
  }
  for (const std::string& d : request.dataset_ids()) {
    RETURN_IF_ERROR(ValidateId("dataset_ids entry", d, kMaxMintedIdBytes));
  }
  if (!request.validation_dataset_id().empty()) {
    RETURN_IF_ERROR(ValidateId("validation_dataset_id", request.validation_dataset_id(), kMaxMintedIdBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckGetTrainingJobRequest(const v1::GetTrainingJobRequest& request) {
  return CheckJobId(request.job_id());
}

absl::Status CheckListTrainingJobsRequest(const v1::ListTrainingJobsRequest& request) {
  RETURN_IF_ERROR(CheckPageRequest(request.page_size(), request.page_token()));
  if (!request.task_id().empty()) RETURN_IF_ERROR(ValidateId("task_id", request.task_id()));
  if (!v1::JobState_IsValid(request.state())) return absl::InvalidArgumentError("unknown job state");
  return absl::OkStatus();
}

absl::Status CheckCancelTrainingJobRequest(const v1::CancelTrainingJobRequest& request) {
  return CheckJobId(request.job_id());
}

absl::Status CheckWatchTrainingJobRequest(const v1::WatchTrainingJobRequest& request) {
  RETURN_IF_ERROR(CheckJobId(request.job_id()));
  if (request.after_seq() < 0) return absl::InvalidArgumentError("after_seq must not be negative");
  return absl::OkStatus();
}

absl::Status CheckGetTaskRequest(const v1::GetTaskRequest& request) { return ValidateId("task_id", request.task_id()); }

absl::Status CheckListTasksRequest(const v1::ListTasksRequest& request) {
  return CheckPageRequest(request.page_size(), request.page_token());
}

absl::Status CheckDeleteTaskRequest(const v1::DeleteTaskRequest& request) {
  return ValidateId("task_id", request.task_id());
}

absl::Status CheckExportAdapterRequest(const v1::ExportAdapterRequest& request) {
  RETURN_IF_ERROR(ValidateId("task_id", request.task_id()));
  if (request.version() < 0) return absl::InvalidArgumentError("version must not be negative");
  if (!v1::AdapterFormat_IsValid(request.format())) {
    return absl::InvalidArgumentError(absl::StrCat("format ", request.format(), " is not an AdapterFormat"));
  }
  if (request.accept_layer_norm_loss() && request.format() != v1::ADAPTER_FORMAT_ADAPTERHUB) {
    return absl::InvalidArgumentError(
        "accept_layer_norm_loss applies to format ADAPTER_FORMAT_ADAPTERHUB only (adapterd's own file keeps the "
        "LayerNorms)");
  }
  return absl::OkStatus();
}

absl::Status CheckImportAdapterMetadata(const v1::ImportAdapterRequest::Metadata& metadata) {
  RETURN_IF_ERROR(ValidateId("task_id", metadata.task_id()));
  if (metadata.total_bytes() < 0) return absl::InvalidArgumentError("total_bytes must not be negative");
  if (!v1::AdapterFormat_IsValid(metadata.format())) {
    return absl::InvalidArgumentError(absl::StrCat("format ", metadata.format(), " is not an AdapterFormat"));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::api
