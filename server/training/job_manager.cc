#include "server/training/job_manager.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/routing.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "server/model/adapter_set.h"
#include "server/model/task_kinds.h"
#include "server/training/kind_records.h"
#include "server/training/task_rows.h"

namespace adapterd::training {
namespace {

// The value of an epoch's metrics that selects a kind's best epoch (the
// trainer's SelectionMetric; higher is better). Jobs stored before the kinds
// have none: classification.
double KindMetric(storage::v1::TaskKind kind, const storage::v1::EpochMetrics& m) {
  return SelectionMetric(ModelKind(kind), EvaluationOfRecord(m));
}

using storage::v1::JobState;

// Canonical bytes of what a request asks for, for idempotency checks.
std::string RequestFingerprint(const JobRequest& r) {
  storage::v1::JobRecord canonical;
  canonical.set_task_id(r.task_id);
  for (const std::string& d : r.dataset_ids) canonical.add_dataset_ids(d);
  canonical.set_validation_dataset_id(r.validation_dataset_id);
  *canonical.mutable_hyperparameters() = r.hyperparameters;
  canonical.set_task_kind(r.task_kind);
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    canonical.SerializeToCodedStream(&coded);
  }
  return Sha256Hex(bytes);
}

storage::v1::JobEvent StateEvent(JobState from, JobState to, const std::string& reason, int64_t now) {
  storage::v1::JobEvent e;
  e.set_time_micros(now);
  auto* sc = e.mutable_state_change();
  sc->set_from(from);
  sc->set_to(to);
  sc->set_reason(reason);
  return e;
}

// Copies what validation resolved into the job.
void ApplyOutcome(const ValidationOutcome& outcome, storage::v1::JobRecord& job) {
  job.clear_labels();
  for (const std::string& l : outcome.labels) job.add_labels(l);
  job.set_num_train_examples(outcome.num_train_examples);
  job.set_num_validation_examples(outcome.num_validation_examples);
  if (outcome.hyperparameters.has_value()) *job.mutable_hyperparameters() = *outcome.hyperparameters;
  job.set_task_kind(outcome.task_kind);
}

// Appends validation's warnings as "dataset" warning events.
absl::Status AppendWarnings(storage::Batch& batch, const std::string& job_id, const std::vector<std::string>& warnings,
                            int64_t now) {
  for (const std::string& w : warnings) {
    storage::v1::JobEvent e;
    e.set_time_micros(now);
    e.mutable_warning()->set_message(w);
    e.mutable_warning()->set_kind("dataset");
    RETURN_IF_ERROR(batch.AppendEvent(job_id, e));
  }
  return absl::OkStatus();
}

// A new job's record as a request describes it, VALIDATING. The id carries
// the task, so a router can route calls naming only the job
// (common/routing.h); its time prefix keeps id order = creation order.
storage::v1::JobRecord NewJobRecord(const JobRequest& request, const std::string& fingerprint, int64_t now) {
  storage::v1::JobRecord job;
  job.set_job_id(MintId("job", now, request.task_id));
  job.set_tenant(request.tenant);
  job.set_task_id(request.task_id);
  job.set_request_id(request.request_id);
  job.set_request_fingerprint(fingerprint);
  job.set_state(storage::v1::JOB_STATE_VALIDATING);
  *job.mutable_hyperparameters() = request.hyperparameters;
  for (const std::string& d : request.dataset_ids) job.add_dataset_ids(d);
  job.set_validation_dataset_id(request.validation_dataset_id);
  job.set_task_kind(request.task_kind);
  return job;
}

// Adds a validated job to `batch`: the record, its history (created,
// validated, the dataset warnings) and its queue entry, for one synced write.
absl::Status AddNewJob(storage::Batch& batch, const storage::v1::JobRecord& job,
                       const std::vector<std::string>& warnings, int64_t now) {
  RETURN_IF_ERROR(batch.CreateJob(job));
  RETURN_IF_ERROR(batch.AppendEvent(
      job.job_id(), StateEvent(storage::v1::JOB_STATE_UNSPECIFIED, storage::v1::JOB_STATE_VALIDATING, "created", now)));
  RETURN_IF_ERROR(batch.AppendEvent(
      job.job_id(), StateEvent(storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED, "validated", now)));
  RETURN_IF_ERROR(AppendWarnings(batch, job.job_id(), warnings, now));
  return batch.Enqueue(job.tenant(), job.job_id(), now);
}

}  // namespace

storage::v1::TaskRecord TaskRecordFor(const std::string& tenant, const std::string& task_id,
                                      const model::AdapterConfig& config, const std::string& encoder_fingerprint) {
  storage::v1::TaskRecord task;
  task.set_tenant(tenant);
  task.set_task_id(task_id);
  task.set_task_kind(RecordKind(config.kind));
  for (const std::string& l : config.labels) task.add_labels(l);
  task.mutable_adapter_config()->set_bottleneck_size(static_cast<int32_t>(config.bottleneck_size));
  task.mutable_adapter_config()->set_activation(std::string(model::ActivationName(config.activation)));
  task.set_encoder_fingerprint(encoder_fingerprint);
  return task;
}

