#include "client/adapterd_client.h"

#include <algorithm>

#include <chrono>
#include <utility>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/routing.h"
#include "common/tls.h"

namespace adapterd::client {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

// Printable ASCII is what a plain (non "-bin") gRPC metadata value may hold.
bool IsPrintableAscii(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Bytes a length-delimited field of `size` bytes adds to its parent message:
// one tag byte plus the varint length.
size_t LengthDelimitedFieldSize(size_t size) {
  size_t varint = 1;
  for (size_t v = size; v >= 0x80; v >>= 7) ++varint;
  return 1 + varint + size;
}

// --- Minimal protobuf wire format for grpc.health.v1 (no .proto is shipped) --

// HealthCheckRequest { string service = 1; }
std::string EncodeHealthCheckRequest(const std::string& service) {
  if (service.empty()) return "";  // proto3 omits default values
  std::string out;
  out.push_back(static_cast<char>((1 << 3) | 2));
  for (size_t v = service.size();; v >>= 7) {
    if (v < 0x80) {
      out.push_back(static_cast<char>(v));
      break;
    }
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
  }
  out += service;
  return out;
}

bool ReadVarint(std::string_view& in, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto byte = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// HealthCheckResponse { ServingStatus status = 1; }; unknown fields skipped.
absl::StatusOr<ServingStatus> DecodeHealthCheckResponse(std::string_view in) {
  const absl::Status malformed = absl::InternalError("malformed HealthCheckResponse");
  uint64_t status = 0;
  while (!in.empty()) {
    uint64_t tag = 0;
    if (!ReadVarint(in, tag)) return malformed;
    const uint64_t field = tag >> 3;
    const uint64_t wire_type = tag & 7;
    uint64_t value = 0;
    switch (wire_type) {
      case 0:
        if (!ReadVarint(in, value)) return malformed;
        if (field == 1) status = value;
        continue;
      case 1:
      case 5: {
        const size_t n = wire_type == 1 ? 8 : 4;
        if (in.size() < n) return malformed;
        in.remove_prefix(n);
        continue;
      }
      case 2:
        if (!ReadVarint(in, value) || value > in.size()) {
          return malformed;
        }
        in.remove_prefix(static_cast<size_t>(value));
        continue;
      default:
        return malformed;
    }
  }
  // A status this client does not know is reported as UNKNOWN.
  return status <= 3 ? static_cast<ServingStatus>(status) : ServingStatus::kUnknown;
}

}  // namespace

std::string_view ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

std::vector<std::pair<size_t, size_t>> PlanChunks(std::span<const v1::Example> examples, size_t max_chunk_bytes) {
  std::vector<std::pair<size_t, size_t>> ranges;
  size_t begin = 0;
  size_t bytes = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    const size_t size = LengthDelimitedFieldSize(examples[i].ByteSizeLong());
    if (i > begin && bytes + size > max_chunk_bytes) {
      ranges.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += size;
  }
  if (begin < examples.size()) ranges.emplace_back(begin, examples.size());
  return ranges;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsChannelCredentials(const TlsClientFiles& files) {
  TlsFiles tls;
  tls.ca_file = files.ca_file;
  tls.cert_file = files.cert_file;
  tls.key_file = files.key_file;
  tls.ca_flag = "TLS CA file";
  tls.cert_flag = "TLS client certificate";
  tls.key_flag = "TLS client key";
  absl::StatusOr<TlsPem> pem = LoadTlsPem(tls);
  if (!pem.ok()) return pem.status();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem->ca_certs;  // "" = gRPC's default roots
  ssl.pem_cert_chain = pem->cert_chain;
  ssl.pem_private_key = pem->private_key;
  return grpc::SslCredentials(ssl);
}

absl::StatusOr<std::unique_ptr<AdapterdClient>> AdapterdClient::Create(Options options) {
  if (options.server.empty()) return absl::InvalidArgumentError("no server address given");
  if (options.default_deadline <= absl::ZeroDuration() || options.watch_deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadlines must be positive");
  }
  if (options.upload_chunk_bytes == 0) {
    return absl::InvalidArgumentError("upload_chunk_bytes must be positive");
  }
  if (options.max_receive_message_bytes <= 0 || options.max_send_message_bytes <= 0) {
    return absl::InvalidArgumentError("max message sizes must be positive");
  }
  if (!IsPrintableAscii(options.api_key)) {
    return absl::InvalidArgumentError("the API key must be printable ASCII");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  auto credentials = options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  auto channel = grpc::CreateCustomChannel(options.server, credentials, args);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to ", options.server));
  }
  return std::unique_ptr<AdapterdClient>(new AdapterdClient(std::move(options), std::move(channel)));
}

AdapterdClient::AdapterdClient(Options options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)), channel_(std::move(channel)), stub_(v1::Adapterd::NewStub(channel_)) {}

void AdapterdClient::PrepareContext(grpc::ClientContext& context, std::string_view task_id,
                                    absl::Duration deadline) const {
  if (deadline != absl::InfiniteDuration()) {
    // Through absl::Time, so that a huge deadline saturates to the infinite
    // future (time_point::max(), which gRPC reads as "none") instead of
    // overflowing the chrono arithmetic into the past.
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  if (options_.wait_for_ready) context.set_wait_for_ready(true);
  if (!options_.api_key.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.api_key));
  }
  if (!task_id.empty() && IsPrintableAscii(task_id)) {
    context.AddMetadata("x-task-id", std::string(task_id));
  }
}

absl::StatusOr<v1::Dataset> AdapterdClient::Upload(
    const v1::UploadDatasetRequest::Metadata& metadata, std::string_view task_id_hint,
    const std::function<bool(const std::function<bool(const v1::UploadDatasetRequest&)>&)>& send_payload) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint, options_.default_deadline);
  v1::Dataset response;
  auto writer = stub_->UploadDataset(&context, &response);
  v1::UploadDatasetRequest request;
  *request.mutable_metadata() = metadata;
  // A failed Write means the stream is broken; Finish() reports why.
  const bool written =
      writer->Write(request) && send_payload([&](const v1::UploadDatasetRequest& m) { return writer->Write(m); });
  if (written) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Dataset> AdapterdClient::UploadDataset(const v1::UploadDatasetRequest::Metadata& metadata,
                                                          std::span<const v1::Example> examples,
                                                          std::string_view task_id_hint) const {
  return Upload(metadata, task_id_hint, [&](const auto& write) {
    for (const auto& [begin, end] : PlanChunks(examples, options_.upload_chunk_bytes)) {
      v1::UploadDatasetRequest request;
      auto* chunk = request.mutable_chunk();
      chunk->mutable_examples()->Reserve(static_cast<int>(end - begin));
      for (size_t i = begin; i < end; ++i) *chunk->add_examples() = examples[i];
      if (!write(request)) return false;
    }
    return true;
  });
}

