// JobManager: the one owner of a training job's life (docs/ARCHITECTURE.md,
// "server/training"): the job state machine, idempotent creation,
// validation before anything is stored, the queue quotas, fair scheduling
// (JobQueue), cancellation, promotion of a trained or imported version, the
// "task changed" notification serving subscribes to, the per-job event log
// and its subscription, and restart recovery. Storage only commits what it
// decides; the API only forwards requests to it.
//
// States:
//   VALIDATING -> QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLING -> CANCELLED
//   VALIDATING -> FAILED | CANCELLED;  QUEUED -> CANCELLED;  CANCELLING -> FAILED
// SUCCEEDED, FAILED and CANCELLED are terminal. Any other transition is
// FAILED_PRECONDITION. Every transition is committed to storage (record +
// state-change event, and queue entry changes, in one synced batch) before
// anything in memory changes or any watcher hears of it.
//
// Scheduling: RUNNING jobs found at start-up (a crash or shutdown interrupted
// them) run first, resuming from their checkpoints; then QUEUED jobs,
// round-robin between tenants and FIFO within a tenant (JobQueue), in
// their durable arrival order.
//
// Thread safety: thread-safe. One worker (JobRunner) calls NextJob/Complete/
// Fail/Cancelled; any number of API threads call the rest.
#ifndef ADAPTERD_SERVER_TRAINING_JOB_MANAGER_H_
#define ADAPTERD_SERVER_TRAINING_JOB_MANAGER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_state.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/training/job_queue.h"
#include "storage/batch.h"
#include "storage/database.h"
#include "storage/job_store.h"

namespace adapterd::model {
struct AdapterConfig;  // server/model/adapter_set.h
}  // namespace adapterd::model

namespace adapterd::training {

// Checks a transition against the state machine above. (IsTerminal and
// JobStateName: common/job_state.h.)
absl::Status CheckTransition(storage::v1::JobState from, storage::v1::JobState to);

// The stored record of a task whose adapter set has `config` (its kind,
// labels, bottleneck and activation), for the encoder with
// `encoder_fingerprint`: what a training job's promotion and an import both
// store.
storage::v1::TaskRecord TaskRecordFor(const std::string& tenant, const std::string& task_id,
                                      const model::AdapterConfig& config, const std::string& encoder_fingerprint);

// A job's task kind: the request's (`requested`), or for UNSPECIFIED the
// existing task's (`existing`, null for a new task) or sequence
// classification. FAILED_PRECONDITION when the request names another kind
// than the existing task's; INVALID_ARGUMENT for a number that is no kind.
absl::StatusOr<storage::v1::TaskKind> ResolveTaskKind(storage::v1::TaskKind requested,
                                                      const storage::v1::TaskRecord* existing);

struct QueueLimits {
  // Jobs waiting (VALIDATING or QUEUED) in total, all tenants.
  int max_queued_total = 1024;
};

// A client's request, as the API layer hands it over. The tenant comes from
// authentication, never from the request.
struct JobRequest {
  std::string tenant;
  std::string task_id;
  // Idempotency key; empty = not idempotent.
  std::string request_id;
  std::vector<std::string> dataset_ids;
  std::string validation_dataset_id;
  storage::v1::Hyperparameters hyperparameters;
  // UNSPECIFIED: the existing task's kind, or sequence classification.
  storage::v1::TaskKind task_kind = storage::v1::TASK_KIND_UNSPECIFIED;
  // The tenant's quota of jobs waiting (VALIDATING or QUEUED): its
  // max_queued_jobs (api::TenantQuotas, from the tenants file or the
  // server's default). Submit checks it atomically with taking the slot, and
  // refuses a request without one (< 1) as a caller's mistake.
  int64_t max_queued_for_tenant = 0;
  // The tenant's max_tasks: a job of a task that neither exists nor is
  // being created (PendingTasks) is refused RESOURCE_EXHAUSTED when the
  // tenant's tasks, stored and pending, already number this many; checked
  // atomically with storing the job (AdmitTask).
  int64_t max_tasks_for_tenant = std::numeric_limits<int64_t>::max();
};

// What validation of a job's data concluded.
struct ValidationOutcome {
  std::vector<std::string> labels;                                                   // logit order
  storage::v1::TaskKind task_kind = storage::v1::TASK_KIND_SEQUENCE_CLASSIFICATION;  // resolved
  int64_t num_train_examples = 0;
  int64_t num_validation_examples = 0;
  std::vector<std::string> warnings;
  // The hyperparameters the job will train with, every field set (stored in
  // place of the requested ones); nullopt keeps the request's.
  std::optional<storage::v1::Hyperparameters> hyperparameters;
};

class JobManager {
 public:
  // Validates a job's data before it is queued. INVALID_ARGUMENT (naming the
  // example) rejects the job; other errors fail it too.
  using Validator = std::function<absl::StatusOr<ValidationOutcome>(const storage::v1::JobRecord& job)>;