absl::StatusOr<storage::v1::TaskKind> ResolveTaskKind(storage::v1::TaskKind requested,
                                                      const storage::v1::TaskRecord* existing) {
  const auto name = [](storage::v1::TaskKind k) { return std::string(model::TaskKindName(ModelKind(k))); };
  storage::v1::TaskKind kind = requested;
  if (existing != nullptr) {
    const storage::v1::TaskKind has = existing->task_kind() == storage::v1::TASK_KIND_UNSPECIFIED
                                          ? storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION
                                          : existing->task_kind();
    if (kind == storage::v1::TASK_KIND_UNSPECIFIED) kind = has;
    if (kind != has) {
      return absl::FailedPreconditionError(absl::StrCat("task '", existing->task_id(), "' is of kind ", name(has),
                                                        "; a job cannot train it as ", name(kind)));
    }
  }
  if (kind == storage::v1::TASK_KIND_UNSPECIFIED) kind = storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION;
  if (!storage::v1::TaskKind_IsValid(kind)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown task kind ", static_cast<int>(kind)));
  }
  return kind;
}

absl::Status CheckTransition(JobState from, JobState to) {
  bool ok = false;
  switch (from) {
    case storage::v1::JOB_STATE_VALIDATING:
      ok = to == storage::v1::JOB_STATE_QUEUED || to == storage::v1::JOB_STATE_FAILED ||
           to == storage::v1::JOB_STATE_CANCELLED;
      break;
    case storage::v1::JOB_STATE_QUEUED:
      ok = to == storage::v1::JOB_STATE_RUNNING || to == storage::v1::JOB_STATE_CANCELLED;
      break;
    case storage::v1::JOB_STATE_RUNNING:
      ok = to == storage::v1::JOB_STATE_SUCCEEDED || to == storage::v1::JOB_STATE_FAILED ||
           to == storage::v1::JOB_STATE_CANCELLING || to == storage::v1::JOB_STATE_CANCELLED;
      break;
    case storage::v1::JOB_STATE_CANCELLING:
      ok = to == storage::v1::JOB_STATE_CANCELLED || to == storage::v1::JOB_STATE_FAILED;
      break;
    default:
      ok = false;  // terminal or unspecified
  }
  if (ok) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("job is ", JobStateName(from), "; it cannot become ", JobStateName(to)));
}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(Options options) {
  if (options.db == nullptr) return absl::InvalidArgumentError("JobManager needs a database");
  if (!options.validator) return absl::InvalidArgumentError("JobManager needs a validator");
  auto manager = std::unique_ptr<JobManager>(new JobManager(std::move(options)));
  RETURN_IF_ERROR(manager->Recover());
  return manager;
}

