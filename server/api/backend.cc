#include "server/api/backend.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_state.h"
#include "common/routing.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "common/zip_archive.h"
#include "server/api/grpc_status.h"
#include "server/api/ids.h"
#include "server/api/page_token.h"
#include "server/api/record_mapping.h"
#include "server/api/request_checks.h"
#include "server/model/adapter_format.h"
#include "server/model/adapterhub_export.h"
#include "server/model/adapterhub_import.h"
#include "server/model/safetensors.h"
#include "server/training/example.h"
#include "server/training/kind_records.h"
#include "storage/adapter_store.h"
#include "storage/dataset_store.h"
#include "storage/job_store.h"
#include "storage/task_store.h"

namespace adapterd::api {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

int64_t TaskParameters(const model::BertConfig& c, const storage::v1::TaskRecord& t) {
  return model::AdapterSetParameterCount(c.num_hidden_layers, c.hidden_size, t.adapter_config().bottleneck_size(),
                                         t.labels_size());
}

}  // namespace

// --- DatasetUpload ---------------------------------------------------------------

namespace {

// Examples gathered into one stored chunk before it is written.
constexpr size_t kFileChunkBytes = size_t{1} << 20;

}  // namespace

DatasetUpload::DatasetUpload(Backend* backend, const Tenant* tenant, std::string dataset_id,
                             const v1::UploadDatasetRequest::Metadata& metadata, UsageLedger::Hold bytes)
    : backend_(backend),
      tenant_(tenant),
      dataset_id_(std::move(dataset_id)),
      display_name_(metadata.display_name()),
      bytes_(std::move(bytes)),
      sha_(std::make_unique<Sha256>()) {
  record_.set_tenant(tenant_->id());
  record_.set_dataset_id(dataset_id_);
  if (metadata.file_format() != v1::DATASET_FORMAT_UNSPECIFIED) {
    file_ = std::make_unique<DatasetFileReader>(FromApiFormat(metadata.file_format()),
                                                metadata.file_name().empty() ? "the file" : metadata.file_name(),
                                                kMaxDatasetRecordBytes, kMaxWholeDatasetFileBytes);
    file_sha_ = std::make_unique<Sha256>();
  }
}

absl::Status DatasetUpload::AddFileBytes(std::string_view bytes) {
  if (finished_) return absl::FailedPreconditionError("the upload is finished");
  if (file_ == nullptr) {
    return absl::InvalidArgumentError(
        "file_bytes in an upload of examples: set metadata.file_format to upload a file, or send chunks");
  }
  file_sha_->Update(bytes);
  ASSIGN_OR_RETURN(std::vector<v1::Example> examples, file_->Feed(bytes));
  return AddFileExamples(std::move(examples));
}

absl::Status DatasetUpload::AddFileExamples(std::vector<v1::Example> examples) {
  for (v1::Example& e : examples) {
    const size_t bytes = e.ByteSizeLong();
    if (file_chunk_bytes_ > 0 && file_chunk_bytes_ + bytes > kFileChunkBytes) RETURN_IF_ERROR(FlushFileChunk());
    *file_chunk_.add_examples() = std::move(e);
    file_chunk_bytes_ += bytes;
  }
  return absl::OkStatus();
}

absl::Status DatasetUpload::FlushFileChunk() {
  v1::DatasetChunk chunk;
  chunk.Swap(&file_chunk_);
  file_chunk_bytes_ = 0;
  return StoreChunk(chunk);
}

DatasetUpload::~DatasetUpload() {
  if (!finished_ && next_chunk_ > 0) {
    // An aborted upload leaves nothing behind; Delete removes orphan chunks
    // and reports NOT_FOUND because no record was written.
    (void)backend_->db().datasets().Delete(tenant_->id(), dataset_id_);
  }
  backend_->EndUpload(tenant_->id(), dataset_id_);
}

absl::Status DatasetUpload::AddChunk(const v1::DatasetChunk& chunk) {
  if (file_ != nullptr) {
    return absl::InvalidArgumentError("a chunk of examples in a file upload (metadata.file_format): send file_bytes");
  }
  return StoreChunk(chunk);
}

