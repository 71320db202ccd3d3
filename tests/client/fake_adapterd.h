// A fake adapterd.v1.Adapterd service for the client tests, served by a real
// gRPC server on 127.0.0.1 port 0 together with gRPC's default
// grpc.health.v1 service.
//
// The fake records, per call, the method, the metadata and the deadline it
// received, and every request message; its answers are simple and fixed
// (documented per method below) or set by the test. Tests then assert on
// what the client sent.
//
// Thread safety: FakeAdapterd is safe to use from the test thread while gRPC
// threads run its handlers (all state is under one mutex). FakeServer is
// owned by one test.
// Lifetime: FakeServer owns the fake and the server; its destructor releases
// stalled handlers and shuts the server down (bounded).
#ifndef ADAPTERD_TESTS_CLIENT_FAKE_ADAPTERD_H_
#define ADAPTERD_TESTS_CLIENT_FAKE_ADAPTERD_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace adapterd::client::testing {

// What one call brought with it.
struct RecordedCall {
  std::string method;  // "Predict", "UploadDataset", ...
  std::multimap<std::string, std::string> metadata;
  // Time left until the call's deadline when the handler started;
  // absl::InfiniteDuration() when the call had none.
  absl::Duration deadline_left = absl::InfiniteDuration();

  // The single value of metadata `key`, nullopt when absent. A key sent
  // twice is reported as the two values joined with '|'.
  std::optional<std::string> Metadata(const std::string& key) const;
};

class FakeAdapterd final : public v1::Adapterd::Service {
 public:
  // --- What the fake saw ----------------------------------------------------
  std::vector<RecordedCall> calls() const;
  // Calls of `method`, in arrival order.
  std::vector<RecordedCall> CallsOf(const std::string& method) const;
  // Every message of every UploadDataset stream, one vector per stream.
  std::vector<std::vector<v1::UploadDatasetRequest>> uploads() const;
  std::vector<std::vector<v1::ImportAdapterRequest>> imports() const;
  std::vector<v1::PredictRequest> predict_requests() const;
  std::vector<v1::CreateTrainingJobRequest> create_requests() const;
  std::vector<v1::ListTrainingJobsRequest> list_jobs_requests() const;
  std::vector<v1::WatchTrainingJobRequest> watch_requests() const;

  // --- How it answers -------------------------------------------------------
  // Every later call of `method` ("" = every method) fails with `status`.
  void FailWith(const std::string& method, grpc::Status status);
  // Predict waits (at most 20 s) until Release() before answering.
  void StallPredict();
  // Lets stalled handlers go; they then answer CANCELLED.
  void Release();

  // GetDataset answers these; UploadDataset adds to them and answers
  // ALREADY_EXISTS for an id already there.
  void AddDataset(const v1::Dataset& dataset);
  // The ids of the datasets it holds (added, or stored by an upload).
  std::vector<std::string> dataset_ids() const;
  // GetTrainingJob answers `job` for its id.
  void AddJob(const v1::TrainingJob& job);
  // CreateTrainingJob answers `job` (with the request's task and request
  // ids); by default job "job-1", QUEUED.
  void SetCreatedJob(const v1::TrainingJob& job);
  // ListTrainingJobs: page i (page_token "" for 0, else "page-<i>") holds
  // `pages[i]`; next_page_token names the next page, "" on the last.
  void SetJobPages(std::vector<std::vector<v1::TrainingJob>> pages);
  // WatchTrainingJob writes these, in order, then ends OK.
  void SetWatchResponses(std::vector<v1::WatchTrainingJobResponse> responses);
  void AddTask(const v1::Task& task);
  // ExportAdapter streams `bytes` in chunks of `chunk_bytes`; the first
  // message says version `version` and total_bytes `announced_total`
  // (-1 = the true size).
  void SetExport(std::string bytes, int64_t version, size_t chunk_bytes, int64_t announced_total = -1);