int64_t JobManager::Now() const {
  if (options_.now_micros) return options_.now_micros();
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void JobManager::TaskChanged(const std::string& tenant, const std::string& task_id) const {
  if (options_.on_task_changed) options_.on_task_changed(tenant, task_id);
}

void JobManager::NotifyEvents() const {
  absl::MutexLock l(&events_mu_);
  ++event_generation_;
}

absl::Status JobManager::Recover() {
  storage::JobStore& jobs = options_.db->jobs();
  // Every unfinished job, page by page.
  std::vector<storage::v1::JobRecord> unfinished;
  storage::JobStore::ListOptions list;
  list.states = {storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED, storage::v1::JOB_STATE_RUNNING,
                 storage::v1::JOB_STATE_CANCELLING};
  do {
    ASSIGN_OR_RETURN(storage::JobStore::Page page, jobs.List(list));
    unfinished.insert(unfinished.end(), page.jobs.begin(), page.jobs.end());
    list.page_token = page.next_page_token;
  } while (!list.page_token.empty());

  std::vector<storage::v1::JobRecord> running, validating;
  std::set<std::string> queued;
  for (storage::v1::JobRecord& job : unfinished) {
    switch (job.state()) {
      case storage::v1::JOB_STATE_RUNNING:
        running.push_back(job);
        break;
      case storage::v1::JOB_STATE_VALIDATING:
        validating.push_back(job);
        break;
      case storage::v1::JOB_STATE_QUEUED:
        queued.insert(job.job_id());
        break;
      case storage::v1::JOB_STATE_CANCELLING:
        RETURN_IF_ERROR(Transition(job, storage::v1::JOB_STATE_CANCELLED, "cancelled while the server was stopped"));
        break;
      default:
        break;
    }
  }
  std::sort(running.begin(), running.end(),
            [](const auto& a, const auto& b) { return a.started_at_micros() < b.started_at_micros(); });
  ASSIGN_OR_RETURN(std::vector<storage::v1::QueueEntry> entries, jobs.ListQueue());
  {
    absl::MutexLock l(&mu_);
    for (storage::v1::JobRecord& job : running) resume_.push_back(std::move(job));
    for (const storage::v1::QueueEntry& e : entries) {
      if (!queued.erase(e.job_id())) continue;  // stale entry: the job moved on
      job_queue_.Push(e.tenant(), e.job_id());
      queue_seq_[e.job_id()] = e.seq();
    }
  }
  // QUEUED jobs without a queue entry cannot arise from our batches; requeue
  // them rather than strand them.
  for (const std::string& job_id : queued) {
    for (const storage::v1::JobRecord& job : unfinished) {
      if (job.job_id() != job_id) continue;
      storage::Batch b;
      RETURN_IF_ERROR(b.Enqueue(job.tenant(), job.job_id(), Now()));
      RETURN_IF_ERROR(options_.db->Commit(b));
      absl::MutexLock l(&mu_);
      job_queue_.Push(job.tenant(), job.job_id());
      queue_seq_[job.job_id()] = b.committed_queue_entries()[0].seq();
    }
  }
  for (storage::v1::JobRecord& job : validating) {
    {
      absl::MutexLock l(&mu_);
      ++validating_[job.tenant()];
    }
    (void)ValidateAndEnqueue(std::move(job));  // a rejection is recorded as FAILED
  }
  return absl::OkStatus();
}

absl::Status JobManager::Transition(storage::v1::JobRecord& job, JobState to, const std::string& reason,
                                    const std::function<absl::Status(storage::Batch&)>& extra, int64_t* enqueued_seq) {
  absl::MutexLock t(&transition_mu_);
  return TransitionLocked(job, to, reason, extra, enqueued_seq);
}

absl::Status JobManager::TransitionLocked(storage::v1::JobRecord& job, JobState to, const std::string& reason,
                                          const std::function<absl::Status(storage::Batch&)>& extra,
                                          int64_t* enqueued_seq) {
  ASSIGN_OR_RETURN(storage::v1::JobRecord stored, options_.db->jobs().Get(job.tenant(), job.job_id()));
  if (stored.state() != job.state()) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job.job_id(), "' is now ", JobStateName(stored.state()),
                                                      ", not ", JobStateName(job.state())));
  }
  RETURN_IF_ERROR(CheckTransition(stored.state(), to));
  storage::v1::JobRecord next = job;
  // Progress is written by RecordEvent on the stored record; keep its latest.
  *next.mutable_progress() = stored.progress();
  if (stored.has_best_metrics()) *next.mutable_best_metrics() = stored.best_metrics();
  const int64_t now = Now();
  next.set_state(to);
  next.set_updated_at_micros(now);
  if (to == storage::v1::JOB_STATE_RUNNING) {
    if (next.started_at_micros() == 0) next.set_started_at_micros(now);
    next.set_attempts(stored.attempts() + 1);
  }
  if (IsTerminal(to)) next.set_finished_at_micros(now);
  storage::Batch batch;
  RETURN_IF_ERROR(batch.PutJob(next));
  RETURN_IF_ERROR(batch.AppendEvent(next.job_id(), StateEvent(job.state(), to, reason, now)));
  if (extra) RETURN_IF_ERROR(extra(batch));
  RETURN_IF_ERROR(options_.db->Commit(batch));
  if (enqueued_seq != nullptr && !batch.committed_queue_entries().empty()) {
    *enqueued_seq = batch.committed_queue_entries().back().seq();
  }
  job = std::move(next);
  NotifyEvents();
  return absl::OkStatus();
}

absl::Status JobManager::ReserveSlot(const JobRequest& request) {
  absl::MutexLock l(&mu_);
  if (shutdown_) return absl::UnavailableError("the job queue is shutting down");
  const int64_t tenant_waiting = static_cast<int64_t>(job_queue_.size(request.tenant)) + validating_[request.tenant];
  if (tenant_waiting >= request.max_queued_for_tenant) {
    return absl::ResourceExhaustedError(absl::StrCat("tenant '", request.tenant, "' already has ", tenant_waiting,
                                                     " jobs waiting; its limit is ", request.max_queued_for_tenant));
  }
  int total_validating = 0;
  for (const auto& [t, n] : validating_) total_validating += n;
  if (static_cast<int>(job_queue_.size()) + total_validating >= options_.limits.max_queued_total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the training queue is full (", options_.limits.max_queued_total, " jobs waiting)"));
  }
  ++validating_[request.tenant];  // reserve the slot while validating
  return absl::OkStatus();
}

absl::StatusOr<std::optional<storage::v1::JobRecord>> JobManager::JobOfRequest(const JobRequest& request,
                                                                               const std::string& fingerprint) const {
  if (request.request_id.empty()) return std::nullopt;
  absl::StatusOr<storage::v1::JobRecord> existing =
      options_.db->jobs().FindByRequestId(request.tenant, request.request_id);
  if (absl::IsNotFound(existing.status())) return std::nullopt;
  if (!existing.ok()) return existing.status();
  if (existing->request_fingerprint() != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat("request_id '", request.request_id,
                                                   "' was already used for a different request (job ",
                                                   existing->job_id(), ")"));
  }
  return *existing;
}