absl::Status DatasetUpload::StoreChunk(const v1::DatasetChunk& chunk) {
  if (finished_) return absl::FailedPreconditionError("the upload is finished");
  int64_t bytes = 0;
  for (int i = 0; i < chunk.examples_size(); ++i) {
    const v1::Example& e = chunk.examples(i);
    const int64_t index = record_.num_examples() + i;
    RETURN_IF_ERROR(CheckExample(e, index));
    // Every stored string: text, pair, labels, tokens, tags, entity labels,
    // answers (the trainer's measure).
    bytes += static_cast<int64_t>(training::ExampleBytes(training::ExampleFromProto(e)));
  }
  if (chunk.examples_size() == 0) return absl::OkStatus();
  // The quota covers every dataset of the tenant, stored or being uploaded.
  if (absl::Status s = bytes_.Grow(bytes, tenant_->quotas().max_dataset_bytes); !s.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the tenant's datasets would pass its limit of ", tenant_->quotas().max_dataset_bytes,
                     " bytes of text (", s.message(), "); delete datasets it no longer needs (DeleteDataset)"));
  }
  RETURN_IF_ERROR(backend_->db().datasets().PutChunk(tenant_->id(), dataset_id_, next_chunk_, ToRecord(chunk)));
  ++next_chunk_;
  for (const v1::Example& e : chunk.examples()) {
    // Length-prefixed fields, so that ("ab","c") and ("a","bc") hash apart;
    // the other kinds' fields follow, counted, when present (a dataset of
    // text, pair and label only hashes as it always has).
    auto field = [this](std::string_view f) {
      sha_->Update(absl::StrCat(f.size(), ":"));
      sha_->Update(f);
    };
    for (const std::string* f : {&e.text(), &e.text_pair(), &e.label()}) field(*f);
    if (e.labels_size() + e.tokens_size() + e.tags_size() + e.entities_size() + e.answers_size() > 0) {
      field(absl::StrCat("labels", e.labels_size(), "tokens", e.tokens_size(), "tags", e.tags_size()));
      for (const std::string& f : e.labels()) field(f);
      for (const std::string& f : e.tokens()) field(f);
      for (const std::string& f : e.tags()) field(f);
      field(absl::StrCat("entities", e.entities_size()));
      for (const v1::Example::Entity& x : e.entities()) field(absl::StrCat(x.start(), ",", x.end(), ",", x.label()));
      field(absl::StrCat("answers", e.answers_size()));
      for (const v1::Example::Answer& a : e.answers()) {
        field(absl::StrCat(a.answer_start()));
        field(a.text());
      }
    }
    (*record_.mutable_label_counts())[e.label()]++;
  }
  record_.set_num_examples(record_.num_examples() + chunk.examples_size());
  record_.set_num_bytes(record_.num_bytes() + bytes);
  return absl::OkStatus();
}

absl::StatusOr<v1::Dataset> DatasetUpload::Finish() {
  if (finished_) return absl::FailedPreconditionError("the upload is finished");
  if (file_ != nullptr) {
    ASSIGN_OR_RETURN(std::vector<v1::Example> rest, file_->Finish());
    RETURN_IF_ERROR(AddFileExamples(std::move(rest)));
    RETURN_IF_ERROR(FlushFileChunk());
    record_.set_file_sha256(file_sha_->HexDigest());
  }
  if (record_.num_examples() == 0) return absl::InvalidArgumentError("the dataset has no examples");
  record_.set_num_chunks(next_chunk_);
  record_.set_created_at_micros(NowMicros());
  record_.set_display_name(display_name_);
  record_.set_content_sha256(sha_->HexDigest());
  record_.clear_labels();
  for (const auto& [label, n] : record_.label_counts()) record_.add_labels(label);
  std::sort(record_.mutable_labels()->begin(), record_.mutable_labels()->end());
  RETURN_IF_ERROR(backend_->db().datasets().PutRecord(record_));
  finished_ = true;
  bytes_.Keep();  // counted until the dataset is deleted
  return ToApi(record_);
}

// --- AdapterImport ---------------------------------------------------------------

namespace {

// An adapter file's header is a few kB (names, shapes and offsets of a few
// hundred tensors); a longer one is not an adapter file.
constexpr uint64_t kMaxAdapterHeaderBytes = 1 << 20;

}  // namespace

AdapterImport::AdapterImport(Backend* backend, const Tenant* tenant, std::string task_id, int64_t declared_bytes,
                             bool adapterhub, UsageLedger::Hold memory)
    : backend_(backend),
      tenant_(tenant),
      task_id_(std::move(task_id)),
      declared_bytes_(declared_bytes),
      adapterhub_(adapterhub),
      memory_(std::move(memory)) {}

absl::Status AdapterImport::CheckHeader(uint64_t total_bytes,
                                        const std::map<std::string, std::string, std::less<>>& metadata,
                                        uint64_t header_bytes) {
  const int64_t limit = backend_->options_.max_adapter_bytes;
  if (total_bytes > static_cast<uint64_t>(limit)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the adapter file is ", total_bytes, " bytes; this server imports at most ", limit));
  }
  if (declared_bytes_ > 0 && static_cast<uint64_t>(declared_bytes_) != total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("metadata.total_bytes says ", declared_bytes_,
                                                   " bytes, but the file's header describes ", total_bytes));
  }
  ASSIGN_OR_RETURN(model::AdapterFileInfo info, model::ReadAdapterInfo(metadata));
  const model::BertEncoder& encoder = *backend_->options_.encoder;
  if (info.num_layers != encoder.config().num_hidden_layers || info.hidden_size != encoder.config().hidden_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the adapter file is for an encoder of ", info.num_layers, " layers of width ", info.hidden_size,
        "; this server runs ", encoder.config().num_hidden_layers, " layers of width ", encoder.config().hidden_size));
  }
  const int64_t most = model::MaxAdapterFileBytes(encoder.config(), info, static_cast<int64_t>(header_bytes));
  if (total_bytes > static_cast<uint64_t>(most)) {
    return absl::InvalidArgumentError(absl::StrCat("the adapter file is ", total_bytes, " bytes; an adapter of ",
                                                   info.config.labels.size(), " labels and bottleneck ",
                                                   info.config.bottleneck_size, " for this encoder is at most ", most));
  }
  // The whole file is reserved now, before the rest of it is received.
  RETURN_IF_ERROR(memory_.Grow(static_cast<int64_t>(total_bytes) - memory_.amount(), UsageLedger::kUnlimited));
  expected_bytes_ = total_bytes;
  bytes_.reserve(total_bytes);
  return absl::OkStatus();
}