absl::StatusOr<v1::Dataset> AdapterdClient::UploadDatasetFile(const v1::UploadDatasetRequest::Metadata& metadata,
                                                              std::string_view bytes,
                                                              std::string_view task_id_hint) const {
  const size_t piece = std::max<size_t>(1, options_.upload_chunk_bytes);
  return Upload(metadata, task_id_hint, [&](const auto& write) {
    for (size_t at = 0; at < bytes.size(); at += piece) {
      v1::UploadDatasetRequest request;
      request.set_file_bytes(std::string(bytes.substr(at, piece)));
      if (!write(request)) return false;
    }
    return true;
  });
}

absl::StatusOr<v1::Dataset> AdapterdClient::GetDataset(const std::string& dataset_id,
                                                       std::string_view task_id_hint) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint.empty() ? RoutingTaskOf(dataset_id) : task_id_hint, options_.default_deadline);
  v1::GetDatasetRequest request;
  request.set_dataset_id(dataset_id);
  v1::Dataset response;
  const grpc::Status status = stub_->GetDataset(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListDatasetsResponse> AdapterdClient::ListDatasets(const v1::ListDatasetsRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(context, {}, options_.default_deadline);
  v1::ListDatasetsResponse response;
  const grpc::Status status = stub_->ListDatasets(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status AdapterdClient::DeleteDataset(const std::string& dataset_id, std::string_view task_id_hint) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint.empty() ? RoutingTaskOf(dataset_id) : task_id_hint, options_.default_deadline);
  v1::DeleteDatasetRequest request;
  request.set_dataset_id(dataset_id);
  v1::DeleteDatasetResponse response;
  return FromGrpcStatus(stub_->DeleteDataset(&context, request, &response));
}

absl::StatusOr<v1::TrainingJob> AdapterdClient::CreateTrainingJob(const v1::CreateTrainingJobRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(context, request.task_id(), options_.default_deadline);
  v1::TrainingJob response;
  const grpc::Status status = stub_->CreateTrainingJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::TrainingJob> AdapterdClient::GetTrainingJob(const std::string& job_id,
                                                               std::string_view task_id_hint) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint.empty() ? RoutingTaskOf(job_id) : task_id_hint, options_.default_deadline);
  v1::GetTrainingJobRequest request;
  request.set_job_id(job_id);
  v1::TrainingJob response;
  const grpc::Status status = stub_->GetTrainingJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListTrainingJobsResponse> AdapterdClient::ListTrainingJobs(
    const v1::ListTrainingJobsRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(context, request.task_id(), options_.default_deadline);
  v1::ListTrainingJobsResponse response;
  const grpc::Status status = stub_->ListTrainingJobs(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::TrainingJob> AdapterdClient::CancelTrainingJob(const std::string& job_id,
                                                                  std::string_view task_id_hint) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint.empty() ? RoutingTaskOf(job_id) : task_id_hint, options_.default_deadline);
  v1::CancelTrainingJobRequest request;
  request.set_job_id(job_id);
  v1::TrainingJob response;
  const grpc::Status status = stub_->CancelTrainingJob(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status AdapterdClient::WatchTrainingJob(const v1::WatchTrainingJobRequest& request,
                                              const WatchCallback& on_response, std::string_view task_id_hint) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id_hint.empty() ? RoutingTaskOf(request.job_id()) : task_id_hint,
                 options_.watch_deadline);
  auto reader = stub_->WatchTrainingJob(&context, request);
  v1::WatchTrainingJobResponse response;
  bool stopped = false;
  while (reader->Read(&response)) {
    if (!on_response(response)) {
      stopped = true;
      // Cancelling makes the remaining Reads fail fast; drain them so that
      // Finish() does not wait on unread messages.
      context.TryCancel();
      while (reader->Read(&response)) {
      }
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (stopped) return absl::OkStatus();
  return FromGrpcStatus(status);
}

absl::StatusOr<v1::Task> AdapterdClient::GetTask(const std::string& task_id) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id, options_.default_deadline);
  v1::GetTaskRequest request;
  request.set_task_id(task_id);
  v1::Task response;
  const grpc::Status status = stub_->GetTask(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::ListTasksResponse> AdapterdClient::ListTasks(const v1::ListTasksRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(context, {}, options_.default_deadline);
  v1::ListTasksResponse response;
  const grpc::Status status = stub_->ListTasks(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::Status AdapterdClient::DeleteTask(const std::string& task_id) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id, options_.default_deadline);
  v1::DeleteTaskRequest request;
  request.set_task_id(task_id);
  v1::DeleteTaskResponse response;
  return FromGrpcStatus(stub_->DeleteTask(&context, request, &response));
}

absl::StatusOr<ExportedAdapter> AdapterdClient::ExportAdapter(const std::string& task_id, int64_t version,
                                                              const ExportAdapterOptions& options) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id, options_.default_deadline);
  v1::ExportAdapterRequest request;
  request.set_task_id(task_id);
  request.set_version(version);
  request.set_format(options.format);
  request.set_accept_layer_norm_loss(options.accept_layer_norm_loss);
  auto reader = stub_->ExportAdapter(&context, request);
  ExportedAdapter exported;
  int64_t total_bytes = -1;
  v1::ExportAdapterResponse response;
  bool first = true;
  while (reader->Read(&response)) {
    if (first) {
      exported.version = response.version();
      total_bytes = response.total_bytes();
      if (total_bytes > 0) exported.bytes.reserve(static_cast<size_t>(total_bytes));
      first = false;
    }
    exported.bytes += response.chunk();
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (first) return absl::DataLossError("the server sent no adapter data");
  if (total_bytes > 0 && static_cast<int64_t>(exported.bytes.size()) != total_bytes) {
    return absl::DataLossError(
        absl::StrCat("adapter export announced ", total_bytes, " bytes but sent ", exported.bytes.size()));
  }
  return exported;
}

absl::StatusOr<v1::Task> AdapterdClient::ImportAdapter(const std::string& task_id, std::string_view adapter_bytes,
                                                       v1::AdapterFormat format) const {
  grpc::ClientContext context;
  PrepareContext(context, task_id, options_.default_deadline);
  v1::Task response;
  auto writer = stub_->ImportAdapter(&context, &response);
  v1::ImportAdapterRequest request;
  request.mutable_metadata()->set_task_id(task_id);
  request.mutable_metadata()->set_total_bytes(static_cast<int64_t>(adapter_bytes.size()));
  request.mutable_metadata()->set_format(format);
  bool writing = writer->Write(request);
  for (size_t offset = 0; writing && offset < adapter_bytes.size(); offset += options_.upload_chunk_bytes) {
    request.Clear();
    request.set_chunk(std::string(adapter_bytes.substr(offset, options_.upload_chunk_bytes)));
    writing = writer->Write(request);
  }
  if (writing) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::PredictResponse> AdapterdClient::Predict(const v1::PredictRequest& request) const {
  grpc::ClientContext context;
  PrepareContext(context, request.task_id(), options_.default_deadline);
  v1::PredictResponse response;
  const grpc::Status status = stub_->Predict(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<ServingStatus> AdapterdClient::Health(const std::string& service) const {
  grpc::ClientContext context;
  PrepareContext(context, {}, options_.default_deadline);
  const std::string encoded = EncodeHealthCheckRequest(service);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::GenericStub stub(channel_);
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, kHealthCheckMethod, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const auto& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return DecodeHealthCheckResponse(bytes);
}

}  // namespace adapterd::client