absl::StatusOr<storage::v1::JobRecord> JobManager::Submit(const JobRequest& request) {
  if (request.max_queued_for_tenant < 1) {
    return absl::InvalidArgumentError("JobRequest.max_queued_for_tenant must be at least 1 (the tenant's quota)");
  }
  // Held until the job is stored: a task or dataset delete waits for it.
  absl::ReaderMutexLock deletes(&deletes_mu_);
  const std::string fingerprint = RequestFingerprint(request);
  ASSIGN_OR_RETURN(std::optional<storage::v1::JobRecord> existing, JobOfRequest(request, fingerprint));
  if (existing.has_value()) return *std::move(existing);
  RETURN_IF_ERROR(ReserveSlot(request));
  auto release_slot = [&] {
    absl::MutexLock l(&mu_);
    --validating_[request.tenant];
  };
  // Validate before anything is stored: a rejected request leaves no record
  // and does not claim its request_id. The slot reserved above keeps
  // concurrent validations within the limits.
  storage::v1::JobRecord job = NewJobRecord(request, fingerprint, Now());
  absl::StatusOr<ValidationOutcome> outcome = options_.validator(job);
  if (!outcome.ok()) {
    release_slot();
    return outcome.status();
  }
  ApplyOutcome(*outcome, job);
  const int64_t now = Now();
  job.set_state(storage::v1::JOB_STATE_QUEUED);
  job.set_created_at_micros(now);
  job.set_updated_at_micros(now);
  storage::Batch create;
  absl::Status stored = AdmitTask(request.tenant, request.task_id, request.max_tasks_for_tenant,
                                  /*must_be_new=*/false, [&] {
                                    RETURN_IF_ERROR(AddNewJob(create, job, outcome->warnings, now));
                                    return options_.db->Commit(create);
                                  });
  if (!stored.ok()) {
    release_slot();
    // Lost a race with the same request_id: answer as the winner's request
    // is answered.
    if (absl::IsAlreadyExists(stored)) {
      ASSIGN_OR_RETURN(std::optional<storage::v1::JobRecord> winner, JobOfRequest(request, fingerprint));
      if (winner.has_value()) return *std::move(winner);
    }
    return stored;
  }
  {
    absl::MutexLock l(&mu_);
    --validating_[request.tenant];
    job_queue_.Push(job.tenant(), job.job_id());
    queue_seq_[job.job_id()] = create.committed_queue_entries().back().seq();
  }
  NotifyEvents();
  return job;
}

absl::StatusOr<storage::v1::JobRecord> JobManager::ValidateAndEnqueue(storage::v1::JobRecord job) {
  absl::StatusOr<ValidationOutcome> outcome = options_.validator(job);
  absl::Status result;
  int64_t seq = 0;
  if (!outcome.ok()) {
    job.set_error_message(std::string(outcome.status().message()));
    job.set_error_code(static_cast<int>(outcome.status().code()));
    result = Transition(job, storage::v1::JOB_STATE_FAILED, std::string(outcome.status().message()));
  } else {
    ApplyOutcome(*outcome, job);
    const int64_t now = Now();
    result = Transition(
        job, storage::v1::JOB_STATE_QUEUED, "validated",
        [&](storage::Batch& b) -> absl::Status {
          RETURN_IF_ERROR(AppendWarnings(b, job.job_id(), outcome->warnings, now));
          return b.Enqueue(job.tenant(), job.job_id(), now);
        },
        &seq);
  }
  absl::MutexLock l(&mu_);
  --validating_[job.tenant()];
  if (!result.ok()) return result;  // e.g. cancelled while validating
  if (!outcome.ok()) return outcome.status();
  job_queue_.Push(job.tenant(), job.job_id());
  queue_seq_[job.job_id()] = seq;
  return job;
}

absl::StatusOr<storage::v1::JobRecord> JobManager::Get(const std::string& tenant, const std::string& job_id) const {
  return options_.db->jobs().Get(tenant, job_id);
}

absl::StatusOr<storage::JobStore::Page> JobManager::List(const storage::JobStore::ListOptions& options) const {
  return options_.db->jobs().List(options);
}

