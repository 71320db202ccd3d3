// Runs training jobs from a JobManager, one at a time: loads the job's
// datasets from storage, trains (resuming from the job's checkpoint when one
// exists), writes checkpoints durably, and promotes the best parameters as
// the task's next version in one atomic write (JobManager::Complete).
//
// Failure handling: a training error marks the job FAILED with the message;
// a cancel finishes it CANCELLED; Stop() preempts the running job after a
// final checkpoint and leaves it RUNNING, so the next start resumes it.
// A full disk: the write that fails (a checkpoint, the promotion) fails the
// job with RESOURCE_EXHAUSTED ("disk full"). Recording FAILED needs a write
// too, so the runner retries it with backoff until space returns (or Stop(),
// which leaves the job RUNNING to resume after the restart); the queue never
// loses track of the job, and no earlier version or job is touched.
//
// Thread safety: Start()/RequestStop()/Stop() from one controlling thread;
// the runner owns one worker thread. RunNext() is for tests that drive it synchronously.
#ifndef ADAPTERD_SERVER_TRAINING_JOB_RUNNER_H_
#define ADAPTERD_SERVER_TRAINING_JOB_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "server/model/bert_encoder.h"
#include "server/model/tokenizer.h"
#include "server/training/dataset_validator.h"
#include "server/training/job_manager.h"
#include "server/training/trainer.h"
#include "storage/database.h"

namespace adapterd::training {

// Reads the examples of datasets (in order) from storage.
absl::StatusOr<std::vector<Example>> LoadExamples(storage::Database& db, const std::string& tenant,
                                                  const std::vector<std::string>& dataset_ids);

// The JobManager validator: resolves hyperparameters, loads the datasets and
// runs ValidateDataset (against the task's labels when it exists).
JobManager::Validator MakeJobValidator(storage::Database* db, const model::BertTokenizer* tokenizer,
                                       DatasetLimits limits, const Hyperparameters& defaults);

class JobRunner {
 public:
  struct Options {
    JobManager* jobs = nullptr;       // not owned
    storage::Database* db = nullptr;  // not owned
    // Not owned; fp32, or bf16 for mixed-precision training (trainer.h).
    const model::BertEncoder* encoder = nullptr;
    const model::BertTokenizer* tokenizer = nullptr;
    Hyperparameters defaults;
    int keep_versions = 2;
    // Runs one micro-batch of device work (see TrainerHooks::run_on_device).
    std::function<absl::Status(const std::function<absl::Status()>&)> run_on_device;
    // After each optimiser step, with the examples it used (metrics).
    std::function<void(int64_t examples)> on_step;
    // Test hook, after each checkpoint is durably written.
    std::function<void(const storage::v1::CheckpointRecord&)> after_checkpoint;
  };

  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(Options options);
  ~JobRunner();

  // Starts the worker thread.
  void Start();
  // Asks the worker to stop without waiting: the running job is preempted
  // at its next step (final checkpoint, left RUNNING), no new job starts,
  // and the queue shuts down (waking watchers). Idempotent.
  void RequestStop();
  // RequestStop(), then joins the worker. Idempotent.
  void Stop();

  // Takes the next job (waiting up to `timeout`) and runs it to its end on
  // this thread. NOT_FOUND when no job came. Returns the job's outcome.
  absl::Status RunNext(absl::Duration timeout);

 private:
  explicit JobRunner(Options options) : options_(std::move(options)) {}
  // One job from the queue to its end: Execute, then Finish.
  absl::Status Run(storage::v1::JobRecord job);
  // The run's steps, in order; the first error ends it. OK = the adapters
  // became the task's newest version. Errors: CANCELLED (a cancel, seen by
  // the trainer or during the promotion: `job` is then as stored),
  // ABORTED while the runner stops (preempted: resumes after a restart),
  // anything else fails the job.
  absl::StatusOr<storage::PromotionResult> Execute(storage::v1::JobRecord& job);
  absl::StatusOr<TrainingData> LoadTrainingData(const storage::v1::JobRecord& job);
  // The checkpoint to resume from (recording a "resumed" event), nullopt
  // for a fresh start, FAILED_PRECONDITION for another encoder's.
  absl::StatusOr<std::optional<TrainerState>> ResumePoint(storage::v1::JobRecord& job);
  // The trainer's callbacks for `job` (which must outlive the training):
  // cancel/preempt checks, checkpoints, epoch metrics, progress every 10
  // steps (`last_progress` holds the last step recorded).
  TrainerHooks MakeHooks(storage::v1::JobRecord& job, const Hyperparameters& hp, int64_t* last_progress);
  // The finite check, the task record and the promotion.
  absl::StatusOr<storage::PromotionResult> Promote(storage::v1::JobRecord& job, const TrainingData& data,
                                                   const Hyperparameters& hp, const TrainingResult& result);
  // Records how Execute ended: the promotion's callback, CANCELLED, the job
  // released to resume, or FAILED (durably). Returns Execute's status, or
  // the error that kept it from being recorded.
  absl::Status Finish(const storage::v1::JobRecord& job, const absl::StatusOr<storage::PromotionResult>& promoted);
  // queue->Fail(job, error), retried while storage is full or recovering
  // (RESOURCE_EXHAUSTED, UNAVAILABLE) until it sticks or the runner stops.
  absl::Status FailDurably(const storage::v1::JobRecord& job, const absl::Status& error);

  Options options_;
  std::atomic<bool> stopping_{false};
  std::thread worker_;
};

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_JOB_RUNNER_H_
