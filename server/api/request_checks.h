// The checks every API request gets before any state is read: what can be
// decided from the request alone (ids, sizes, encodings, ranges). Each
// returns INVALID_ARGUMENT naming the field, and is a pure function, so one
// fuzz harness covers them all (tests/fuzz/request_checks_fuzzer.cc).
//
// The size limits, each named in docs/API.md ("Limits"):
//   ids                 kMaxIdBytes (128); job and dataset ids kMaxMintedIdBytes (160)
//   Predict text, pair  kMaxTextBytes each
//   example text, pair  kMaxTextBytes each (UploadDataset)
//   label               training::kMaxLabelBytes (the validator's own check)
//   display_name        kMaxDisplayNameBytes
//   dataset_ids         kMaxDatasetsPerJob entries
//   page_token          kMaxPageTokenBytes; page_size capped at the store's 1000
// Limits that are tenant quotas (texts per Predict, bytes per dataset, tasks,
// queued jobs) and server flags (message size, examples per job, adapter file
// size) are checked where the tenant or server is known (backend.cc).
//
// Thread safety: pure functions.
#ifndef ADAPTERD_SERVER_API_REQUEST_CHECKS_H_
#define ADAPTERD_SERVER_API_REQUEST_CHECKS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"
#include "server/training/example.h"

namespace adapterd::api {

// BERT reads at most a few hundred tokens (~3 KB of English); a text is
// truncated to --max_seq_len tokens anyway, so 64 KiB bounds the tokenizer's
// work per text without refusing any text a model could read whole.
inline constexpr size_t kMaxTextBytes = 64 << 10;
inline constexpr size_t kMaxDisplayNameBytes = 1024;
// One dataset example: entries of each list field (labels, tokens, tags,
// entities, answers), and the bytes of all its strings together.
inline constexpr int kMaxListEntriesPerExample = 4096;
inline constexpr size_t kMaxExampleBytes = 4 * kMaxTextBytes;
inline constexpr int kMaxDatasetsPerJob = 64;
inline constexpr size_t kMaxPageTokenBytes = 1024;

absl::Status CheckPredictRequest(const v1::PredictRequest& request);
// The first message of UploadDataset. `route_task`: the x-task-id metadata
// ("" when absent).
absl::Status CheckUploadMetadata(const v1::UploadDatasetRequest::Metadata& metadata, const std::string& route_task);
// One uploaded example; `index` is its position in the dataset (for the
// message).
absl::Status CheckExample(const v1::Example& example, int64_t index);
absl::Status CheckGetDatasetRequest(const v1::GetDatasetRequest& request);
absl::Status CheckListDatasetsRequest(const v1::ListDatasetsRequest& request);
absl::Status CheckDeleteDatasetRequest(const v1::DeleteDatasetRequest& request);
// Ids and dataset list; hyperparameter ranges are checked by
// training::ResolveHyperparameters.
absl::Status CheckCreateTrainingJobRequest(const v1::CreateTrainingJobRequest& request);
absl::Status CheckGetTrainingJobRequest(const v1::GetTrainingJobRequest& request);
absl::Status CheckListTrainingJobsRequest(const v1::ListTrainingJobsRequest& request);
absl::Status CheckCancelTrainingJobRequest(const v1::CancelTrainingJobRequest& request);
absl::Status CheckWatchTrainingJobRequest(const v1::WatchTrainingJobRequest& request);
absl::Status CheckGetTaskRequest(const v1::GetTaskRequest& request);
absl::Status CheckListTasksRequest(const v1::ListTasksRequest& request);
absl::Status CheckDeleteTaskRequest(const v1::DeleteTaskRequest& request);
absl::Status CheckExportAdapterRequest(const v1::ExportAdapterRequest& request);
// The first message of ImportAdapter.
absl::Status CheckImportAdapterMetadata(const v1::ImportAdapterRequest::Metadata& metadata);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_REQUEST_CHECKS_H_
