#include "tests/client/fake_adapterd.h"

#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dataset_file.h"
#include "common/sha256.h"

namespace adapterd::client::testing {

std::optional<std::string> RecordedCall::Metadata(const std::string& key) const {
  const auto [begin, end] = metadata.equal_range(key);
  if (begin == end) return std::nullopt;
  std::vector<std::string> values;
  for (auto it = begin; it != end; ++it) values.push_back(it->second);
  return absl::StrJoin(values, "|");
}

// --- Recording -----------------------------------------------------------------

std::optional<grpc::Status> FakeAdapterd::Record(const std::string& method, grpc::ServerContext* context) {
  RecordedCall call;
  call.method = method;
  for (const auto& [key, value] : context->client_metadata()) {
    call.metadata.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
  }
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    call.deadline_left = absl::FromChrono(deadline) - absl::Now();
  }
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(call));
  if (auto it = errors_.find(method); it != errors_.end()) return it->second;
  if (auto it = errors_.find(""); it != errors_.end()) return it->second;
  return std::nullopt;
}

std::vector<RecordedCall> FakeAdapterd::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

std::vector<RecordedCall> FakeAdapterd::CallsOf(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  std::vector<RecordedCall> out;
  for (const auto& call : calls_) {
    if (call.method == method) out.push_back(call);
  }
  return out;
}

std::vector<std::vector<v1::UploadDatasetRequest>> FakeAdapterd::uploads() const {
  absl::MutexLock lock(&mu_);
  return uploads_;
}
std::vector<std::string> FakeAdapterd::dataset_ids() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, dataset] : datasets_) ids.push_back(id);
  return ids;
}
std::vector<std::vector<v1::ImportAdapterRequest>> FakeAdapterd::imports() const {
  absl::MutexLock lock(&mu_);
  return imports_;
}
std::vector<v1::PredictRequest> FakeAdapterd::predict_requests() const {
  absl::MutexLock lock(&mu_);
  return predicts_;
}
std::vector<v1::CreateTrainingJobRequest> FakeAdapterd::create_requests() const {
  absl::MutexLock lock(&mu_);
  return creates_;
}
std::vector<v1::ListTrainingJobsRequest> FakeAdapterd::list_jobs_requests() const {
  absl::MutexLock lock(&mu_);
  return list_jobs_;
}
std::vector<v1::WatchTrainingJobRequest> FakeAdapterd::watch_requests() const {
  absl::MutexLock lock(&mu_);
  return watches_;
}

// --- Configuration ---------------------------------------------------------------

void FakeAdapterd::FailWith(const std::string& method, grpc::Status status) {
  absl::MutexLock lock(&mu_);
  errors_[method] = std::move(status);
}

void FakeAdapterd::StallPredict() {
  absl::MutexLock lock(&mu_);
  stall_predict_ = true;
}

void FakeAdapterd::Release() {
  absl::MutexLock lock(&mu_);
  released_ = true;
}

void FakeAdapterd::AddDataset(const v1::Dataset& dataset) {
  absl::MutexLock lock(&mu_);
  datasets_[dataset.dataset_id()] = dataset;
}

void FakeAdapterd::AddJob(const v1::TrainingJob& job) {
  absl::MutexLock lock(&mu_);
  jobs_[job.job_id()] = job;
}

void FakeAdapterd::SetCreatedJob(const v1::TrainingJob& job) {
  absl::MutexLock lock(&mu_);
  created_job_ = job;
}

void FakeAdapterd::SetJobPages(std::vector<std::vector<v1::TrainingJob>> pages) {
  absl::MutexLock lock(&mu_);
  job_pages_ = std::move(pages);
}

void FakeAdapterd::SetWatchResponses(std::vector<v1::WatchTrainingJobResponse> responses) {
  absl::MutexLock lock(&mu_);
  watch_responses_ = std::move(responses);
}

void FakeAdapterd::AddTask(const v1::Task& task) {
  absl::MutexLock lock(&mu_);
  tasks_[task.task_id()] = task;
}

void FakeAdapterd::SetExport(std::string bytes, int64_t version, size_t chunk_bytes, int64_t announced_total) {
  absl::MutexLock lock(&mu_);
  export_bytes_ = std::move(bytes);
  export_version_ = version;
  export_chunk_bytes_ = std::max<size_t>(chunk_bytes, 1);
  export_announced_total_ = announced_total;
}

