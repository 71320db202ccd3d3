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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/dataset_file.h"
#include "common/sha256.h"
#include "common/usage_ledger.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"
#include "server/api/tenants.h"
#include "server/model/bert_encoder.h"
#include "server/serving/inference_engine.h"
#include "server/training/job_manager.h"
#include "server/training/trainer.h"
#include "storage/database.h"

namespace adapterd::api {

class Backend;

// One dataset being uploaded (the UploadDataset stream). Chunks are stored as
// they arrive, so memory stays bounded by one chunk; the dataset becomes
// visible only in Finish(). Destroying an unfinished upload removes what it
// stored. Not thread-safe: one stream drives it.
//
// An upload carries examples (AddChunk) or, when its metadata names a
// file_format, a file's bytes (AddFileBytes), which the server reads with
// its one reader (common/dataset_file.h DatasetFileReader: CSV and JSON
// Lines as they arrive, at most kMaxDatasetRecordBytes a record; a SQuAD
// document, or a file only its content identifies, whole, at most
// kMaxWholeDatasetFileBytes) and stores as chunks of examples, exactly as if
// they had been sent as examples.
class DatasetUpload {
 public:
  static constexpr size_t kMaxDatasetRecordBytes = size_t{1} << 20;
  static constexpr size_t kMaxWholeDatasetFileBytes = size_t{64} << 20;

  ~DatasetUpload();
  // Validates and stores one chunk: every example needs a non-empty, valid
  // UTF-8 text and label (INVALID_ARGUMENT naming the example's index in the
  // dataset); RESOURCE_EXHAUSTED when the tenant's datasets, stored and
  // being uploaded, would pass its max_dataset_bytes. INVALID_ARGUMENT in a
  // file upload.
  absl::Status AddChunk(const v1::DatasetChunk& chunk);
  // A piece of the file: its examples are checked and stored as AddChunk's
  // as their records complete. INVALID_ARGUMENT for an upload of examples,
  // and for the file's errors (its name and line, common/dataset_file.h).
  absl::Status AddFileBytes(std::string_view bytes);
  // Reads the rest of a file, then writes the metadata record (the dataset
  // becomes visible). INVALID_ARGUMENT for an empty dataset.
  absl::StatusOr<v1::Dataset> Finish();

 private:
  friend class Backend;
  DatasetUpload(Backend* backend, const Tenant* tenant, std::string dataset_id,
                const v1::UploadDatasetRequest::Metadata& metadata, UsageLedger::Hold bytes);
  // AddChunk's checks and storing, for both kinds of upload.
  absl::Status StoreChunk(const v1::DatasetChunk& chunk);
  // Gathers the file's examples into chunks of about 1 MiB (StoreChunk).
  absl::Status AddFileExamples(std::vector<v1::Example> examples);
  absl::Status FlushFileChunk();

  Backend* backend_;
  const Tenant* tenant_;
  std::string dataset_id_;
  std::string display_name_;
  UsageLedger::Hold bytes_;  // this upload's bytes in the tenant's quota
  storage::v1::DatasetRecord record_;
  int64_t next_chunk_ = 0;
  bool finished_ = false;
  std::unique_ptr<Sha256> sha_;
  // A file upload: its reader, the SHA-256 of its bytes, the examples not
  // stored yet.
  std::unique_ptr<DatasetFileReader> file_;
  std::unique_ptr<Sha256> file_sha_;
  v1::DatasetChunk file_chunk_;
  size_t file_chunk_bytes_ = 0;
};

// One adapter file being imported (the ImportAdapter stream), held in memory
// until it is whole. Each chunk is checked as it arrives: as soon as the
// file's header is in, its size and metadata are checked (larger than the
// server takes, or than any adapter of its bottleneck and labels for this
// encoder: RESOURCE_EXHAUSTED; another encoder or layout:
// FAILED_PRECONDITION; not an adapter file: INVALID_ARGUMENT) and the whole
// size is reserved against the server's import memory, before the rest of
// the file is received. An AdapterHub zip (ADAPTER_FORMAT_ADAPTERHUB) has no
// header to check early: it is held up to the server's adapter size limit
// and checked whole in Finish(). Not thread-safe: one stream drives it.
class AdapterImport {
 public:
  // Appends one chunk (see above); INVALID_ARGUMENT for bytes past the size
  // the header (or the metadata's total_bytes) announced.
  absl::Status AddChunk(std::string_view chunk);
  // Creates the task from the complete file (Backend::ImportAdapter's checks).
  absl::StatusOr<v1::Task> Finish();