  struct Options {
    storage::Database* db = nullptr;  // not owned; outlives the manager
    QueueLimits limits;
    Validator validator;
    // Current time in unix microseconds (tests inject a fake clock).
    std::function<int64_t()> now_micros;
    // The one "task changed" notification: called after a task's servable
    // adapters changed in storage, by a promotion (Complete, ImportVersion)
    // or a delete (DeleteTask, whatever it returns). Serving subscribes to
    // drop its cached copies. Called without the manager's locks held.
    std::function<void(const std::string& tenant, const std::string& task_id)> on_task_changed;
  };

  // Restores state from storage: RUNNING jobs are scheduled first (to resume),
  // CANCELLING ones become CANCELLED, VALIDATING ones (a record that
  // predates validation before storing) are validated again, QUEUED ones
  // keep their arrival order.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Options options);

  // Creates a job: validates its data first, then persists it QUEUED (with
  // its "created" and "validated" state events) in one write. A request that
  // fails validation is answered with the validator's error and stores
  // nothing: no record, no event, and its request_id stays free. With a
  // request_id already used by this tenant: the same request returns the
  // existing job; a different one is INVALID_ARGUMENT. RESOURCE_EXHAUSTED
  // past a limit (validations in progress count as waiting jobs).
  absl::StatusOr<storage::v1::JobRecord> Submit(const JobRequest& request);

  absl::StatusOr<storage::v1::JobRecord> Get(const std::string& tenant, const std::string& job_id) const;
  absl::StatusOr<storage::JobStore::Page> List(const storage::JobStore::ListOptions& options) const;

  // QUEUED/VALIDATING -> CANCELLED at once; RUNNING -> CANCELLING (the worker
  // stops within one training step and finishes the cancellation);
  // CANCELLING stays as is. A terminal job is FAILED_PRECONDITION. `reason`,
  // when given, is the job's error_message and the reason of its state
  // changes ("task deleted"); "" = a client's cancel.
  absl::StatusOr<storage::v1::JobRecord> Cancel(const std::string& tenant, const std::string& job_id,
                                                const std::string& reason = "");

  // Deletes task `task_id` and every adapter version of it, after cancelling
  // every unfinished job of the task with the reason "task deleted" (QUEUED
  // ones end CANCELLED at once; a RUNNING one stops within a step and ends
  // CANCELLED). A promotion needs its job RUNNING, so no job can bring the
  // task back; submissions wait while a delete runs, so none slips in
  // between. A job submitted after the delete trains a new task of that
  // name. NOT_FOUND when there was neither a task nor a job to cancel.
  absl::Status DeleteTask(const std::string& tenant, const std::string& task_id);
  // Stores an imported adapter file as version 1 of a new task `task` (its
  // record, as TaskRecordFor builds it) through the same promotion as a
  // trained version. ALREADY_EXISTS when the task exists, or another import
  // of it got there first.
  // ALREADY_EXISTS too for a task a first job is creating (PendingTasks);
  // RESOURCE_EXHAUSTED when the tenant has max_tasks tasks, stored and
  // pending (checked atomically with the promotion, as Submit's).
  absl::StatusOr<storage::PromotionResult> ImportVersion(storage::v1::TaskRecord task, std::string adapter_bytes,
                                                         int64_t max_tasks = std::numeric_limits<int64_t>::max());
  // The tenant's tasks being created: those with a job VALIDATING, QUEUED
  // or RUNNING (a CANCELLING one never promotes) and no stored record yet (TASK_STATE_PENDING
  // through the API), each with its earliest such job.
  absl::StatusOr<std::map<std::string, storage::v1::JobRecord>> PendingTasks(const std::string& tenant) const;
  // Deletes a dataset (storage::DatasetStore::Delete) unless an unfinished
  // job uses it, as training or validation data: FAILED_PRECONDITION naming
  // the job. Submissions wait while a delete runs, so no job can be queued
  // on a dataset being deleted. Returns the deleted record.
  absl::StatusOr<storage::v1::DatasetRecord> DeleteDataset(const std::string& tenant, const std::string& dataset_id);