absl::Status AdapterImport::Buffer(std::string_view chunk) {
  // Only what is buffered is held (an adapterd file's header, once whole,
  // reserves the rest).
  const int64_t buffered = static_cast<int64_t>(bytes_.size() + chunk.size());
  if (buffered > backend_->options_.max_adapter_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(adapterhub_ ? "AdapterHub zip" : "adapter file", " larger than ",
                                                     backend_->options_.max_adapter_bytes, " bytes"));
  }
  if (adapterhub_ && declared_bytes_ > 0 && buffered > declared_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stream runs past the ", declared_bytes_, " bytes metadata.total_bytes announced"));
  }
  if (buffered > memory_.amount()) RETURN_IF_ERROR(memory_.Grow(buffered - memory_.amount(), UsageLedger::kUnlimited));
  bytes_.append(chunk);
  return absl::OkStatus();
}

absl::Status AdapterImport::AddChunk(std::string_view chunk) {
  if (expected_bytes_ > 0) {
    if (bytes_.size() + chunk.size() > expected_bytes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("the adapter file runs past the ", expected_bytes_, " bytes its header announces"));
    }
    bytes_.append(chunk);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Buffer(chunk));
  if (adapterhub_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<model::SafetensorsHeader> header,
                   model::ReadSafetensorsHeader({reinterpret_cast<const std::byte*>(bytes_.data()), bytes_.size()},
                                                {.max_header_bytes = kMaxAdapterHeaderBytes}));
  if (!header.has_value()) return absl::OkStatus();
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes_.data(), sizeof(header_len));  // little-endian, as the format
  RETURN_IF_ERROR(CheckHeader(header->total_bytes, header->metadata, sizeof(header_len) + header_len));
  if (bytes_.size() > expected_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the adapter file runs past the ", expected_bytes_, " bytes its header announces"));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Task> AdapterImport::Finish() {
  if (adapterhub_) {
    if (declared_bytes_ > 0 && static_cast<int64_t>(bytes_.size()) != declared_bytes_) {
      return absl::InvalidArgumentError(absl::StrCat("the AdapterHub zip ended after ", bytes_.size(), " of the ",
                                                     declared_bytes_, " bytes metadata.total_bytes announced"));
    }
    return backend_->ImportAdapterHub(*tenant_, task_id_, std::move(bytes_), &memory_);
  }
  if (expected_bytes_ == 0 || bytes_.size() != expected_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the adapter file ended after ", bytes_.size(), " bytes",
                     expected_bytes_ > 0 ? absl::StrCat(" of the ", expected_bytes_, " its header announces")
                                         : std::string(", inside its header")));
  }
  return backend_->ImportAdapter(*tenant_, task_id_, std::move(bytes_));
}

// --- Backend ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Backend>> Backend::Create(Options options) {
  if (options.db == nullptr || options.jobs == nullptr || options.engine == nullptr || options.encoder == nullptr) {
    return absl::InvalidArgumentError("Backend needs db, jobs, engine and encoder");
  }
  return std::unique_ptr<Backend>(new Backend(std::move(options)));
}

void Backend::EndUpload(const std::string& tenant, const std::string& dataset_id) {
  absl::MutexLock lock(&uploads_mu_);
  uploads_.erase(absl::StrCat(tenant, "/", dataset_id));
}