absl::StatusOr<storage::v1::JobRecord> JobManager::Cancel(const std::string& tenant, const std::string& job_id,
                                                          const std::string& reason) {
  // Held from the read to the last write: the worker's own transitions (to
  // RUNNING, and its end, which a cancel request below may trigger) wait
  // until this cancel's state is stored, so the state read here is the one
  // this cancel moves on from.
  absl::MutexLock t(&transition_mu_);
  ASSIGN_OR_RETURN(storage::v1::JobRecord job, options_.db->jobs().Get(tenant, job_id));
  if (!reason.empty() && !IsTerminal(job.state())) job.set_error_message(reason);
  auto why = [&](const char* client_reason) { return reason.empty() ? std::string(client_reason) : reason; };
  switch (job.state()) {
    case storage::v1::JOB_STATE_QUEUED: {
      int64_t seq = 0;
      {
        absl::MutexLock l(&mu_);
        if (!job_queue_.Remove(job.tenant(), job.job_id())) {
          // The worker took it a moment ago: cancel it as a running job.
          cancel_requested_[job_id] = reason;
          break;
        }
        auto it = queue_seq_.find(job_id);
        if (it != queue_seq_.end()) {
          seq = it->second;
          queue_seq_.erase(it);
        }
      }
      RETURN_IF_ERROR(TransitionLocked(job, storage::v1::JOB_STATE_CANCELLED, why("cancelled while queued"),
                                       [&](storage::Batch& b) { return seq > 0 ? b.Dequeue(seq) : absl::OkStatus(); }));
      return job;
    }
    case storage::v1::JOB_STATE_VALIDATING:
      RETURN_IF_ERROR(TransitionLocked(job, storage::v1::JOB_STATE_CANCELLED, why("cancelled while validating")));
      return job;
    case storage::v1::JOB_STATE_RUNNING: {
      {
        absl::MutexLock l(&mu_);
        cancel_requested_[job_id] = reason;
      }
      RETURN_IF_ERROR(TransitionLocked(job, storage::v1::JOB_STATE_CANCELLING, why("cancel requested")));
      return job;
    }
    case storage::v1::JOB_STATE_CANCELLING:
      return job;
    default:
      return absl::FailedPreconditionError(
          absl::StrCat("job '", job_id, "' is ", JobStateName(job.state()), " and can no longer be cancelled"));
  }
  // QUEUED but already taken by the worker.
  ASSIGN_OR_RETURN(job, options_.db->jobs().Get(tenant, job_id));
  if (job.state() == storage::v1::JOB_STATE_RUNNING) {
    if (!reason.empty()) job.set_error_message(reason);
    RETURN_IF_ERROR(TransitionLocked(job, storage::v1::JOB_STATE_CANCELLING, why("cancel requested")));
  }
  return job;
}

absl::StatusOr<std::vector<storage::v1::JobRecord>> JobManager::UnfinishedJobs(const std::string& tenant) const {
  std::vector<storage::v1::JobRecord> out;
  storage::JobStore::ListOptions list;
  list.tenant = tenant;
  list.states = {storage::v1::JOB_STATE_VALIDATING, storage::v1::JOB_STATE_QUEUED, storage::v1::JOB_STATE_RUNNING,
                 storage::v1::JOB_STATE_CANCELLING};
  list.page_size = storage::kMaxPageSize;
  do {
    ASSIGN_OR_RETURN(storage::JobStore::Page page, options_.db->jobs().List(list));
    for (storage::v1::JobRecord& j : page.jobs) out.push_back(std::move(j));
    list.page_token = page.next_page_token;
  } while (!list.page_token.empty());
  return out;
}

absl::Status JobManager::DeleteTask(const std::string& tenant, const std::string& task_id) {
  absl::WriterMutexLock deletes(&deletes_mu_);
  ASSIGN_OR_RETURN(const std::vector<storage::v1::JobRecord> unfinished, UnfinishedJobs(tenant));
  int cancelled = 0;
  for (const storage::v1::JobRecord& job : unfinished) {
    if (job.task_id() != task_id) continue;
    absl::StatusOr<storage::v1::JobRecord> c = Cancel(tenant, job.job_id(), "task deleted");
    if (c.ok()) {
      ++cancelled;
    } else if (!absl::IsFailedPrecondition(c.status())) {  // it finished meanwhile: nothing to stop
      return c.status();
    }
  }
  absl::Status deleted = options_.db->tasks().Delete(tenant, task_id);
  TaskChanged(tenant, task_id);
  // A task whose first training was under way has no record yet.
  if (absl::IsNotFound(deleted) && cancelled > 0) return absl::OkStatus();
  return deleted;
}

absl::StatusOr<storage::PromotionResult> JobManager::ImportVersion(storage::v1::TaskRecord task,
                                                                   std::string adapter_bytes, int64_t max_tasks) {
  const std::string tenant = task.tenant(), task_id = task.task_id();
  const int64_t now = Now();
  task.set_created_at_micros(now);
  task.set_updated_at_micros(now);
  storage::Promotion p;
  p.task = std::move(task);
  p.adapter_bytes = std::move(adapter_bytes);
  p.expected_version = 1;  // a new task: a concurrent import or training of it loses
  absl::StatusOr<storage::PromotionResult> done;
  RETURN_IF_ERROR(AdmitTask(tenant, task_id, max_tasks, /*must_be_new=*/true, [&] {
    done = options_.db->PromoteAdapterVersion(std::move(p));
    return absl::OkStatus();
  }));
  if (absl::IsFailedPrecondition(done.status())) {
    return absl::AlreadyExistsError(absl::StrCat("task '", task_id, "' already exists"));
  }
  if (done.ok()) TaskChanged(tenant, task_id);
  return done;
}