// --- The service --------------------------------------------------------------------

grpc::Status FakeAdapterd::UploadDataset(grpc::ServerContext* context,
                                         grpc::ServerReader<v1::UploadDatasetRequest>* reader, v1::Dataset* response) {
  const std::optional<grpc::Status> error = Record("UploadDataset", context);
  std::vector<v1::UploadDatasetRequest> messages;
  v1::UploadDatasetRequest message;
  while (reader->Read(&message)) messages.push_back(message);
  absl::MutexLock lock(&mu_);
  uploads_.push_back(messages);
  if (error.has_value()) return *error;
  if (messages.empty() || !messages.front().has_metadata()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be metadata");
  }
  std::string id = messages.front().metadata().dataset_id();
  if (id.empty()) id = absl::StrCat("ds-", uploads_.size());
  if (datasets_.count(id) > 0) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, absl::StrCat("dataset ", id, " exists"));
  }
  v1::Dataset dataset;
  dataset.set_dataset_id(id);
  dataset.set_display_name(messages.front().metadata().display_name());
  // A file's bytes are read with the server's reader (common/dataset_file.h).
  std::vector<v1::Example> examples;
  const v1::UploadDatasetRequest::Metadata& meta = messages.front().metadata();
  std::string file;
  for (size_t i = 1; i < messages.size(); ++i) {
    if (messages[i].has_chunk() == (meta.file_format() != v1::DATASET_FORMAT_UNSPECIFIED) ||
        messages[i].has_metadata()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a message that does not belong in this upload");
    }
    file += messages[i].file_bytes();
    examples.insert(examples.end(), messages[i].chunk().examples().begin(), messages[i].chunk().examples().end());
  }
  if (meta.file_format() != v1::DATASET_FORMAT_UNSPECIFIED) {
    absl::StatusOr<std::vector<v1::Example>> read =
        ParseDataset(file, FromApiFormat(meta.file_format()), meta.file_name());
    if (!read.ok()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(read.status().message()));
    examples = *std::move(read);
    dataset.set_file_sha256(Sha256Hex(file));
  }
  {
    for (const auto& example : examples) {
      dataset.set_num_examples(dataset.num_examples() + 1);
      dataset.set_num_bytes(
          dataset.num_bytes() +
          static_cast<int64_t>(example.text().size() + example.text_pair().size() + example.label().size()));
      ++(*dataset.mutable_label_counts())[example.label()];
    }
  }
  datasets_[id] = dataset;
  *response = dataset;
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::GetDataset(grpc::ServerContext* context, const v1::GetDatasetRequest* request,
                                      v1::Dataset* response) {
  if (auto error = Record("GetDataset", context)) return *error;
  absl::MutexLock lock(&mu_);
  const auto it = datasets_.find(request->dataset_id());
  if (it == datasets_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("dataset ", request->dataset_id(), " not found"));
  }
  *response = it->second;
  return grpc::Status::OK;
}