absl::StatusOr<std::unique_ptr<DatasetUpload>> Backend::BeginUpload(const Tenant& tenant,
                                                                    const v1::UploadDatasetRequest::Metadata& meta,
                                                                    const std::string& route_task) {
  RETURN_IF_ERROR(CheckUploadMetadata(meta, route_task));
  std::string id = meta.dataset_id();
  if (id.empty()) id = MintId("ds", NowMicros(), route_task);
  // Claim the id first, then look: an upload of the same id that finishes
  // in between has written its record before it released the claim.
  {
    absl::MutexLock lock(&uploads_mu_);
    if (!uploads_.insert(absl::StrCat(tenant.id(), "/", id)).second) {
      return absl::AlreadyExistsError(absl::StrCat("dataset '", id, "' is being uploaded by another stream"));
    }
  }
  auto release = [&] { EndUpload(tenant.id(), id); };
  absl::StatusOr<storage::v1::DatasetRecord> existing = options_.db->datasets().Get(tenant.id(), id);
  if (existing.ok() || !absl::IsNotFound(existing.status())) {
    release();
    if (existing.ok()) return absl::AlreadyExistsError(absl::StrCat("dataset '", id, "' already exists"));
    return existing.status();
  }
  // Chunks an upload that never committed left under this id (one a crash
  // cut short) must not be read as this one's.
  absl::Status cleared = options_.db->datasets().ClearChunks(tenant.id(), id);
  absl::StatusOr<UsageLedger::Hold> bytes =
      cleared.ok() ? dataset_bytes_.Open(tenant.id(), [&] { return StoredDatasetBytes(tenant.id()); })
                   : absl::StatusOr<UsageLedger::Hold>(cleared);
  if (!bytes.ok()) {
    release();
    return bytes.status();
  }
  return std::unique_ptr<DatasetUpload>(new DatasetUpload(this, &tenant, id, meta, *std::move(bytes)));
}

absl::StatusOr<v1::Dataset> Backend::GetDataset(const Tenant& tenant, const v1::GetDatasetRequest& request) {
  RETURN_IF_ERROR(CheckGetDatasetRequest(request));
  ASSIGN_OR_RETURN(storage::v1::DatasetRecord r, options_.db->datasets().Get(tenant.id(), request.dataset_id()));
  return ToApi(r);
}

absl::StatusOr<v1::ListDatasetsResponse> Backend::ListDatasets(const Tenant& tenant,
                                                               const v1::ListDatasetsRequest& request) {
  RETURN_IF_ERROR(CheckListDatasetsRequest(request));
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  ASSIGN_OR_RETURN(const std::string token, DecodePageToken("datasets", tenant.id(), request.page_token()));
  ASSIGN_OR_RETURN(storage::DatasetStore::Page page, options_.db->datasets().List(tenant.id(), want, token));
  v1::ListDatasetsResponse out;
  for (const storage::v1::DatasetRecord& r : page.datasets) *out.add_datasets() = ToApi(r);
  out.set_next_page_token(EncodePageToken("datasets", tenant.id(), page.next_page_token));
  return out;
}