  // Events of a job with seq > after_seq. If there are none yet and the job
  // is not terminal, waits up to `timeout` for more. The subscription of the
  // streaming RPC: read the snapshot (after_seq = 0), then call again with
  // the last seq seen until the job is terminal.
  absl::StatusOr<std::vector<storage::v1::JobEvent>> WaitForEvents(const std::string& tenant, const std::string& job_id,
                                                                   int64_t after_seq, absl::Duration timeout) const;

  // --- worker side -----------------------------------------------------------
  // Blocks until a job can run, moves it to RUNNING (unless it is resuming)
  // and returns it. nullopt after Shutdown() or when `timeout` passes.
  std::optional<storage::v1::JobRecord> NextJob(absl::Duration timeout);
  // True once the running job was asked to cancel (or the manager shuts down).
  bool CancelRequested(const std::string& job_id) const;
  // Appends an event (epoch metrics, warning, progress) and updates the job's
  // progress fields, in one batch. An event without a time gets the commit's.
  absl::Status RecordEvent(storage::v1::JobRecord& job, const storage::v1::JobEvent& event);
  // RUNNING -> SUCCEEDED with the new adapter version, atomically
  // (storage::Promotion). `task` carries labels, adapter config, fingerprint.
  absl::StatusOr<storage::PromotionResult> Complete(const storage::v1::JobRecord& job, storage::v1::TaskRecord task,
                                                    const std::string& adapter_bytes, int keep_versions);
  // RUNNING/CANCELLING -> FAILED with `error`.
  absl::Status Fail(storage::v1::JobRecord job, const absl::Status& error);
  // CANCELLING (or RUNNING) -> CANCELLED.
  absl::Status FinishCancelled(storage::v1::JobRecord job);
  // Leaves the running job RUNNING (to resume after a restart) and lets the
  // worker take the next one; used at shutdown.
  void Release(const std::string& job_id);

  // Wakes NextJob and WaitForEvents callers; NextJob returns nullopt after.
  void Shutdown();
  bool shutting_down() const;

  // Jobs waiting (VALIDATING + QUEUED), total and for one tenant.
  int queued() const;
  int queued(const std::string& tenant) const;

 private:
  // Checks the tenant's queue quota (its request's) and the server's total,
  // counting jobs QUEUED and those still validating, and reserves a
  // validating slot for `request`'s tenant; the caller gives it back.
  // UNAVAILABLE after Shutdown, RESOURCE_EXHAUSTED over either limit.
  absl::Status ReserveSlot(const JobRequest& request);
  // The job an earlier request with `request`'s request_id created: nullopt
  // when there is none (or no request_id), INVALID_ARGUMENT naming the job
  // when that request was a different one.
  absl::StatusOr<std::optional<storage::v1::JobRecord>> JobOfRequest(const JobRequest& request,
                                                                     const std::string& fingerprint) const;
  explicit JobManager(Options options) : options_(std::move(options)) {}