// Pages of two, so that clients must follow the token.
grpc::Status FakeAdapterd::ListDatasets(grpc::ServerContext* context, const v1::ListDatasetsRequest* request,
                                        v1::ListDatasetsResponse* response) {
  if (auto error = Record("ListDatasets", context)) return *error;
  absl::MutexLock lock(&mu_);
  auto it = datasets_.upper_bound(request->page_token());
  for (int n = 0; it != datasets_.end() && n < 2; ++it, ++n) *response->add_datasets() = it->second;
  if (it != datasets_.end()) response->set_next_page_token(std::prev(it)->first);
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::DeleteDataset(grpc::ServerContext* context, const v1::DeleteDatasetRequest* request,
                                         v1::DeleteDatasetResponse*) {
  if (auto error = Record("DeleteDataset", context)) return *error;
  absl::MutexLock lock(&mu_);
  if (datasets_.erase(request->dataset_id()) == 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("dataset ", request->dataset_id(), " not found"));
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::CreateTrainingJob(grpc::ServerContext* context, const v1::CreateTrainingJobRequest* request,
                                             v1::TrainingJob* response) {
  const std::optional<grpc::Status> error = Record("CreateTrainingJob", context);
  absl::MutexLock lock(&mu_);
  creates_.push_back(*request);
  if (error.has_value()) return *error;
  if (created_job_.has_value()) {
    *response = *created_job_;
  } else {
    response->set_job_id("job-1");
    response->set_state(v1::JOB_STATE_QUEUED);
  }
  response->set_task_id(request->task_id());
  response->set_request_id(request->request_id());
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::GetTrainingJob(grpc::ServerContext* context, const v1::GetTrainingJobRequest* request,
                                          v1::TrainingJob* response) {
  if (auto error = Record("GetTrainingJob", context)) return *error;
  absl::MutexLock lock(&mu_);
  const auto it = jobs_.find(request->job_id());
  if (it == jobs_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("job ", request->job_id(), " not found"));
  }
  *response = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::ListTrainingJobs(grpc::ServerContext* context, const v1::ListTrainingJobsRequest* request,
                                            v1::ListTrainingJobsResponse* response) {
  const std::optional<grpc::Status> error = Record("ListTrainingJobs", context);
  absl::MutexLock lock(&mu_);
  list_jobs_.push_back(*request);
  if (error.has_value()) return *error;
  size_t page = 0;
  if (!request->page_token().empty()) {
    const std::string& token = request->page_token();
    if (!absl::StartsWith(token, "page-")) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad page token");
    }
    page = std::stoul(token.substr(5));
  }
  if (page >= job_pages_.size()) return grpc::Status::OK;
  for (const auto& job : job_pages_[page]) *response->add_jobs() = job;
  if (page + 1 < job_pages_.size()) response->set_next_page_token(absl::StrCat("page-", page + 1));
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::CancelTrainingJob(grpc::ServerContext* context, const v1::CancelTrainingJobRequest* request,
                                             v1::TrainingJob* response) {
  if (auto error = Record("CancelTrainingJob", context)) return *error;
  response->set_job_id(request->job_id());
  response->set_state(v1::JOB_STATE_CANCELLING);
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::WatchTrainingJob(grpc::ServerContext* context, const v1::WatchTrainingJobRequest* request,
                                            grpc::ServerWriter<v1::WatchTrainingJobResponse>* writer) {
  const std::optional<grpc::Status> error = Record("WatchTrainingJob", context);
  std::vector<v1::WatchTrainingJobResponse> responses;
  {
    absl::MutexLock lock(&mu_);
    watches_.push_back(*request);
    if (error.has_value()) return *error;
    responses = watch_responses_;
  }
  for (const auto& response : responses) {
    if (!writer->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::GetTask(grpc::ServerContext* context, const v1::GetTaskRequest* request,
                                   v1::Task* response) {
  if (auto error = Record("GetTask", context)) return *error;
  absl::MutexLock lock(&mu_);
  const auto it = tasks_.find(request->task_id());
  if (it == tasks_.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("task ", request->task_id(), " not found"));
  }
  *response = it->second;
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::ListTasks(grpc::ServerContext* context, const v1::ListTasksRequest* request,
                                     v1::ListTasksResponse* response) {
  if (auto error = Record("ListTasks", context)) return *error;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, task] : tasks_) *response->add_tasks() = task;
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::DeleteTask(grpc::ServerContext* context, const v1::DeleteTaskRequest* request,
                                      v1::DeleteTaskResponse* response) {
  if (auto error = Record("DeleteTask", context)) return *error;
  absl::MutexLock lock(&mu_);
  if (tasks_.erase(request->task_id()) == 0) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("task ", request->task_id(), " not found"));
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::ExportAdapter(grpc::ServerContext* context, const v1::ExportAdapterRequest* request,
                                         grpc::ServerWriter<v1::ExportAdapterResponse>* writer) {
  if (auto error = Record("ExportAdapter", context)) return *error;
  std::string bytes;
  int64_t version = 0;
  size_t chunk_bytes = 1;
  int64_t announced = -1;
  {
    absl::MutexLock lock(&mu_);
    bytes = export_bytes_;
    version = export_version_;
    chunk_bytes = export_chunk_bytes_;
    announced = export_announced_total_;
  }
  for (size_t offset = 0; offset < bytes.size(); offset += chunk_bytes) {
    v1::ExportAdapterResponse response;
    response.set_chunk(bytes.substr(offset, chunk_bytes));
    if (offset == 0) {
      response.set_version(version);
      response.set_total_bytes(announced >= 0 ? announced : static_cast<int64_t>(bytes.size()));
    }
    if (!writer->Write(response)) return grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
  }
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::ImportAdapter(grpc::ServerContext* context,
                                         grpc::ServerReader<v1::ImportAdapterRequest>* reader, v1::Task* response) {
  const std::optional<grpc::Status> error = Record("ImportAdapter", context);
  std::vector<v1::ImportAdapterRequest> messages;
  v1::ImportAdapterRequest message;
  while (reader->Read(&message)) messages.push_back(message);
  absl::MutexLock lock(&mu_);
  imports_.push_back(messages);
  if (error.has_value()) return *error;
  if (messages.empty() || !messages.front().has_metadata()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be metadata");
  }
  int64_t size = 0;
  for (size_t i = 1; i < messages.size(); ++i) size += static_cast<int64_t>(messages[i].chunk().size());
  response->set_task_id(messages.front().metadata().task_id());
  response->set_state(v1::TASK_STATE_READY);
  response->set_current_version(1);
  response->add_versions(1);
  response->set_adapter_bytes(size);
  tasks_[response->task_id()] = *response;
  return grpc::Status::OK;
}

grpc::Status FakeAdapterd::Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                                   v1::PredictResponse* response) {
  const std::optional<grpc::Status> error = Record("Predict", context);
  {
    absl::MutexLock lock(&mu_);
    predicts_.push_back(*request);
    if (stall_predict_) {
      // Bounded: the client's deadline is what the test waits for; this only
      // keeps the handler from outliving the test for long.
      mu_.AwaitWithTimeout(absl::Condition(&released_), absl::Seconds(20));
      return grpc::Status(grpc::StatusCode::CANCELLED, "released");
    }
  }
  if (error.has_value()) return *error;
  response->set_version(request->version() != 0 ? request->version() : kCurrentVersion);
  const std::string& task = request->task_id();
  if (task == "multi" || task == "regression" || task == "ner" || task == "qa") {
    response->set_task_kind(task == "multi"        ? v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION
                            : task == "regression" ? v1::TASK_KIND_REGRESSION
                            : task == "ner"        ? v1::TASK_KIND_TOKEN_CLASSIFICATION
                                                   : v1::TASK_KIND_EXTRACTIVE_QA);
    for (int i = 0; i < request->texts_size(); ++i) {
      const std::string& text = request->texts(i);
      v1::Prediction* p = response->add_predictions();
      if (task == "multi") {
        auto* a = p->add_labels();
        a->set_label("positive");
        a->set_score(kScore);
        auto* b = p->add_labels();
        b->set_label("short");
        b->set_score(0.5f);
      } else if (task == "regression") {
        p->set_value(2.5);
      } else if (task == "ner") {
        for (size_t at = text.find("Ada"); at != std::string::npos; at = text.find("Ada", at + 1)) {
          v1::Entity* e = p->add_entities();
          e->set_label("PER");
          e->set_start(static_cast<int32_t>(at));  // ASCII texts in the tests
          e->set_end(static_cast<int32_t>(at + 3));
          e->set_text("Ada");
          e->set_score(kScore);
        }
      } else {
        const std::string context = i < request->text_pairs_size() ? request->text_pairs(i) : "";
        const size_t end = std::min(context.find(' '), context.size());
        v1::Answer* a = p->add_answers();
        a->set_text(context.substr(0, end));
        a->set_end(static_cast<int32_t>(end));
        a->set_score(kScore);
        p->add_answers()->set_score(0.125f);
      }
    }
    return grpc::Status::OK;
  }
  for (const auto& text : request->texts()) {
    const bool good = absl::StrContains(text, "good");
    v1::Prediction* p = response->add_predictions();
    p->set_label(good ? "positive" : "negative");
    p->set_score(kScore);
    if (request->return_all_scores()) {
      auto* negative = p->add_all_scores();
      negative->set_label("negative");
      negative->set_score(good ? 1.0f - kScore : kScore);
      auto* positive = p->add_all_scores();
      positive->set_label("positive");
      positive->set_score(good ? kScore : 1.0f - kScore);
    }
  }
  return grpc::Status::OK;
}

// --- FakeServer -----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<FakeServer>> FakeServer::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<FakeServer> server(new FakeServer());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &server->port_);
  builder.RegisterService(&server->fake_);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::InternalError("cannot start the fake server on 127.0.0.1:0");
  }
  return server;
}

FakeServer::~FakeServer() {
  fake_.Release();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }
}

std::string FakeServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

void FakeServer::SetServing(bool serving) { server_->GetHealthCheckService()->SetServingStatus("", serving); }

}  // namespace adapterd::client::testing