absl::Status Backend::DeleteDataset(const Tenant& tenant, const v1::DeleteDatasetRequest& request) {
  RETURN_IF_ERROR(CheckDeleteDatasetRequest(request));
  // A dataset being uploaded has no record yet: NOT_FOUND, as the proto says.
  ASSIGN_OR_RETURN(storage::v1::DatasetRecord gone, options_.jobs->DeleteDataset(tenant.id(), request.dataset_id()));
  dataset_bytes_.Subtract(tenant.id(), gone.num_bytes());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Backend::StoredDatasetBytes(const std::string& tenant) const {
  int64_t total = 0;
  std::string token;
  do {
    ASSIGN_OR_RETURN(storage::DatasetStore::Page page,
                     options_.db->datasets().List(tenant, storage::kMaxPageSize, token));
    for (const storage::v1::DatasetRecord& r : page.datasets) total += r.num_bytes();
    token = page.next_page_token;
  } while (!token.empty());
  return total;
}

absl::StatusOr<UsageLedger::Hold> Backend::AdmitClientStream(const Tenant& tenant) {
  return client_streams_.Take(tenant.id(), 1, options_.max_client_streams_per_tenant);
}

absl::StatusOr<v1::TrainingJob> Backend::CreateTrainingJob(const Tenant& tenant,
                                                           const v1::CreateTrainingJobRequest& request) {
  RETURN_IF_ERROR(CheckCreateTrainingJobRequest(request));
  // The job manager checks the rest, each once: a retried request's job is
  // returned whatever the queue holds, then the tenant's queue quota, then
  // validation (hyperparameter ranges first, then the data) before anything
  // is stored.
  training::JobRequest job;
  job.tenant = tenant.id();
  job.task_id = request.task_id();
  job.request_id = request.request_id();
  job.dataset_ids.assign(request.dataset_ids().begin(), request.dataset_ids().end());
  job.validation_dataset_id = request.validation_dataset_id();
  job.hyperparameters = ToRecord(request.hyperparameters());
  job.task_kind = ToRecord(request.task_kind());
  job.max_queued_for_tenant = tenant.quotas().max_queued_jobs;
  job.max_tasks_for_tenant = tenant.quotas().max_tasks;  // checked with the job's commit
  ASSIGN_OR_RETURN(storage::v1::JobRecord record, options_.jobs->Submit(job));
  return ToApi(record);
}

absl::StatusOr<v1::TrainingJob> Backend::GetTrainingJob(const Tenant& tenant,
                                                        const v1::GetTrainingJobRequest& request) {
  RETURN_IF_ERROR(CheckGetTrainingJobRequest(request));
  ASSIGN_OR_RETURN(storage::v1::JobRecord job, options_.jobs->Get(tenant.id(), request.job_id()));
  return ToApi(job);
}

absl::StatusOr<v1::ListTrainingJobsResponse> Backend::ListTrainingJobs(const Tenant& tenant,
                                                                       const v1::ListTrainingJobsRequest& request) {
  RETURN_IF_ERROR(CheckListTrainingJobsRequest(request));
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  v1::ListTrainingJobsResponse out;
  storage::JobStore::ListOptions opts;
  opts.tenant = tenant.id();
  if (request.state() != v1::JOB_STATE_UNSPECIFIED) opts.states.push_back(ToRecord(request.state()));
  ASSIGN_OR_RETURN(opts.page_token, DecodePageToken("jobs", tenant.id(), request.page_token()));
  // Filtered store pages may be short; keep reading until the page is full
  // or the listing ends, so clients see full pages.
  do {
    opts.page_size = want - out.jobs_size();
    ASSIGN_OR_RETURN(storage::JobStore::Page page, options_.jobs->List(opts));
    for (const storage::v1::JobRecord& j : page.jobs) {
      if (!request.task_id().empty() && j.task_id() != request.task_id()) continue;
      *out.add_jobs() = ToApi(j);
    }
    opts.page_token = page.next_page_token;
  } while (!opts.page_token.empty() && out.jobs_size() < want);
  out.set_next_page_token(EncodePageToken("jobs", tenant.id(), opts.page_token));
  return out;
}

absl::StatusOr<v1::TrainingJob> Backend::CancelTrainingJob(const Tenant& tenant,
                                                           const v1::CancelTrainingJobRequest& request) {
  RETURN_IF_ERROR(CheckCancelTrainingJobRequest(request));
  ASSIGN_OR_RETURN(storage::v1::JobRecord job, options_.jobs->Cancel(tenant.id(), request.job_id()));
  return ToApi(job);
}

absl::Status Backend::WatchTrainingJob(const Tenant& tenant, const v1::WatchTrainingJobRequest& request,
                                       const std::function<bool(const v1::WatchTrainingJobResponse&)>& send,
                                       const std::function<absl::Status()>& stop) {
  RETURN_IF_ERROR(CheckWatchTrainingJobRequest(request));
  int64_t after = request.after_seq();
  bool first = true;
  while (true) {
    RETURN_IF_ERROR(stop());
    if (options_.jobs->shutting_down()) return absl::UnavailableError("adapterd is shutting down; watch again");
    ASSIGN_OR_RETURN(std::vector<storage::v1::JobEvent> events,
                     options_.jobs->WaitForEvents(tenant.id(), request.job_id(), after,
                                                  first ? absl::ZeroDuration() : options_.watch_poll));
    ASSIGN_OR_RETURN(storage::v1::JobRecord job, options_.jobs->Get(tenant.id(), request.job_id()));
    if (first || !events.empty()) {
      v1::WatchTrainingJobResponse msg;
      *msg.mutable_job() = ToApi(job);
      for (const storage::v1::JobEvent& e : events) {
        after = std::max(after, e.seq());
        *msg.add_events() = ToApi(e, job.task_kind());
      }
      if (!send(msg)) return absl::CancelledError("the client went away");
      first = false;
    }
    // Terminal and every event delivered: WaitForEvents returns at once for
    // a terminal job, so an empty answer means there is nothing more.
    if (IsTerminal(job.state()) && events.empty()) return absl::OkStatus();
  }
}

absl::StatusOr<v1::Task> Backend::TaskView(const storage::v1::TaskRecord& t, bool with_size) const {
  v1::Task out = ToApi(t);
  if (t.current_version() > 0) {
    out.set_num_parameters(TaskParameters(options_.encoder->config(), t));
    if (t.current_adapter_bytes() > 0) {
      out.set_adapter_bytes(t.current_adapter_bytes());
    } else if (with_size) {  // a record from before the size was stored with it
      ASSIGN_OR_RETURN(std::string bytes, options_.db->adapters().Get(t.tenant(), t.task_id(), t.current_version()));
      out.set_adapter_bytes(static_cast<int64_t>(bytes.size()));
    }
  }
  return out;
}

namespace {

// A task being created by its first job, as the API shows it: PENDING, no
// version, its kind as the job asks.
storage::v1::TaskRecord PendingTaskRecord(const storage::v1::JobRecord& job) {
  storage::v1::TaskRecord t;
  t.set_tenant(job.tenant());
  t.set_task_id(job.task_id());
  t.set_state(storage::v1::TASK_STATE_PENDING);
  t.set_task_kind(job.task_kind());
  t.set_created_at_micros(job.created_at_micros());
  t.set_updated_at_micros(job.updated_at_micros());
  return t;
}

}  // namespace

absl::StatusOr<v1::Task> Backend::GetTask(const Tenant& tenant, const v1::GetTaskRequest& request) {
  RETURN_IF_ERROR(CheckGetTaskRequest(request));
  absl::StatusOr<storage::v1::TaskRecord> t = options_.db->tasks().Get(tenant.id(), request.task_id());
  if (absl::IsNotFound(t.status())) {
    ASSIGN_OR_RETURN(const auto pending, options_.jobs->PendingTasks(tenant.id()));
    if (const auto it = pending.find(request.task_id()); it != pending.end()) {
      return TaskView(PendingTaskRecord(it->second), /*with_size=*/false);
    }
  }
  RETURN_IF_ERROR(t.status());
  return TaskView(*t, /*with_size=*/true);
}

absl::StatusOr<v1::ListTasksResponse> Backend::ListTasks(const Tenant& tenant, const v1::ListTasksRequest& request) {
  RETURN_IF_ERROR(CheckListTasksRequest(request));
  ASSIGN_OR_RETURN(const int want, EffectivePageSize(request.page_size()));
  ASSIGN_OR_RETURN(const std::string token, DecodePageToken("tasks", tenant.id(), request.page_token()));
  ASSIGN_OR_RETURN(storage::TaskStore::Page page, options_.db->tasks().List(tenant.id(), want, token));
  // Pending tasks (no record yet) merge in id order: those after the token
  // and, when stored tasks go on past this page, up to its last id.
  ASSIGN_OR_RETURN(const auto pending, options_.jobs->PendingTasks(tenant.id()));
  std::map<std::string, storage::v1::TaskRecord> merged;
  for (storage::v1::TaskRecord& t : page.tasks) {
    std::string id = t.task_id();
    merged.emplace(std::move(id), std::move(t));
  }
  const bool stored_more = !page.next_page_token.empty();
  for (const auto& [id, job] : pending) {
    if (id <= token || (stored_more && id > page.next_page_token)) continue;
    merged.emplace(id, PendingTaskRecord(job));
  }
  v1::ListTasksResponse out;
  std::string last;
  for (const auto& [id, t] : merged) {
    if (out.tasks_size() == want) break;
    ASSIGN_OR_RETURN(*out.add_tasks(), TaskView(t, /*with_size=*/false));
    last = id;
  }
  const bool more = stored_more || static_cast<int>(merged.size()) > out.tasks_size();
  out.set_next_page_token(EncodePageToken("tasks", tenant.id(), more ? last : ""));
  return out;
}

absl::Status Backend::DeleteTask(const Tenant& tenant, const v1::DeleteTaskRequest& request) {
  RETURN_IF_ERROR(CheckDeleteTaskRequest(request));
  // The queue cancels the task's jobs first, so none brings it back, and
  // tells serving (JobManager::Options::on_task_changed).
  return options_.jobs->DeleteTask(tenant.id(), request.task_id());
}

absl::Status Backend::ExportAdapter(const Tenant& tenant, const v1::ExportAdapterRequest& request,
                                    const std::function<bool(const v1::ExportAdapterResponse&)>& send) {
  RETURN_IF_ERROR(CheckExportAdapterRequest(request));
  std::string bytes;
  int64_t version = request.version();
  if (version == 0) {
    ASSIGN_OR_RETURN(storage::AdapterStore::Current current,
                     options_.db->adapters().GetCurrent(tenant.id(), request.task_id()));
    version = current.version;
    bytes = std::move(current.bytes);
  } else {
    // The task must exist first, so that a missing task and a missing
    // version say different things.
    RETURN_IF_ERROR(options_.db->tasks().Get(tenant.id(), request.task_id()).status());
    ASSIGN_OR_RETURN(bytes, options_.db->adapters().Get(tenant.id(), request.task_id(), version));
  }
  if (request.format() == v1::ADAPTER_FORMAT_ADAPTERHUB) {
    ASSIGN_OR_RETURN(bytes, AdapterHubZip(request.task_id(), bytes, request.accept_layer_norm_loss()));
  }
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, options_.export_chunk_bytes));
  for (size_t off = 0; off < bytes.size(); off += chunk) {
    v1::ExportAdapterResponse msg;
    if (off == 0) {
      msg.set_version(version);
      msg.set_total_bytes(static_cast<int64_t>(bytes.size()));
    }
    msg.set_chunk(bytes.substr(off, chunk));
    if (!send(msg)) return absl::CancelledError("the client went away");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Backend::AdapterHubZip(const std::string& task_id, std::string_view adapter_file,
                                                   bool accept_layer_norm_loss) const {
  const model::BertEncoder& encoder = *options_.encoder;
  ASSIGN_OR_RETURN(const model::AdapterFileInfo info, model::ReadAdapterInfo(adapter_file));
  ASSIGN_OR_RETURN(
      const std::unique_ptr<model::AdapterSet> set,
      model::DeserializeAdapterSet(adapter_file, encoder.config(), encoder.fingerprint(), c10::Device(c10::kCPU),
                                   {.v1_fingerprint = encoder.weights_fingerprint()}));
  // An imported task names the model its AdapterHub config named; any other
  // names this server's encoder by its fingerprint.
  const auto origin = info.extra.find("adapterhub_model_name");
  const std::string model_name = origin != info.extra.end()
                                     ? origin->second
                                     : absl::StrCat("adapterd-encoder-", encoder.fingerprint().substr(0, 16));
  ASSIGN_OR_RETURN(model::AdapterHubFiles files,
                   model::ExportAdapterHub(
                       *set, encoder.config(), encoder.weights(),
                       {.name = task_id, .model_name = model_name, .accept_layer_norm_loss = accept_layer_norm_loss}));
  return WriteZipFiles(files);  // AdapterHubFiles is a ZipFiles: name -> bytes
}

absl::StatusOr<std::unique_ptr<AdapterImport>> Backend::BeginImport(
    const Tenant& tenant, const v1::ImportAdapterRequest::Metadata& metadata) {
  RETURN_IF_ERROR(CheckImportAdapterMetadata(metadata));
  if (metadata.total_bytes() > options_.max_adapter_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("the adapter file is ", metadata.total_bytes(),
                                                     " bytes; this server imports at most ",
                                                     options_.max_adapter_bytes));
  }
  ASSIGN_OR_RETURN(UsageLedger::Hold memory, import_bytes_.Open(tenant.id(), nullptr));
  // A declared size is reserved at once: refused now rather than after the
  // bytes are sent.
  if (metadata.total_bytes() > 0) RETURN_IF_ERROR(memory.Grow(metadata.total_bytes(), UsageLedger::kUnlimited));
  return std::unique_ptr<AdapterImport>(new AdapterImport(this, &tenant, metadata.task_id(), metadata.total_bytes(),
                                                          metadata.format() == v1::ADAPTER_FORMAT_ADAPTERHUB,
                                                          std::move(memory)));
}

