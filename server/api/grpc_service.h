// The thin gRPC layer of adapterd.v1.Adapterd (DESIGN.md section 8): each
// method authenticates the caller (TenantRegistry), makes one call into the
// Backend, maps the Status (grpc_status.h) and reports the call to an
// observer (metrics). No business logic lives here.
//
// Thread safety: thread-safe (gRPC's sync server calls methods concurrently).
// Ownership: the Backend and TenantRegistry are not owned and outlive the
// service.
#ifndef ADAPTERD_SERVER_API_GRPC_SERVICE_H_
#define ADAPTERD_SERVER_API_GRPC_SERVICE_H_

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/api/backend.h"
#include "server/api/tenants.h"

namespace adapterd::api {

// What one finished RPC reports (for metrics and logs).
struct RpcRecord {
  const char* method = "";
  std::string tenant;  // "" when authentication failed
  absl::StatusCode code = absl::StatusCode::kOk;
  double seconds = 0;
  int64_t texts = 0;  // Predict only
};

class GrpcService final : public v1::Adapterd::Service {
 public:
  struct Options {
    const TenantRegistry* tenants = nullptr;  // not owned
    std::function<void(const RpcRecord&)> on_rpc;
  };
  explicit GrpcService(Options options) : options_(std::move(options)) {}

  // Until a backend is set every call is UNAVAILABLE ("starting"): the
  // server answers health checks while the encoder loads. Not owned.
  void SetBackend(Backend* backend) { backend_.store(backend); }

  // While draining, every new call is UNAVAILABLE; calls in flight finish.
  void StartDraining() { draining_.store(true); }

  grpc::Status UploadDataset(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                             v1::Dataset* response) override;
  grpc::Status GetDataset(grpc::ServerContext* ctx, const v1::GetDatasetRequest* request,
                          v1::Dataset* response) override;
  grpc::Status CreateTrainingJob(grpc::ServerContext* ctx, const v1::CreateTrainingJobRequest* request,
                                 v1::TrainingJob* response) override;
  grpc::Status GetTrainingJob(grpc::ServerContext* ctx, const v1::GetTrainingJobRequest* request,
                              v1::TrainingJob* response) override;
  grpc::Status ListTrainingJobs(grpc::ServerContext* ctx, const v1::ListTrainingJobsRequest* request,
                                v1::ListTrainingJobsResponse* response) override;
  grpc::Status CancelTrainingJob(grpc::ServerContext* ctx, const v1::CancelTrainingJobRequest* request,
                                 v1::TrainingJob* response) override;
  grpc::Status WatchTrainingJob(grpc::ServerContext* ctx, const v1::WatchTrainingJobRequest* request,
                                grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) override;
  grpc::Status GetTask(grpc::ServerContext* ctx, const v1::GetTaskRequest* request, v1::Task* response) override;
  grpc::Status ListTasks(grpc::ServerContext* ctx, const v1::ListTasksRequest* request,
                         v1::ListTasksResponse* response) override;
  grpc::Status DeleteTask(grpc::ServerContext* ctx, const v1::DeleteTaskRequest* request,
                          v1::DeleteTaskResponse* response) override;
  grpc::Status ExportAdapter(grpc::ServerContext* ctx, const v1::ExportAdapterRequest* request,
                             grpc::ServerWriter<v1::ExportAdapterResponse>* writer) override;
  grpc::Status ImportAdapter(grpc::ServerContext* ctx, grpc::ServerReader<v1::ImportAdapterRequest>* reader,
                             v1::Task* response) override;
  grpc::Status Predict(grpc::ServerContext* ctx, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;

 private:
  // Authenticates, runs `body` with the tenant, records the call.
  grpc::Status Handle(const char* method, grpc::ServerContext* ctx,
                      const std::function<absl::Status(const Tenant&)>& body, int64_t texts = 0);

  Backend& backend() const { return *backend_.load(); }

  Options options_;
  std::atomic<Backend*> backend_{nullptr};
  std::atomic<bool> draining_{false};
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_GRPC_SERVICE_H_