absl::StatusOr<std::map<std::string, storage::v1::JobRecord>> JobManager::PendingTasks(
    const std::string& tenant) const {
  std::map<std::string, storage::v1::JobRecord> pending;
  ASSIGN_OR_RETURN(std::vector<storage::v1::JobRecord> unfinished, UnfinishedJobs(tenant));
  for (storage::v1::JobRecord& job : unfinished) {
    // A cancelling job never promotes (a promotion needs its job RUNNING).
    if (job.state() == storage::v1::JOB_STATE_CANCELLING) continue;
    auto it = pending.find(job.task_id());
    if (it != pending.end()) {
      if (job.created_at_micros() < it->second.created_at_micros()) it->second = std::move(job);
      continue;
    }
    absl::StatusOr<storage::v1::TaskRecord> stored = options_.db->tasks().Get(tenant, job.task_id());
    if (stored.ok()) continue;
    if (!absl::IsNotFound(stored.status())) return stored.status();
    std::string task_id = job.task_id();
    pending.emplace(std::move(task_id), std::move(job));
  }
  return pending;
}

absl::Status JobManager::AdmitTask(const std::string& tenant, const std::string& task_id, int64_t max_tasks,
                                   bool must_be_new, const std::function<absl::Status()>& create) {
  absl::MutexLock l(&task_admission_mu_);
  if (max_tasks == std::numeric_limits<int64_t>::max() && !must_be_new) return create();
  absl::StatusOr<storage::v1::TaskRecord> existing = options_.db->tasks().Get(tenant, task_id);
  if (existing.ok()) {
    if (must_be_new) return absl::AlreadyExistsError(absl::StrCat("task '", task_id, "' already exists"));
    return create();
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  ASSIGN_OR_RETURN(const auto pending, PendingTasks(tenant));
  if (const auto it = pending.find(task_id); it != pending.end()) {
    if (must_be_new) {
      return absl::AlreadyExistsError(
          absl::StrCat("task '", task_id, "' is being created by training job '", it->second.job_id(), "'"));
    }
    return create();
  }
  // Stored tasks, counted until the quota is reached (pending ones have no
  // record, so the two never overlap).
  int64_t stored = 0;
  std::string token;
  do {
    ASSIGN_OR_RETURN(storage::TaskStore::Page page, options_.db->tasks().List(tenant, storage::kMaxPageSize, token));
    stored += static_cast<int64_t>(page.tasks.size());
    token = page.next_page_token;
  } while (!token.empty() && stored + static_cast<int64_t>(pending.size()) < max_tasks);
  if (stored + static_cast<int64_t>(pending.size()) >= max_tasks) {
    return absl::ResourceExhaustedError(absl::StrCat("tenant '", tenant, "' already has its maximum of ", max_tasks,
                                                     " tasks (", stored, " stored, ", pending.size(),
                                                     " being created by their first training jobs)"));
  }
  return create();
}

absl::StatusOr<storage::v1::DatasetRecord> JobManager::DeleteDataset(const std::string& tenant,
                                                                     const std::string& dataset_id) {
  absl::WriterMutexLock deletes(&deletes_mu_);
  ASSIGN_OR_RETURN(storage::v1::DatasetRecord record, options_.db->datasets().Get(tenant, dataset_id));
  ASSIGN_OR_RETURN(const std::vector<storage::v1::JobRecord> unfinished, UnfinishedJobs(tenant));
  for (const storage::v1::JobRecord& job : unfinished) {
    const bool uses = job.validation_dataset_id() == dataset_id ||
                      std::count(job.dataset_ids().begin(), job.dataset_ids().end(), dataset_id) > 0;
    if (uses) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset '", dataset_id, "' is used by job '", job.job_id(), "', which is ", JobStateName(job.state()),
          ": cancel the job or wait for it to finish, then delete the dataset"));
    }
  }
  RETURN_IF_ERROR(options_.db->datasets().Delete(tenant, dataset_id));
  return record;
}

absl::StatusOr<std::vector<storage::v1::JobEvent>> JobManager::WaitForEvents(const std::string& tenant,
                                                                             const std::string& job_id,
                                                                             int64_t after_seq,
                                                                             absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int64_t generation;
    {
      absl::MutexLock l(&events_mu_);
      generation = event_generation_;
    }
    ASSIGN_OR_RETURN(storage::v1::JobRecord job, options_.db->jobs().Get(tenant, job_id));  // tenant check
    // Nothing comes after the largest seq (and after_seq + 1 would overflow).
    std::vector<storage::v1::JobEvent> events;
    if (after_seq < std::numeric_limits<int64_t>::max()) {
      ASSIGN_OR_RETURN(events, options_.db->jobs().ReadEvents(job_id, std::max<int64_t>(after_seq, -1) + 1));
    }
    if (!events.empty() || IsTerminal(job.state()) || absl::Now() >= deadline || shutting_down()) return events;
    absl::MutexLock l(&events_mu_);
    auto changed = [this, generation]()
                       ABSL_SHARED_LOCKS_REQUIRED(events_mu_) { return event_generation_ != generation; };
    events_mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  }
}

