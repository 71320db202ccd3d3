// The API's core: every method of adapterd.v1.Adapterd, independent of gRPC.
//
// The gRPC layer (grpc_service.h) authenticates the caller, makes one call
// here with the tenant, and maps the Status. Everything an RPC decides lives
// here: id and input validation, quotas, and the calls into storage, the job
// queue and the serving engine. The tenant always comes from authentication;
// another tenant's resource is NOT_FOUND, exactly like a missing one.
//
// Error codes follow proto/adapterd/v1/adapterd_service.proto.
//
// Thread safety: thread-safe; methods may run concurrently from any number
// of RPC threads. Ownership: holds non-owning pointers to the server's parts,
// which outlive it.
#ifndef ADAPTERD_SERVER_API_BACKEND_H_
#define ADAPTERD_SERVER_API_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"
#include "server/api/tenants.h"
#include "server/model/bert_encoder.h"
#include "server/serving/inference_engine.h"
#include "server/training/job_queue.h"
#include "server/training/trainer.h"
#include "storage/database.h"

namespace adapterd::api {

class Backend;

// One dataset being uploaded (the UploadDataset stream). Chunks are stored as
// they arrive, so memory stays bounded by one chunk; the dataset becomes
// visible only in Finish(). Destroying an unfinished upload removes what it
// stored. Not thread-safe: one stream drives it.
class DatasetUpload {
 public:
  ~DatasetUpload();
  // Validates and stores one chunk: every example needs a non-empty, valid
  // UTF-8 text and label (INVALID_ARGUMENT naming the example's index in the
  // dataset); RESOURCE_EXHAUSTED past the tenant's max_dataset_bytes.
  absl::Status AddChunk(const v1::DatasetChunk& chunk);
  // Writes the metadata record (the dataset becomes visible).
  // INVALID_ARGUMENT for an empty dataset.
  absl::StatusOr<v1::Dataset> Finish();

 private:
  friend class Backend;
  DatasetUpload(Backend* backend, const Tenant* tenant, std::string dataset_id, std::string display_name);
  Backend* backend_;
  const Tenant* tenant_;
  std::string dataset_id_;
  std::string display_name_;
  v1::DatasetRecord record_;
  int64_t next_chunk_ = 0;
  bool finished_ = false;
  std::unique_ptr<Sha256> sha_;
};

class Backend {
 public:
  struct Options {
    storage::Database* db = nullptr;                  // not owned
    training::JobQueue* queue = nullptr;              // not owned
    serving::InferenceEngine* engine = nullptr;       // not owned
    const model::BertEncoder* encoder = nullptr;      // not owned
    training::Hyperparameters training_defaults;
    // Largest adapter file ImportAdapter accepts.
    int64_t max_adapter_bytes = 512ll << 20;
    // Bytes per ExportAdapter message.
    int64_t export_chunk_bytes = 1 << 20;
    // How long WatchJob waits for events before re-checking `cancelled`.
    absl::Duration watch_poll = absl::Milliseconds(500);
  };
  static absl::StatusOr<std::unique_ptr<Backend>> Create(Options options);

  // --- datasets ---------------------------------------------------------------
  // Starts an upload. `dataset_id` "" = a server-assigned id, which carries
  // `route_task` (the call's x-task-id, "" if none; common/routing.h); an id
  // in use (or being uploaded) is ALREADY_EXISTS.
  absl::StatusOr<std::unique_ptr<DatasetUpload>> BeginUpload(const Tenant& tenant,
                                                             const v1::UploadDatasetRequest::Metadata& meta,
                                                             const std::string& route_task = "");
  absl::StatusOr<v1::Dataset> GetDataset(const Tenant& tenant, const v1::GetDatasetRequest& request);

  // --- training jobs ----------------------------------------------------------
  absl::StatusOr<v1::TrainingJob> CreateTrainingJob(const Tenant& tenant,
                                                    const v1::CreateTrainingJobRequest& request);
  absl::StatusOr<v1::TrainingJob> GetTrainingJob(const Tenant& tenant, const v1::GetTrainingJobRequest& request);
  absl::StatusOr<v1::ListTrainingJobsResponse> ListTrainingJobs(const Tenant& tenant,
                                                                const v1::ListTrainingJobsRequest& request);
  absl::StatusOr<v1::TrainingJob> CancelTrainingJob(const Tenant& tenant,
                                                    const v1::CancelTrainingJobRequest& request);
  // Sends the snapshot, then new events, to `send` until the job is terminal
  // (OK), `send` returns false (CANCELLED), `stop()` returns an error (that
  // error: CANCELLED for a gone client, UNAVAILABLE while the server drains)
  // or the job queue shuts down (UNAVAILABLE).
  absl::Status WatchTrainingJob(const Tenant& tenant, const v1::WatchTrainingJobRequest& request,
                                const std::function<bool(const v1::WatchTrainingJobResponse&)>& send,
                                const std::function<absl::Status()>& stop);

  // --- tasks ------------------------------------------------------------------
  absl::StatusOr<v1::Task> GetTask(const Tenant& tenant, const v1::GetTaskRequest& request);
  absl::StatusOr<v1::ListTasksResponse> ListTasks(const Tenant& tenant, const v1::ListTasksRequest& request);
  absl::Status DeleteTask(const Tenant& tenant, const v1::DeleteTaskRequest& request);
  // Calls `send` for each chunk of the file (the first carries version and
  // total_bytes); stops early with CANCELLED when `send` returns false.
  absl::Status ExportAdapter(const Tenant& tenant, const v1::ExportAdapterRequest& request,
                             const std::function<bool(const v1::ExportAdapterResponse&)>& send);
  // Creates task `task_id` from a complete adapter file.
  absl::StatusOr<v1::Task> ImportAdapter(const Tenant& tenant, const std::string& task_id, std::string bytes);
  int64_t max_adapter_bytes() const { return options_.max_adapter_bytes; }

  // --- predict ----------------------------------------------------------------
  absl::StatusOr<v1::PredictResponse> Predict(const Tenant& tenant, const v1::PredictRequest& request,
                                              absl::Time deadline);

  storage::Database& db() const { return *options_.db; }

 private:
  friend class DatasetUpload;
  explicit Backend(Options options) : options_(std::move(options)) {}
  // RESOURCE_EXHAUSTED when the tenant owns max_tasks tasks and `task_id`
  // is not one of them.
  absl::Status CheckTaskQuota(const Tenant& tenant, const std::string& task_id) const;
  absl::StatusOr<v1::Task> TaskView(const v1::TaskRecord& record, bool with_size) const;
  void EndUpload(const std::string& tenant, const std::string& dataset_id);

  Options options_;
  absl::Mutex uploads_mu_;  // protects uploads_
  // "tenant/dataset_id" of uploads in progress (so two streams cannot
  // interleave chunks under one id).
  std::set<std::string> uploads_ ABSL_GUARDED_BY(uploads_mu_);
};

// The API view of stored records.
v1::TrainingJob ToApi(const v1::JobRecord& job);
v1::Dataset ToApi(const v1::DatasetRecord& record);

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_BACKEND_H_