 private:
  friend class Backend;
  AdapterImport(Backend* backend, const Tenant* tenant, std::string task_id, int64_t declared_bytes, bool adapterhub,
                UsageLedger::Hold memory);
  // Buffers `chunk` against the size limit and the import memory.
  absl::Status Buffer(std::string_view chunk);
  // The header is whole: size and metadata checks, reserve the file.
  absl::Status CheckHeader(uint64_t total_bytes, const std::map<std::string, std::string, std::less<>>& metadata,
                           uint64_t header_bytes);
  Backend* backend_;
  const Tenant* tenant_;
  std::string task_id_;
  int64_t declared_bytes_;  // the metadata's total_bytes; 0 = not given
  bool adapterhub_;         // an AdapterHub zip, not an adapterd file
  UsageLedger::Hold memory_;
  std::string bytes_;
  uint64_t expected_bytes_ = 0;  // 0 until the header is in
};

class Backend {
 public:
  struct Options {
    storage::Database* db = nullptr;              // not owned
    training::JobManager* jobs = nullptr;         // not owned
    serving::InferenceEngine* engine = nullptr;   // not owned
    const model::BertEncoder* encoder = nullptr;  // not owned
    // Largest adapter file ImportAdapter accepts.
    int64_t max_adapter_bytes = 512ll << 20;
    // Adapter file bytes all imports in progress may hold in memory at once.
    int64_t max_import_bytes_in_flight = 1ll << 30;
    // Client streams (UploadDataset, ImportAdapter) open at once: in total,
    // and per tenant.
    int64_t max_client_streams = 64;
    int64_t max_client_streams_per_tenant = 8;
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
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(const Tenant& tenant, const v1::ListDatasetsRequest& request);
  // FAILED_PRECONDITION (naming the job) while an unfinished job uses it.
  absl::Status DeleteDataset(const Tenant& tenant, const v1::DeleteDatasetRequest& request);

  // A slot for one client stream (UploadDataset or ImportAdapter), taken
  // before its first message is read and held until the call ends:
  // RESOURCE_EXHAUSTED past max_client_streams(_per_tenant), so idle streams
  // cannot pin a server thread each without bound.
  absl::StatusOr<UsageLedger::Hold> AdmitClientStream(const Tenant& tenant);

