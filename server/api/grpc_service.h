// The thin gRPC layer of adapterd.v1.Adapterd (docs/ARCHITECTURE.md, "Conventions in force"): each
// method authenticates the caller (TenantRegistry), makes one call into the
// Backend, maps the Status (grpc_status.h) and reports the call to an
// observer (metrics). No business logic lives here. On a task-sharded
// replica (--peers), list calls go to the ShardFanout instead of the
// Backend, and a call about a task (or a job or dataset id that carries
// one) is FAILED_PRECONDITION unless its x-task-id metadata names that task
// (common/routing.h: a call the router sent to the wrong replica would
// answer for, or create, a second copy of the task there); uploads must
// name their task.
//
// Client streams take a slot (Backend::AdmitClientStream) before their first
// message is read, so idle streams cannot hold server threads without bound.
//
// Client streams (UploadDataset, ImportAdapter) commit only when the client
// ends the stream cleanly (half-close). A stream that ends any other way
// (the client cancels, dies or runs out of deadline, or the server cancels
// it at the end of a drain) stores nothing and answers CANCELLED.
//
// Draining (shutdown): new calls are UNAVAILABLE at once; open watches end
// with UNAVAILABLE; client streams in flight may finish until the streams
// deadline, after which their next message ends them with UNAVAILABLE
// (nothing stored); WaitForIdle() lets the server wait for the calls admitted
// before the drain (calls refused during it are not counted: they end at
// once and must not keep the server from going idle).
//
// Thread safety: thread-safe (gRPC's sync server calls methods concurrently).
// Ownership: the Backend and TenantRegistry are not owned and outlive the
// service.
#ifndef ADAPTERD_SERVER_API_GRPC_SERVICE_H_
#define ADAPTERD_SERVER_API_GRPC_SERVICE_H_

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "server/api/backend.h"
#include "server/api/rpc_record.h"
#include "server/api/shard_fanout.h"
#include "server/api/tenants.h"

namespace adapterd::api {

class GrpcService final : public v1::Adapterd::Service {
 public:
  struct Options {
    const TenantRegistry* tenants = nullptr;  // not owned
    std::function<void(const RpcRecord&)> on_rpc;
    // Set on a task-sharded replica (--peers): list calls answer for every
    // replica (shard_fanout.h). Not owned; null = this server is the whole.
    const ShardFanout* fanout = nullptr;
  };
  explicit GrpcService(Options options) : options_(std::move(options)) {}

  // Until a backend is set every call is UNAVAILABLE ("starting"): the
  // server answers health checks while the encoder loads. Not owned.
  void SetBackend(Backend* backend) { backend_.store(backend); }

  // Starts the drain (see above). Client streams in flight may go on until
  // `streams_deadline`. Idempotent: the first deadline holds.
  void StartDraining(absl::Time streams_deadline);
  // Blocks until no call admitted before the drain is in flight, or
  // `deadline` passes; true when idle.
  bool WaitForIdle(absl::Time deadline);
  // Calls refused from now on wait until `answer_at` before they answer
  // UNAVAILABLE (Server::Shutdown holds clients back while gRPC stops).
  void HoldRefusalsUntil(absl::Time answer_at);

  grpc::Status UploadDataset(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                             v1::Dataset* response) override;
  grpc::Status GetDataset(grpc::ServerContext* ctx, const v1::GetDatasetRequest* request,
                          v1::Dataset* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest* request,
                            v1::ListDatasetsResponse* response) override;
  grpc::Status DeleteDataset(grpc::ServerContext* ctx, const v1::DeleteDatasetRequest* request,
                             v1::DeleteDatasetResponse* response) override;
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
  // True when a list call must answer for every replica (a --peers replica,
  // and the call is not itself a replica's fan-out).
  bool FansOut(const grpc::ServerContext& ctx) const {
    return options_.fanout != nullptr && !options_.fanout->IsShardLocalCall(ctx);
  }
  // On a task-sharded replica, OK only when the call's x-task-id names
  // `task` ("" = the call names no task: nothing to check).
  absl::Status CheckRoute(const grpc::ServerContext& ctx, std::string_view task) const;

  // OK, or why a streaming call must stop now: CANCELLED when the client
  // cancelled (or is gone, or its deadline passed), UNAVAILABLE when the
  // server is draining (for client streams: past the streams deadline).
  absl::Status StopReason(grpc::ServerContext* ctx, bool client_stream) const;
  // After Read() returned false: OK only if the client half-closed.
  absl::Status CheckCleanEnd(grpc::ServerContext* ctx, const char* what) const;

  Options options_;
  std::atomic<Backend*> backend_{nullptr};
  std::atomic<bool> draining_{false};

  mutable absl::Mutex mu_;  // protects in_flight_ and the deadlines
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time streams_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time answer_refusals_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace adapterd::api

#endif  // ADAPTERD_SERVER_API_GRPC_SERVICE_H_
