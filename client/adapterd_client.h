// AdapterdClient: a blocking C++ client for the adapterd.v1.Adapterd gRPC API
// (proto/adapterd/v1/adapterd_service.proto) and grpc.health.v1.Health/Check.
//
// Contract:
// - One method per RPC. Every method returns absl::Status / absl::StatusOr;
//   a failed call's grpc::Status becomes an absl::Status with the same code
//   and message (FromGrpcStatus). Nothing throws.
// - Metadata: every call sends `authorization: Bearer <api_key>` when
//   Options::api_key is set, and `x-task-id: <task>` whenever the call has a
//   task id (Predict, CreateTrainingJob, GetTask, DeleteTask, ExportAdapter,
//   ImportAdapter, ListTrainingJobs with a task filter, UploadDataset when the
//   caller names the task it uploads for, and the job and dataset calls
//   (GetDataset, DeleteDataset and the job calls): the caller's hint, or
//   else the task a server-minted id carries,
//   common/routing.h), so a router can shard by task. A task id that is not
//   printable ASCII is not sent as metadata (the server rejects the request
//   field itself).
// - Deadlines: unary and upload/download calls get Options::default_deadline;
//   WatchTrainingJob gets Options::watch_deadline (none by default, since a
//   training job can run for hours).
// - Streaming: UploadDataset sends the metadata message first, then the
//   examples in chunks of at most Options::upload_chunk_bytes (serialized
//   size; a single larger example goes alone). ImportAdapter sends the adapter
//   file in chunks of the same size; ExportAdapter concatenates the server's
//   chunks and checks the total size.
//
// Thread safety: an AdapterdClient is immutable after Create() and safe to use
// from many threads at once (each call has its own grpc::ClientContext). The
// callback of WatchTrainingJob runs on the calling thread.
//
// Ownership: the client owns its channel; destroying it while a call runs on
// another thread is not allowed.
#ifndef ADAPTERD_CLIENT_ADAPTERD_CLIENT_H_
#define ADAPTERD_CLIENT_ADAPTERD_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/api_util.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace adapterd::client {

// Maps a grpc::Status to an absl::Status with the same code and message
// (common/api_util.h; the client's only conversion between the two).
using ::adapterd::FromGrpcStatus;

// TLS for a client channel (common/tls.h checks the files).
struct TlsClientFiles {
  // PEM CA certificate(s) the server's certificate must chain to; empty =
  // the system's roots.
  std::string ca_file;
  // Client certificate and key for servers that require them (mutual TLS);
  // both or neither.
  std::string cert_file;
  std::string key_file;
};
// gRPC SSL channel credentials from `files`. INVALID_ARGUMENT (naming the
// file) for a file without PEM certificates, a key that does not match, a
// certificate without its key; NOT_FOUND for a missing file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(const TlsClientFiles& files);

// grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class ServingStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};
std::string_view ServingStatusName(ServingStatus status);

// An exported adapter file.
struct ExportedAdapter {
  // The version exported (resolved by the server when 0 was asked for).
  int64_t version = 0;
  // The whole adapter file (docs/ADAPTER_FORMAT.md), or the zip of the
  // AdapterHub directory.
  std::string bytes;
};

// What ExportAdapter asks for besides the task and version
// (ExportAdapterRequest's fields of the same names).
struct ExportAdapterOptions {
  v1::AdapterFormat format = v1::ADAPTER_FORMAT_UNSPECIFIED;
  bool accept_layer_norm_loss = false;
};

class AdapterdClient {
 public:
  struct Options {
    // host:port (or any gRPC target URI) of the server.
    std::string server = "127.0.0.1:8500";
    // API key sent as `authorization: Bearer <key>`; empty = none
    // (single-tenant servers need none).
    std::string api_key;
    // Deadline of every call except WatchTrainingJob. Must be positive;
    // absl::InfiniteDuration() = none.
    absl::Duration default_deadline = absl::Seconds(30);
    // Deadline of WatchTrainingJob; absl::InfiniteDuration() = none.
    absl::Duration watch_deadline = absl::InfiniteDuration();
    // Largest message the client accepts / sends. Upload chunks stay far
    // below this.
    int max_receive_message_bytes = 64 << 20;
    int max_send_message_bytes = 64 << 20;
    // Upper bound on the serialized size of one UploadDataset chunk and of
    // one ImportAdapter chunk.
    size_t upload_chunk_bytes = 1 << 20;
    // Wait for the channel to connect instead of failing fast with
    // UNAVAILABLE (bounded by the deadline).
    bool wait_for_ready = false;
    // Channel credentials; null = insecure (plaintext) unless `tls` is set.
    // TlsChannelCredentials() makes them from PEM files.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // With TLS: the name the server's certificate must carry, when it is not
    // the host in `server` (e.g. connecting by IP address). Empty = the host.
    std::string tls_server_name;
  };

  // Validates `options` (INVALID_ARGUMENT on an empty server, a non-positive
  // deadline or chunk size, or an API key that is not printable ASCII) and
  // creates the channel. Connecting is lazy: an unreachable server shows up as
  // UNAVAILABLE on the first call.
  static absl::StatusOr<std::unique_ptr<AdapterdClient>> Create(Options options);

  AdapterdClient(const AdapterdClient&) = delete;
  AdapterdClient& operator=(const AdapterdClient&) = delete;

  const Options& options() const { return options_; }