  // --- training jobs ----------------------------------------------------------
  absl::StatusOr<v1::TrainingJob> CreateTrainingJob(const Tenant& tenant, const v1::CreateTrainingJobRequest& request);
  absl::StatusOr<v1::TrainingJob> GetTrainingJob(const Tenant& tenant, const v1::GetTrainingJobRequest& request);
  absl::StatusOr<v1::ListTrainingJobsResponse> ListTrainingJobs(const Tenant& tenant,
                                                                const v1::ListTrainingJobsRequest& request);
  absl::StatusOr<v1::TrainingJob> CancelTrainingJob(const Tenant& tenant, const v1::CancelTrainingJobRequest& request);
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
  // total_bytes); stops early with CANCELLED when `send` returns false. With
  // format ADAPTER_FORMAT_ADAPTERHUB the file is a zip of the AdapterHub
  // directory (model::ExportAdapterHub: the task id as the adapter's name;
  // FAILED_PRECONDITION for trained LayerNorms unless the request accepts
  // their loss).
  absl::Status ExportAdapter(const Tenant& tenant, const v1::ExportAdapterRequest& request,
                             const std::function<bool(const v1::ExportAdapterResponse&)>& send);
  // Starts an import from its first message.
  absl::StatusOr<std::unique_ptr<AdapterImport>> BeginImport(const Tenant& tenant,
                                                             const v1::ImportAdapterRequest::Metadata& metadata);
  // Creates task `task_id` from a complete adapter file.
  absl::StatusOr<v1::Task> ImportAdapter(const Tenant& tenant, const std::string& task_id, std::string bytes);
  // Creates task `task_id` from a zip of an AdapterHub adapter directory
  // (model::ImportAdapterHub's mapping and refusals), stored as an adapterd
  // file recording where it came from. `memory` (the import's hold on the
  // import ledger) grows by the files' inflated size before they are
  // inflated: RESOURCE_EXHAUSTED past --max_import_bytes_in_flight.
  absl::StatusOr<v1::Task> ImportAdapterHub(const Tenant& tenant, const std::string& task_id, std::string zip,
                                            UsageLedger::Hold* memory);

  // --- predict ----------------------------------------------------------------
  absl::StatusOr<v1::PredictResponse> Predict(const Tenant& tenant, const v1::PredictRequest& request,
                                              absl::Time deadline);

  storage::Database& db() const { return *options_.db; }
  // The admission budgets the backend keeps, by the name the metrics give
  // them (adapterd_admission_*{budget}); valid for the backend's lifetime.
  std::vector<std::pair<std::string, const UsageLedger*>> ledgers() const {
    return {{"client_streams", &client_streams_}, {"import_bytes", &import_bytes_}, {"dataset_bytes", &dataset_bytes_}};
  }

 private:
  // The zip of the AdapterHub directory for a stored adapterd file of task
  // `task_id` (model::ExportAdapterHub's checks and refusals).
  absl::StatusOr<std::string> AdapterHubZip(const std::string& task_id, std::string_view adapter_file,
                                            bool accept_layer_norm_loss) const;
  // Stores `bytes` (an adapterd file of `config`) as version 1 of a new task.
  absl::StatusOr<v1::Task> CreateImportedTask(const Tenant& tenant, const std::string& task_id,
                                              const model::AdapterConfig& config,
                                              const std::string& encoder_fingerprint, std::string bytes);
  // Text i's result as the API's Prediction: the fields its kind set (serving::TextPrediction).
  static void AddPrediction(const serving::PredictResult& result, size_t i, const v1::PredictRequest& request,
                            v1::PredictResponse& out);
  friend class DatasetUpload;
  friend class AdapterImport;
  explicit Backend(Options options)
      : options_(std::move(options)),
        client_streams_("open upload and import streams", options_.max_client_streams),
        import_bytes_("bytes of adapter files being imported", options_.max_import_bytes_in_flight) {}
  absl::StatusOr<v1::Task> TaskView(const storage::v1::TaskRecord& record, bool with_size) const;
  // Bytes of text of the tenant's stored datasets.
  absl::StatusOr<int64_t> StoredDatasetBytes(const std::string& tenant) const;
  void EndUpload(const std::string& tenant, const std::string& dataset_id);

  Options options_;
  UsageLedger client_streams_;
  UsageLedger import_bytes_;
  // Bytes of text of each tenant's datasets: stored (read from storage at
  // each upload's start) and being uploaded.
  UsageLedger dataset_bytes_{"bytes of dataset text", UsageLedger::kUnlimited};
  absl::Mutex uploads_mu_;  // protects uploads_
  // "tenant/dataset_id" of uploads in progress (so two streams cannot
  // interleave chunks under one id).
  std::set<std::string> uploads_ ABSL_GUARDED_BY(uploads_mu_);
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_BACKEND_H_