  absl::Status Recover();
  // Recovery: validates a stored VALIDATING job's data and moves it to
  // QUEUED (or FAILED).
  absl::StatusOr<storage::v1::JobRecord> ValidateAndEnqueue(storage::v1::JobRecord job);
  // Commits `job` moving to `to` with its state-change event and whatever
  // `extra` adds, then updates memory and wakes watchers.
  // Compare-and-set on the stored state: FAILED_PRECONDITION if the stored
  // job is no longer in job.state(). `enqueued_seq` receives the seq of a
  // queue entry `extra` added.
  absl::Status Transition(storage::v1::JobRecord& job, storage::v1::JobState to, const std::string& reason,
                          const std::function<absl::Status(storage::Batch&)>& extra = nullptr,
                          int64_t* enqueued_seq = nullptr) ABSL_LOCKS_EXCLUDED(transition_mu_);
  // Transition with transition_mu_ held by the caller.
  absl::Status TransitionLocked(storage::v1::JobRecord& job, storage::v1::JobState to, const std::string& reason,
                                const std::function<absl::Status(storage::Batch&)>& extra = nullptr,
                                int64_t* enqueued_seq = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(transition_mu_);
  // A restart interrupted `job` (RUNNING): counts the new attempt in the
  // stored record and in `job`.
  absl::Status CountResumedAttempt(storage::v1::JobRecord& job);
  // The worker ends its job FAILED or CANCELLED, from the state stored now
  // (a cancel may have moved it to CANCELLING meanwhile); deletes its
  // checkpoint and forgets it as the running job.
  absl::Status EndRunningJob(storage::v1::JobRecord job, storage::v1::JobState to, const std::string& reason);
  // Copies the stored state into `job` (the worker's copy may predate a cancel).
  absl::Status RefreshState(storage::v1::JobRecord& job) const;
  // The tenant's unfinished jobs (VALIDATING, QUEUED, RUNNING, CANCELLING).
  absl::StatusOr<std::vector<storage::v1::JobRecord>> UnfinishedJobs(const std::string& tenant) const;
  // Runs `create` (which stores a job or a task) when `task_id` exists or is
  // pending (ALREADY_EXISTS instead if `must_be_new`), or when the tenant
  // has fewer than `max_tasks` tasks, stored and pending; RESOURCE_EXHAUSTED
  // otherwise. Serialised with every other admission of a task, so that
  // concurrent first jobs and imports cannot pass the quota together.
  absl::Status AdmitTask(const std::string& tenant, const std::string& task_id, int64_t max_tasks, bool must_be_new,
                         const std::function<absl::Status()>& create);
  int64_t Now() const;
  void NotifyEvents() const;
  void TaskChanged(const std::string& tenant, const std::string& task_id) const;

  Options options_;

  // Submissions hold it shared from validation to commit; DeleteTask and
  // DeleteDataset hold it exclusively, so that what they check (the jobs of
  // a task or of a dataset) cannot change under them.
  absl::Mutex deletes_mu_;
  // Serialises AdmitTask (count, then store), after deletes_mu_ when both.
  absl::Mutex task_admission_mu_;

  // The one guard of job records. The job manager is their only writer (the
  // database's lock keeps other processes out, and nothing else in this one
  // writes them), so holding this across every read-check-write of one
  // (transitions, progress, the promotion's SUCCEEDED) is what keeps a cancel
  // and a worker's update from overwriting each other; storage offers no
  // compare-and-set on jobs.
  absl::Mutex transition_mu_;

  mutable absl::Mutex mu_;  // protects the scheduling state below
  JobQueue job_queue_ ABSL_GUARDED_BY(mu_);
  // Durable queue seq of every QUEUED job.
  std::map<std::string, int64_t> queue_seq_ ABSL_GUARDED_BY(mu_);
  // Jobs waiting in VALIDATING, per tenant (counted against limits).
  std::map<std::string, int> validating_ ABSL_GUARDED_BY(mu_);
  // RUNNING jobs found at start-up, to resume first.
  std::deque<storage::v1::JobRecord> resume_ ABSL_GUARDED_BY(mu_);
  // Running jobs asked to cancel, with the reason ("" = the client's).
  std::map<std::string, std::string> cancel_requested_ ABSL_GUARDED_BY(mu_);
  std::string running_job_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;

  mutable absl::Mutex events_mu_;  // protects event_generation_
  // Bumped after every committed event; watchers wait for it to change.
  mutable int64_t event_generation_ ABSL_GUARDED_BY(events_mu_) = 0;
};

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_JOB_MANAGER_H_