  // --- Datasets -------------------------------------------------------------
  // Streams `examples` (metadata first, then chunks). Returns the stored
  // dataset once the server has committed it. `task_id_hint`: the task the
  // dataset is for (sent as x-task-id, so it lands on that task's replica,
  // and a server-assigned id carries it).
  absl::StatusOr<v1::Dataset> UploadDataset(const v1::UploadDatasetRequest::Metadata& metadata,
                                            std::span<const v1::Example> examples,
                                            std::string_view task_id_hint = {}) const;
  // Streams a dataset file's bytes (metadata first, with its file_format
  // and file_name, then pieces of at most upload_chunk_bytes), which the
  // server reads with its one reader of dataset files. As UploadDataset.
  absl::StatusOr<v1::Dataset> UploadDatasetFile(const v1::UploadDatasetRequest::Metadata& metadata,
                                                std::string_view bytes, std::string_view task_id_hint = {}) const;
  // `task_id_hint` as for UploadDataset; default: the task a server-assigned
  // id carries.
  absl::StatusOr<v1::Dataset> GetDataset(const std::string& dataset_id, std::string_view task_id_hint = {}) const;
  absl::StatusOr<v1::ListDatasetsResponse> ListDatasets(const v1::ListDatasetsRequest& request) const;
  // `task_id_hint` as for GetDataset.
  absl::Status DeleteDataset(const std::string& dataset_id, std::string_view task_id_hint = {}) const;

  // --- Training jobs --------------------------------------------------------
  absl::StatusOr<v1::TrainingJob> CreateTrainingJob(const v1::CreateTrainingJobRequest& request) const;
  // `task_id_hint`, when non-empty, is sent as x-task-id (routing only).
  absl::StatusOr<v1::TrainingJob> GetTrainingJob(const std::string& job_id, std::string_view task_id_hint = {}) const;
  absl::StatusOr<v1::ListTrainingJobsResponse> ListTrainingJobs(const v1::ListTrainingJobsRequest& request) const;
  absl::StatusOr<v1::TrainingJob> CancelTrainingJob(const std::string& job_id,
                                                    std::string_view task_id_hint = {}) const;

  // Called for every message of a watch stream. Return true to keep
  // watching, false to stop (the call is then cancelled and
  // WatchTrainingJob returns OK).
  using WatchCallback = std::function<bool(const v1::WatchTrainingJobResponse&)>;
  // Watches `request.job_id` and calls `on_response` per message, on this
  // thread. Returns OK when the server ends the stream (the job reached a
  // terminal state) or the callback asked to stop; the stream's error
  // otherwise.
  absl::Status WatchTrainingJob(const v1::WatchTrainingJobRequest& request, const WatchCallback& on_response,
                                std::string_view task_id_hint = {}) const;

  // --- Tasks ----------------------------------------------------------------
  absl::StatusOr<v1::Task> GetTask(const std::string& task_id) const;
  absl::StatusOr<v1::ListTasksResponse> ListTasks(const v1::ListTasksRequest& request) const;
  absl::Status DeleteTask(const std::string& task_id) const;
  // `version` 0 = the current version. DATA_LOSS if the received bytes do not
  // add up to the size the server announced.
  absl::StatusOr<ExportedAdapter> ExportAdapter(const std::string& task_id, int64_t version = 0,
                                                const ExportAdapterOptions& options = {}) const;
  // Creates task `task_id` from an adapter file (its size sent first, so a
  // file the server would not take is refused before it is sent): an
  // adapterd file, or with ADAPTER_FORMAT_ADAPTERHUB a zip of an AdapterHub
  // adapter directory (ZipAdapterHubDirectory).
  absl::StatusOr<v1::Task> ImportAdapter(const std::string& task_id, std::string_view adapter_bytes,
                                         v1::AdapterFormat format = v1::ADAPTER_FORMAT_UNSPECIFIED) const;

  // --- Predict --------------------------------------------------------------
  absl::StatusOr<v1::PredictResponse> Predict(const v1::PredictRequest& request) const;

  // --- Health ---------------------------------------------------------------
  // grpc.health.v1.Health/Check for `service` ("" = the whole server).
  // A server without the health service answers UNIMPLEMENTED.
  absl::StatusOr<ServingStatus> Health(const std::string& service = "") const;

 private:
  AdapterdClient(Options options, std::shared_ptr<grpc::Channel> channel);

  // Fills deadline and metadata of a call's context.
  void PrepareContext(grpc::ClientContext& context, std::string_view task_id, absl::Duration deadline) const;
  // One UploadDataset stream: the metadata, then what `send_payload` writes
  // through the function it is given (false: the stream broke).
  absl::StatusOr<v1::Dataset> Upload(
      const v1::UploadDatasetRequest::Metadata& metadata, std::string_view task_id_hint,
      const std::function<bool(const std::function<bool(const v1::UploadDatasetRequest&)>&)>& send_payload) const;

  const Options options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Adapterd::Stub> stub_;
};

// Plans UploadDataset's chunks: consecutive [begin, end) index ranges of
// `examples` whose serialized DatasetChunk stays at most `max_chunk_bytes`
// (an example larger than that gets a chunk of its own). Every example lands
// in exactly one range, in order; no range is empty. Exposed for tests.
std::vector<std::pair<size_t, size_t>> PlanChunks(std::span<const v1::Example> examples, size_t max_chunk_bytes);

}  // namespace adapterd::client

#endif  // ADAPTERD_CLIENT_ADAPTERD_CLIENT_H_