std::optional<storage::v1::JobRecord> JobManager::NextJob(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::optional<JobQueue::Entry> next;
    std::optional<storage::v1::JobRecord> resumed;
    int64_t seq = 0;
    {
      absl::MutexLock l(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return shutdown_ || !resume_.empty() || !job_queue_.empty();
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&ready), deadline)) return std::nullopt;
      if (shutdown_) return std::nullopt;
      if (!resume_.empty()) {
        resumed = std::move(resume_.front());
        resume_.pop_front();
        running_job_ = resumed->job_id();
      } else {
        next = job_queue_.Pop();
        auto it = queue_seq_.find(next->job_id);
        if (it != queue_seq_.end()) {
          seq = it->second;
          queue_seq_.erase(it);
        }
        running_job_ = next->job_id;
      }
    }
    if (resumed.has_value()) {
      // A new attempt of a job a restart interrupted. Counting it is
      // bookkeeping: if the write fails the job still resumes.
      (void)CountResumedAttempt(*resumed);
      return resumed;
    }
    absl::StatusOr<storage::v1::JobRecord> job = options_.db->jobs().Get(next->tenant, next->job_id);
    absl::Status started = job.status();
    if (job.ok() && job->state() == storage::v1::JOB_STATE_QUEUED) {
      started = Transition(*job, storage::v1::JOB_STATE_RUNNING, "started",
                           [&](storage::Batch& b) { return seq > 0 ? b.Dequeue(seq) : absl::OkStatus(); });
      if (started.ok()) return *job;
    }
    absl::MutexLock l(&mu_);
    running_job_.clear();
    if (absl::IsResourceExhausted(started) || absl::IsUnavailable(started)) {
      // Storage cannot take the write now (a full disk): the job keeps its
      // place and is tried again after a pause, instead of being dropped.
      job_queue_.PushFront(next->tenant, next->job_id);
      if (seq > 0) queue_seq_[next->job_id] = seq;
      mu_.AwaitWithTimeout(absl::Condition(&shutdown_), absl::Seconds(1));
      return std::nullopt;
    }
    // Otherwise it vanished or was cancelled meanwhile: take the next one.
  }
}

absl::Status JobManager::CountResumedAttempt(storage::v1::JobRecord& job) {
  absl::MutexLock t(&transition_mu_);
  ASSIGN_OR_RETURN(storage::v1::JobRecord next, options_.db->jobs().Get(job.tenant(), job.job_id()));
  // A started job's record may hold 0 attempts (records from before they were
  // counted): it has had at least one.
  next.set_attempts(std::max(next.attempts(), 1) + 1);
  next.set_updated_at_micros(Now());
  storage::Batch b;
  RETURN_IF_ERROR(b.PutJob(next));
  RETURN_IF_ERROR(options_.db->Commit(b));
  job.set_attempts(next.attempts());
  job.set_updated_at_micros(next.updated_at_micros());
  NotifyEvents();
  return absl::OkStatus();
}

bool JobManager::CancelRequested(const std::string& job_id) const {
  absl::MutexLock l(&mu_);
  return shutdown_ || cancel_requested_.contains(job_id);
}

absl::Status JobManager::RecordEvent(storage::v1::JobRecord& job, const storage::v1::JobEvent& event) {
  absl::MutexLock t(&transition_mu_);
  // Update the stored record, not the caller's copy: a cancel may have moved
  // the job to CANCELLING meanwhile, and that must not be overwritten.
  ASSIGN_OR_RETURN(storage::v1::JobRecord next, options_.db->jobs().Get(job.tenant(), job.job_id()));
  const int64_t now = Now();
  next.set_updated_at_micros(now);
  if (event.has_epoch_metrics()) {
    const storage::v1::EpochMetrics& m = event.epoch_metrics();
    next.mutable_progress()->set_epoch(m.epoch());
    next.mutable_progress()->set_step(m.step());
    // The best epoch so far as the trainer selects it: by the kind's own
    // metric (accuracy, micro-F1, Spearman, entity F1, SQuAD F1), ties to
    // the lower validation loss.
    const double metric = KindMetric(next.task_kind(), m);
    const double best = KindMetric(next.task_kind(), next.best_metrics());
    if (!next.has_best_metrics() || metric > best ||
        (metric == best && m.val_loss() < next.best_metrics().val_loss())) {
      *next.mutable_best_metrics() = m;
    }
  }
  if (event.has_progress()) *next.mutable_progress() = event.progress();
  storage::v1::JobEvent stamped = event;
  if (stamped.time_micros() == 0) stamped.set_time_micros(now);
  storage::Batch b;
  RETURN_IF_ERROR(b.PutJob(next));
  RETURN_IF_ERROR(b.AppendEvent(next.job_id(), stamped));
  RETURN_IF_ERROR(options_.db->Commit(b));
  job = std::move(next);
  NotifyEvents();
  return absl::OkStatus();
}