absl::StatusOr<v1::Task> Backend::ImportAdapter(const Tenant& tenant, const std::string& task_id, std::string bytes) {
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  if (bytes.empty()) return absl::InvalidArgumentError("the adapter file is empty");
  ASSIGN_OR_RETURN(model::AdapterFileInfo info, model::ReadAdapterInfo(bytes));
  const model::BertEncoder& encoder = *options_.encoder;
  // Parse every tensor against this encoder (fingerprint, shapes, finite
  // values) before anything is stored.
  RETURN_IF_ERROR(model::DeserializeAdapterSet(bytes, encoder.config(), encoder.fingerprint(), c10::Device(c10::kCPU),
                                               {.v1_fingerprint = encoder.weights_fingerprint()})
                      .status());
  return CreateImportedTask(tenant, task_id, info.config, info.encoder_fingerprint, std::move(bytes));
}

absl::StatusOr<v1::Task> Backend::ImportAdapterHub(const Tenant& tenant, const std::string& task_id, std::string zip,
                                                   UsageLedger::Hold* memory) {
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  if (zip.empty()) return absl::InvalidArgumentError("the AdapterHub zip is empty");
  // The inflated files are held beside the zip: the import's hold grows by
  // what the zip records before anything is inflated.
  ZipFilesLimits limits{.max_entries = 16, .max_total_bytes = static_cast<uint64_t>(options_.max_adapter_bytes)};
  limits.reserve = [memory](uint64_t total) {
    return memory->Grow(static_cast<int64_t>(total), UsageLedger::kUnlimited);
  };
  absl::StatusOr<ZipFiles> files = ReadZipFiles(zip, limits);
  if (!files.ok()) {
    if (absl::IsResourceExhausted(files.status())) return files.status();
    return absl::Status(files.status().code(), absl::StrCat("the AdapterHub zip: ", files.status().message()));
  }
  std::string().swap(zip);  // its memory back now, not when the import ends
  const model::BertEncoder& encoder = *options_.encoder;
  ASSIGN_OR_RETURN(model::ImportedAdapterHub imported,
                   model::ImportAdapterHub(*files, encoder.config(), encoder.weights()));
  // Stored as an adapterd file for this encoder, recording its origin.
  std::map<std::string, std::string> origin = {{"imported_from", "adapterhub"},
                                               {"adapterhub_name", imported.adapter.name},
                                               {"adapterhub_model_name", imported.adapter.model_name}};
  if (!imported.adapter.version.empty()) origin["adapterhub_version"] = imported.adapter.version;
  ASSIGN_OR_RETURN(std::string bytes, model::SerializeAdapterSet(*imported.set, encoder.fingerprint(), origin));
  ASSIGN_OR_RETURN(v1::Task task, CreateImportedTask(tenant, task_id, imported.set->config(), encoder.fingerprint(),
                                                     std::move(bytes)));
  task.set_import_warning(absl::StrCat(
      "an AdapterHub directory carries no fingerprint of the model it was trained on: only the encoder's shape was "
      "checked (hidden size ",
      encoder.config().hidden_size, ", ", encoder.config().num_hidden_layers, " layers); its config names the model '",
      imported.adapter.model_name, "', and its predictions are meaningful only if this server runs that model"));
  return task;
}