  // Predict's answer, per text: label "positive" when the text contains
  // "good", else "negative"; score kScore; all_scores (when asked) in label
  // order [negative, positive]; version = the request's, or kCurrentVersion.
  // Tasks named after another kind answer as that kind (task_kind set):
  // "multi" labels ["positive" kScore, "short" 0.5], "regression" the
  // value 2.5, "ner" a PER entity at every "Ada" of the text (score kScore),
  // "qa" the first word of the context (kScore) then "no answer" (0.125).
  static constexpr float kScore = 0.875f;
  static constexpr int64_t kCurrentVersion = 3;

  // --- The service ------------------------------------------------------------
  grpc::Status UploadDataset(grpc::ServerContext* context, grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                             v1::Dataset* response) override;
  grpc::Status GetDataset(grpc::ServerContext* context, const v1::GetDatasetRequest* request,
                          v1::Dataset* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status DeleteDataset(grpc::ServerContext* context, const v1::DeleteDatasetRequest* request,
                             v1::DeleteDatasetResponse* response) override;
  grpc::Status CreateTrainingJob(grpc::ServerContext* context, const v1::CreateTrainingJobRequest* request,
                                 v1::TrainingJob* response) override;
  grpc::Status GetTrainingJob(grpc::ServerContext* context, const v1::GetTrainingJobRequest* request,
                              v1::TrainingJob* response) override;
  grpc::Status ListTrainingJobs(grpc::ServerContext* context, const v1::ListTrainingJobsRequest* request,
                                v1::ListTrainingJobsResponse* response) override;
  grpc::Status CancelTrainingJob(grpc::ServerContext* context, const v1::CancelTrainingJobRequest* request,
                                 v1::TrainingJob* response) override;
  grpc::Status WatchTrainingJob(grpc::ServerContext* context, const v1::WatchTrainingJobRequest* request,
                                grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) override;
  grpc::Status GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request, v1::Task* response) override;
  grpc::Status ListTasks(grpc::ServerContext* context, const v1::ListTasksRequest* request,
                         v1::ListTasksResponse* response) override;
  grpc::Status DeleteTask(grpc::ServerContext* context, const v1::DeleteTaskRequest* request,
                          v1::DeleteTaskResponse* response) override;
  grpc::Status ExportAdapter(grpc::ServerContext* context, const v1::ExportAdapterRequest* request,
                             grpc::ServerWriter<v1::ExportAdapterResponse>* writer) override;
  grpc::Status ImportAdapter(grpc::ServerContext* context, grpc::ServerReader<v1::ImportAdapterRequest>* reader,
                             v1::Task* response) override;
  grpc::Status Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;

 private:
  // Records the call; returns the error set by FailWith for it, if any.
  std::optional<grpc::Status> Record(const std::string& method, grpc::ServerContext* context) ABSL_LOCKS_EXCLUDED(mu_);

  // Protects everything below.
  mutable absl::Mutex mu_;
  std::vector<RecordedCall> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, grpc::Status> errors_ ABSL_GUARDED_BY(mu_);
  bool stall_predict_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::vector<v1::UploadDatasetRequest>> uploads_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<v1::ImportAdapterRequest>> imports_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::PredictRequest> predicts_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::CreateTrainingJobRequest> creates_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ListTrainingJobsRequest> list_jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WatchTrainingJobRequest> watches_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Dataset> datasets_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::TrainingJob> jobs_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::TrainingJob> created_job_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<v1::TrainingJob>> job_pages_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::WatchTrainingJobResponse> watch_responses_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, v1::Task> tasks_ ABSL_GUARDED_BY(mu_);
  std::string export_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t export_version_ ABSL_GUARDED_BY(mu_) = 0;
  size_t export_chunk_bytes_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t export_announced_total_ ABSL_GUARDED_BY(mu_) = -1;
};

class FakeServer {
 public:
  // Builds and starts the server on 127.0.0.1:0.
  static absl::StatusOr<std::unique_ptr<FakeServer>> Start();
  ~FakeServer();
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  int port() const { return port_; }
  std::string address() const;  // "127.0.0.1:<port>"
  FakeAdapterd& fake() { return fake_; }
  // The overall ("") status of the health service.
  void SetServing(bool serving);

 private:
  FakeServer() = default;
  FakeAdapterd fake_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace adapterd::client::testing

#endif  // ADAPTERD_TESTS_CLIENT_FAKE_ADAPTERD_H_