absl::StatusOr<storage::PromotionResult> JobManager::Complete(const storage::v1::JobRecord& job,
                                                              storage::v1::TaskRecord task,
                                                              const std::string& adapter_bytes, int keep_versions) {
  task.set_current_job_id(job.job_id());
  absl::StatusOr<storage::PromotionResult> result;
  // The version is the task's next; an import of the same new task that
  // lands between the read and the commit moves it on: read again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::MutexLock t(&transition_mu_);
    ASSIGN_OR_RETURN(storage::v1::JobRecord stored, options_.db->jobs().Get(job.tenant(), job.job_id()));
    // A cancel that landed during the last step wins: CANCELLING -> SUCCEEDED is illegal.
    RETURN_IF_ERROR(CheckTransition(stored.state(), storage::v1::JOB_STATE_SUCCEEDED));
    absl::StatusOr<storage::v1::TaskRecord> current = options_.db->tasks().Get(job.tenant(), job.task_id());
    if (!current.ok() && !absl::IsNotFound(current.status())) return current.status();
    const int64_t version = (current.ok() ? current->latest_version() : 0) + 1;
    const int64_t now = Now();
    // Storage keeps the first version's creation time.
    task.set_created_at_micros(now);
    task.set_updated_at_micros(now);
    storage::v1::JobRecord done = stored;
    done.set_state(storage::v1::JOB_STATE_SUCCEEDED);
    done.set_result_version(version);
    done.set_updated_at_micros(now);
    done.set_finished_at_micros(now);
    if (job.has_best_metrics()) *done.mutable_best_metrics() = job.best_metrics();
    // One batch: the version, the job SUCCEEDED (its state checked above, under
    // transition_mu_), its event, and its checkpoint gone.
    storage::Batch b;
    RETURN_IF_ERROR(b.Promote(
        {.task = task, .adapter_bytes = adapter_bytes, .expected_version = version, .keep_versions = keep_versions}));
    RETURN_IF_ERROR(b.PutJob(done));
    RETURN_IF_ERROR(
        b.AppendEvent(job.job_id(), StateEvent(stored.state(), storage::v1::JOB_STATE_SUCCEEDED, "trained", now)));
    RETURN_IF_ERROR(b.DeleteCheckpoint(job.job_id()));
    absl::Status committed = options_.db->Commit(b);
    if (committed.ok()) {
      result = b.committed_promotions().front();
      break;
    }
    result = committed;
    absl::StatusOr<storage::v1::TaskRecord> now_current = options_.db->tasks().Get(job.tenant(), job.task_id());
    const int64_t now_next = (now_current.ok() ? now_current->latest_version() : 0) + 1;
    if (!absl::IsFailedPrecondition(committed) || now_next == version) break;
  }
  if (!result.ok()) return result.status();
  {
    absl::MutexLock l(&mu_);
    cancel_requested_.erase(job.job_id());
    running_job_.clear();
  }
  NotifyEvents();
  TaskChanged(result->tenant, result->task_id);
  return result;
}

absl::Status JobManager::Fail(storage::v1::JobRecord job, const absl::Status& error) {
  job.set_error_message(std::string(error.message()));
  job.set_error_code(static_cast<int>(error.code()));
  return EndRunningJob(std::move(job), storage::v1::JOB_STATE_FAILED, std::string(error.message()));
}

absl::Status JobManager::FinishCancelled(storage::v1::JobRecord job) {
  std::string reason;
  {
    absl::MutexLock l(&mu_);
    auto it = cancel_requested_.find(job.job_id());
    if (it != cancel_requested_.end()) reason = it->second;
  }
  if (!reason.empty()) job.set_error_message(reason);
  return EndRunningJob(std::move(job), storage::v1::JOB_STATE_CANCELLED, reason.empty() ? "cancelled" : reason);
}

absl::Status JobManager::EndRunningJob(storage::v1::JobRecord job, storage::v1::JobState to,
                                       const std::string& reason) {
  // A cancel commits RUNNING -> CANCELLING after it asks the worker to stop,
  // so the worker can read RUNNING here and find CANCELLING when it writes:
  // read the state again and end the job from there.
  absl::Status ended;
  for (int attempt = 0; attempt < 3; ++attempt) {
    RETURN_IF_ERROR(RefreshState(job));
    ended = Transition(job, to, reason, [&](storage::Batch& b) { return b.DeleteCheckpoint(job.job_id()); });
    if (!absl::IsFailedPrecondition(ended)) break;
  }
  RETURN_IF_ERROR(ended);
  absl::MutexLock l(&mu_);
  cancel_requested_.erase(job.job_id());
  running_job_.clear();
  return absl::OkStatus();
}

absl::Status JobManager::RefreshState(storage::v1::JobRecord& job) const {
  ASSIGN_OR_RETURN(storage::v1::JobRecord stored, options_.db->jobs().Get(job.tenant(), job.job_id()));
  job.set_state(stored.state());
  return absl::OkStatus();
}

void JobManager::Release(const std::string& job_id) {
  absl::MutexLock l(&mu_);
  if (running_job_ == job_id) running_job_.clear();
}

void JobManager::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    shutdown_ = true;
  }
  NotifyEvents();
}

bool JobManager::shutting_down() const {
  absl::MutexLock l(&mu_);
  return shutdown_;
}

int JobManager::queued() const {
  absl::MutexLock l(&mu_);
  int n = static_cast<int>(job_queue_.size());
  for (const auto& [t, v] : validating_) n += v;
  return n;
}

int JobManager::queued(const std::string& tenant) const {
  absl::MutexLock l(&mu_);
  auto it = validating_.find(tenant);
  return static_cast<int>(job_queue_.size(tenant)) + (it == validating_.end() ? 0 : it->second);
}

}  // namespace adapterd::training
