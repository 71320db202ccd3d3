#include "server/api/grpc_service.h"

#include <chrono>
#include <optional>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/api_util.h"
#include "common/routing.h"
#include "common/status_macros.h"
#include "server/api/grpc_status.h"
#include "server/api/ids.h"
#include "server/api/request_checks.h"

namespace adapterd::api {
namespace {

// The absl::Time of a call's deadline (InfiniteFuture when none was set).
absl::Time Deadline(const grpc::ServerContext* ctx) {
  const auto d = ctx->deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

absl::Status ShuttingDown() { return absl::UnavailableError("adapterd is shutting down; retry the call"); }

// The value of metadata `key`, or nullopt.
std::optional<std::string> Metadata(const grpc::ServerContext& ctx, std::string_view key) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(grpc::string_ref(key.data(), key.size()));
  if (it == md.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

void GrpcService::StartDraining(absl::Time streams_deadline) {
  absl::MutexLock lock(&mu_);
  if (draining_.load()) return;
  streams_deadline_ = streams_deadline;
  draining_.store(true);
}

void GrpcService::HoldRefusalsUntil(absl::Time answer_at) {
  absl::MutexLock lock(&mu_);
  answer_refusals_at_ = answer_at;
}

bool GrpcService::WaitForIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

absl::Status GrpcService::StopReason(grpc::ServerContext* ctx, bool client_stream) const {
  if (ctx->IsCancelled()) return absl::CancelledError("the call was cancelled");
  if (!draining_.load()) return absl::OkStatus();
  if (client_stream) {
    absl::MutexLock lock(&mu_);
    if (absl::Now() < streams_deadline_) return absl::OkStatus();
  }
  return ShuttingDown();
}

absl::Status GrpcService::CheckRoute(const grpc::ServerContext& ctx, std::string_view task) const {
  // A lone server serves every task; an empty or malformed id is the
  // request checks' to refuse.
  if (options_.fanout == nullptr || !ValidateId("task_id", std::string(task)).ok()) return absl::OkStatus();
  const std::optional<std::string> header = Metadata(ctx, kTaskRoutingHeader);
  return CheckRoutingHeader(task, header.has_value() ? &*header : nullptr);
}

absl::Status GrpcService::CheckCleanEnd(grpc::ServerContext* ctx, const char* what) const {
  // gRPC's sync Read() returns false both for a half-close and for a
  // cancelled call; since gRPC 1.41 a failed read marks the context
  // cancelled before Read() returns, so this check is not racy.
  if (ctx->IsCancelled()) {
    return absl::CancelledError(
        absl::StrCat("the ", what, " stream ended before the client closed it; nothing was stored"));
  }
  return absl::OkStatus();
}

grpc::Status GrpcService::Handle(const char* method, grpc::ServerContext* ctx,
                                 const std::function<absl::Status(const Tenant&)>& body, int64_t texts) {
  const absl::Time start = absl::Now();
  // A call is admitted, and counted in flight, only before the drain starts:
  // the drain waits for admitted calls alone, so calls refused during it
  // cannot keep the server from going idle.
  bool admitted = false;
  absl::Time answer_at = absl::InfinitePast();
  {
    absl::MutexLock lock(&mu_);
    admitted = !draining_.load();
    if (admitted) ++in_flight_;
    answer_at = answer_refusals_at_;
  }
  RpcRecord record;
  record.method = method;
  record.texts = texts;
  if (Metadata(*ctx, kProtocolMetadata) == "http") record.protocol = "http";
  absl::Status status;
  if (!admitted) {
    absl::SleepFor(answer_at - absl::Now());  // no-op unless held (bounded)
    status = ShuttingDown();
  } else if (backend_.load() == nullptr) {
    status = absl::UnavailableError("adapterd is starting: the encoder is loading");
  } else {
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    std::string auth;
    if (it != md.end()) auth.assign(it->second.data(), it->second.size());
    absl::StatusOr<std::shared_ptr<const Tenant>> tenant =
        options_.tenants->Authenticate(it == md.end() ? nullptr : &auth);
    if (!tenant.ok()) {
      status = tenant.status();
    } else {
      record.tenant = (*tenant)->id();
      status = body(**tenant);
    }
  }
  record.code = status.code();
  record.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (options_.on_rpc) options_.on_rpc(record);
  if (admitted) {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
  return ToGrpcStatus(status);
}

grpc::Status GrpcService::UploadDataset(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                                        v1::Dataset* response) {
  return Handle("UploadDataset", ctx, [&](const Tenant& tenant) -> absl::Status {
    // Before the first read: an idle stream holds a server thread.
    ASSIGN_OR_RETURN(UsageLedger::Hold slot, backend().AdmitClientStream(tenant));
    // A server-assigned id carries the task the upload is made for, so later
    // calls naming the dataset can be routed (common/routing.h).
    const std::string route_task = Metadata(*ctx, kTaskRoutingHeader).value_or("");
    if (options_.fanout != nullptr && route_task.empty()) {
      // The dataset would land on whichever replica the router picks, where
      // no job for its task can read it.
      return absl::FailedPreconditionError(absl::StrCat(
          "this server is one of several task-sharded replicas: upload a dataset for the task that will train on it, "
          "with the metadata ",
          std::string(kTaskRoutingHeader), ": <task_id> (adapterctl datasets upload --task)"));
    }
    v1::UploadDatasetRequest msg;
    if (!reader->Read(&msg)) return absl::InvalidArgumentError("the upload stream is empty");
    if (!msg.has_metadata()) return absl::InvalidArgumentError("the first message must carry metadata");
    ASSIGN_OR_RETURN(std::unique_ptr<DatasetUpload> upload, backend().BeginUpload(tenant, msg.metadata(), route_task));
    while (reader->Read(&msg)) {
      RETURN_IF_ERROR(StopReason(ctx, /*client_stream=*/true));
      switch (msg.payload_case()) {
        case v1::UploadDatasetRequest::kChunk:
          RETURN_IF_ERROR(upload->AddChunk(msg.chunk()));
          break;
        case v1::UploadDatasetRequest::kFileBytes:
          RETURN_IF_ERROR(upload->AddFileBytes(msg.file_bytes()));
          break;
        default:
          return absl::InvalidArgumentError("only the first message may carry metadata");
      }
    }
    RETURN_IF_ERROR(CheckCleanEnd(ctx, "upload"));
    ASSIGN_OR_RETURN(*response, upload->Finish());
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::GetDataset(grpc::ServerContext* ctx, const v1::GetDatasetRequest* request,
                                     v1::Dataset* response) {
  return Handle("GetDataset", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, RoutingTaskOf(request->dataset_id())));
    ASSIGN_OR_RETURN(*response, backend().GetDataset(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::ListDatasets(grpc::ServerContext* ctx, const v1::ListDatasetsRequest* request,
                                       v1::ListDatasetsResponse* response) {
  return Handle("ListDatasets", ctx, [&](const Tenant& t) -> absl::Status {
    if (FansOut(*ctx)) {
      ASSIGN_OR_RETURN(*response, options_.fanout->ListDatasets(*ctx, t.id(), *request));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(*response, backend().ListDatasets(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::DeleteDataset(grpc::ServerContext* ctx, const v1::DeleteDatasetRequest* request,
                                        v1::DeleteDatasetResponse*) {
  return Handle("DeleteDataset", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, RoutingTaskOf(request->dataset_id())));
    return backend().DeleteDataset(t, *request);
  });
}

grpc::Status GrpcService::CreateTrainingJob(grpc::ServerContext* ctx, const v1::CreateTrainingJobRequest* request,
                                            v1::TrainingJob* response) {
  return Handle("CreateTrainingJob", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, request->task_id()));
    ASSIGN_OR_RETURN(*response, backend().CreateTrainingJob(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::GetTrainingJob(grpc::ServerContext* ctx, const v1::GetTrainingJobRequest* request,
                                         v1::TrainingJob* response) {
  return Handle("GetTrainingJob", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, RoutingTaskOf(request->job_id())));
    ASSIGN_OR_RETURN(*response, backend().GetTrainingJob(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::ListTrainingJobs(grpc::ServerContext* ctx, const v1::ListTrainingJobsRequest* request,
                                           v1::ListTrainingJobsResponse* response) {
  return Handle("ListTrainingJobs", ctx, [&](const Tenant& t) -> absl::Status {
    if (FansOut(*ctx)) {
      ASSIGN_OR_RETURN(*response, options_.fanout->ListTrainingJobs(*ctx, t.id(), *request));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(*response, backend().ListTrainingJobs(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::CancelTrainingJob(grpc::ServerContext* ctx, const v1::CancelTrainingJobRequest* request,
                                            v1::TrainingJob* response) {
  return Handle("CancelTrainingJob", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, RoutingTaskOf(request->job_id())));
    ASSIGN_OR_RETURN(*response, backend().CancelTrainingJob(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::WatchTrainingJob(grpc::ServerContext* ctx, const v1::WatchTrainingJobRequest* request,
                                           grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) {
  return Handle("WatchTrainingJob", ctx, [&](const Tenant& t) {
    RETURN_IF_ERROR(CheckRoute(*ctx, RoutingTaskOf(request->job_id())));
    return backend().WatchTrainingJob(
        t, *request, [&](const v1::WatchTrainingJobResponse& msg) { return writer->Write(msg); },
        [&] { return StopReason(ctx, /*client_stream=*/false); });
  });
}

grpc::Status GrpcService::GetTask(grpc::ServerContext* ctx, const v1::GetTaskRequest* request, v1::Task* response) {
  return Handle("GetTask", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, request->task_id()));
    ASSIGN_OR_RETURN(*response, backend().GetTask(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::ListTasks(grpc::ServerContext* ctx, const v1::ListTasksRequest* request,
                                    v1::ListTasksResponse* response) {
  return Handle("ListTasks", ctx, [&](const Tenant& t) -> absl::Status {
    if (FansOut(*ctx)) {
      ASSIGN_OR_RETURN(*response, options_.fanout->ListTasks(*ctx, t.id(), *request));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(*response, backend().ListTasks(t, *request));
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::DeleteTask(grpc::ServerContext* ctx, const v1::DeleteTaskRequest* request,
                                     v1::DeleteTaskResponse*) {
  return Handle("DeleteTask", ctx, [&](const Tenant& t) -> absl::Status {
    RETURN_IF_ERROR(CheckRoute(*ctx, request->task_id()));
    return backend().DeleteTask(t, *request);
  });
}

grpc::Status GrpcService::ExportAdapter(grpc::ServerContext* ctx, const v1::ExportAdapterRequest* request,
                                        grpc::ServerWriter<v1::ExportAdapterResponse>* writer) {
  return Handle("ExportAdapter", ctx, [&](const Tenant& t) {
    RETURN_IF_ERROR(CheckRoute(*ctx, request->task_id()));
    return backend().ExportAdapter(t, *request,
                                   [&](const v1::ExportAdapterResponse& msg) { return writer->Write(msg); });
  });
}

grpc::Status GrpcService::ImportAdapter(grpc::ServerContext* ctx, grpc::ServerReader<v1::ImportAdapterRequest>* reader,
                                        v1::Task* response) {
  return Handle("ImportAdapter", ctx, [&](const Tenant& tenant) -> absl::Status {
    ASSIGN_OR_RETURN(UsageLedger::Hold slot, backend().AdmitClientStream(tenant));
    v1::ImportAdapterRequest msg;
    if (!reader->Read(&msg)) return absl::InvalidArgumentError("the import stream is empty");
    if (!msg.has_metadata()) return absl::InvalidArgumentError("the first message must carry metadata");
    RETURN_IF_ERROR(CheckImportAdapterMetadata(msg.metadata()));
    RETURN_IF_ERROR(CheckRoute(*ctx, msg.metadata().task_id()));
    ASSIGN_OR_RETURN(std::unique_ptr<AdapterImport> import, backend().BeginImport(tenant, msg.metadata()));
    while (reader->Read(&msg)) {
      RETURN_IF_ERROR(StopReason(ctx, /*client_stream=*/true));
      if (!msg.has_chunk()) return absl::InvalidArgumentError("only the first message may carry metadata");
      RETURN_IF_ERROR(import->AddChunk(msg.chunk()));
    }
    RETURN_IF_ERROR(CheckCleanEnd(ctx, "import"));
    ASSIGN_OR_RETURN(*response, import->Finish());
    return absl::OkStatus();
  });
}

grpc::Status GrpcService::Predict(grpc::ServerContext* ctx, const v1::PredictRequest* request,
                                  v1::PredictResponse* response) {
  return Handle(
      "Predict", ctx,
      [&](const Tenant& t) -> absl::Status {
        RETURN_IF_ERROR(CheckRoute(*ctx, request->task_id()));
        ASSIGN_OR_RETURN(*response, backend().Predict(t, *request, Deadline(ctx)));
        return absl::OkStatus();
      },
      request->texts_size());
}

}  // namespace adapterd::api