absl::StatusOr<v1::Task> Backend::CreateImportedTask(const Tenant& tenant, const std::string& task_id,
                                                     const model::AdapterConfig& config,
                                                     const std::string& encoder_fingerprint, std::string bytes) {
  absl::StatusOr<storage::v1::TaskRecord> existing = options_.db->tasks().Get(tenant.id(), task_id);
  if (existing.ok()) return absl::AlreadyExistsError(absl::StrCat("task '", task_id, "' already exists"));
  if (!absl::IsNotFound(existing.status())) return existing.status();
  RETURN_IF_ERROR(options_.jobs
                      ->ImportVersion(training::TaskRecordFor(tenant.id(), task_id, config, encoder_fingerprint),
                                      std::move(bytes), tenant.quotas().max_tasks)
                      .status());
  ASSIGN_OR_RETURN(storage::v1::TaskRecord t, options_.db->tasks().Get(tenant.id(), task_id));
  return TaskView(t, /*with_size=*/true);
}

absl::StatusOr<v1::PredictResponse> Backend::Predict(const Tenant& tenant, const v1::PredictRequest& request,
                                                     absl::Time deadline) {
  RETURN_IF_ERROR(CheckPredictRequest(request));
  if (request.texts_size() > tenant.quotas().max_texts_per_predict) {
    return absl::ResourceExhaustedError(absl::StrCat(request.texts_size(), " texts in one Predict; the limit is ",
                                                     tenant.quotas().max_texts_per_predict));
  }
  RETURN_IF_ERROR(tenant.AdmitPredict(absl::Now()));
  serving::PredictRequest in;
  in.tenant = tenant.id();
  in.task_id = request.task_id();
  in.texts.assign(request.texts().begin(), request.texts().end());
  in.text_pairs.assign(request.text_pairs().begin(), request.text_pairs().end());
  in.version = request.version();
  in.deadline = deadline;
  in.threshold = request.threshold();
  in.top_k_answers = request.top_k_answers();
  in.tenant_weight = tenant.quotas().batch_weight;
  absl::StatusOr<serving::PredictResult> result = options_.engine->Predict(in);
  if (absl::IsNotFound(result.status()) && request.version() == 0) {
    // A task whose first job runs exists (GetTask says PENDING): not NOT_FOUND.
    ASSIGN_OR_RETURN(const auto pending, options_.jobs->PendingTasks(tenant.id()));
    if (const auto it = pending.find(request.task_id()); it != pending.end()) {
      return absl::FailedPreconditionError(absl::StrCat("task '", request.task_id(),
                                                        "' has no version yet: its first training job '",
                                                        it->second.job_id(), "' has not finished"));
    }
  }
  RETURN_IF_ERROR(result.status());
  v1::PredictResponse out;
  out.set_version(result->version);
  out.set_task_kind(ToApi(training::RecordKind(result->kind)));
  for (int i = 0; i < request.texts_size(); ++i) AddPrediction(*result, static_cast<size_t>(i), request, out);
  return out;
}

void Backend::AddPrediction(const serving::PredictResult& result, size_t i, const v1::PredictRequest& request,
                            v1::PredictResponse& out) {
  const serving::TextPrediction& text = result.texts[i];
  v1::Prediction* p = out.add_predictions();
  const auto label_name = [&](const model::LabelProbability& l) { return result.labels[static_cast<size_t>(l.label)]; };
  if (text.label) {
    p->set_label(label_name(*text.label));
    p->set_score(static_cast<float>(text.label->probability));
  }
  for (const model::LabelProbability& l : text.labels) {
    v1::LabelScore* s = p->add_labels();
    s->set_label(label_name(l));
    s->set_score(static_cast<float>(l.probability));
  }
  if (request.return_all_scores()) {
    for (size_t l = 0; l < text.probabilities.size(); ++l) {
      v1::LabelScore* s = p->add_all_scores();
      s->set_label(result.labels[l]);
      s->set_score(text.probabilities[l]);
    }
  }
  if (text.value) p->set_value(*text.value);
  for (const serving::Entity& e : text.entities) {
    v1::Entity* x = p->add_entities();
    x->set_label(e.label);
    x->set_start(e.start);
    x->set_end(e.end);
    x->set_text(e.text);
    x->set_score(static_cast<float>(e.score));
  }
  for (const model::TextAnswer& a : text.answers) {
    v1::Answer* x = p->add_answers();
    x->set_text(a.text);
    x->set_start(a.start);
    x->set_end(a.end);
    x->set_score(static_cast<float>(a.score));
  }
}

}  // namespace adapterd::api
