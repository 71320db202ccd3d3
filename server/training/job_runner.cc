#include "server/training/job_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "server/model/adapter_format.h"
#include "server/training/kind_records.h"

namespace adapterd::training {
namespace {

storage::v1::EpochMetrics ToProto(const EpochReport& r) {
  storage::v1::EpochMetrics m;
  m.set_epoch(r.epoch);
  m.set_step(r.step);
  m.set_train_loss(r.train_loss);
  const Evaluation& v = r.validation;
  m.set_val_loss(v.loss);
  m.set_val_accuracy(v.accuracy);
  m.set_micro_f1(v.micro_f1);
  m.set_macro_f1(v.macro_f1);
  m.set_f1(v.f1);
  m.set_exact_match(v.exact_match);
  m.set_spearman(v.spearman);
  m.set_pearson(v.pearson);
  m.set_mse(v.mse);
  m.set_learning_rate(r.learning_rate);
  m.set_examples_per_second(r.examples_per_second);
  return m;
}

EpochReport FromProto(const storage::v1::EpochMetrics& m) {
  EpochReport r;
  r.epoch = m.epoch();
  r.step = m.step();
  r.train_loss = m.train_loss();
  r.validation = EvaluationOfRecord(m);
  r.learning_rate = m.learning_rate();
  r.examples_per_second = m.examples_per_second();
  return r;
}

storage::v1::CheckpointRecord ToCheckpoint(const std::string& job_id, const TrainerState& s,
                                           const std::string& fingerprint) {
  storage::v1::CheckpointRecord c;
  c.set_job_id(job_id);
  c.set_step(s.step);
  c.set_epoch(s.epoch);
  c.set_adapter_bytes(s.adapter_bytes);
  c.set_optimizer_state(s.optimizer_state);
  c.set_rng_state(s.rng_state);
  c.set_best_adapter_bytes(s.best_adapter_bytes);
  if (s.best) *c.mutable_best_metrics() = ToProto(*s.best);
  for (const EpochReport& r : s.history) *c.add_history() = ToProto(r);
  c.set_encoder_fingerprint(fingerprint);
  c.set_epoch_loss_sum(s.epoch_loss_sum);
  c.set_epoch_examples(s.epoch_examples);
  return c;
}

TrainerState FromCheckpoint(const storage::v1::CheckpointRecord& c) {
  TrainerState s;
  s.step = c.step();
  s.epoch = c.epoch();
  s.adapter_bytes = c.adapter_bytes();
  s.optimizer_state = c.optimizer_state();
  s.rng_state = c.rng_state();
  s.best_adapter_bytes = c.best_adapter_bytes();
  if (c.has_best_metrics()) s.best = FromProto(c.best_metrics());
  for (const storage::v1::EpochMetrics& m : c.history()) s.history.push_back(FromProto(m));
  s.epoch_loss_sum = c.epoch_loss_sum();
  s.epoch_examples = c.epoch_examples();
  return s;
}

}  // namespace

absl::StatusOr<std::vector<Example>> LoadExamples(storage::Database& db, const std::string& tenant,
                                                  const std::vector<std::string>& dataset_ids) {
  std::vector<Example> out;
  for (const std::string& id : dataset_ids) {
    RETURN_IF_ERROR(db.datasets().ForEachChunk(tenant, id, [&](int64_t, const storage::v1::DatasetChunk& chunk) {
      for (const storage::v1::Example& e : chunk.examples()) out.push_back(ExampleFromProto(e));
      return absl::OkStatus();
    }));
  }
  return out;
}

JobManager::Validator MakeJobValidator(storage::Database* db, const model::BertTokenizer* tokenizer,
                                       DatasetLimits limits, const Hyperparameters& defaults) {
  return [=](const storage::v1::JobRecord& job) -> absl::StatusOr<ValidationOutcome> {
    ASSIGN_OR_RETURN(Hyperparameters hp, ResolveHyperparameters(job.hyperparameters(), defaults));
    std::vector<std::string> existing;
    absl::StatusOr<storage::v1::TaskRecord> task = db->tasks().Get(job.tenant(), job.task_id());
    if (task.ok()) {
      existing.assign(task->labels().begin(), task->labels().end());
    } else if (!absl::IsNotFound(task.status())) {
      return task.status();
    }
    ASSIGN_OR_RETURN(const storage::v1::TaskKind kind, ResolveTaskKind(job.task_kind(), task.ok() ? &*task : nullptr));
    if (job.dataset_ids().empty()) return absl::InvalidArgumentError("a training job needs at least one dataset");
    std::vector<std::string> ids(job.dataset_ids().begin(), job.dataset_ids().end());
    ASSIGN_OR_RETURN(std::vector<Example> train, LoadExamples(*db, job.tenant(), ids));
    std::vector<Example> validation;
    if (!job.validation_dataset_id().empty()) {
      ASSIGN_OR_RETURN(validation, LoadExamples(*db, job.tenant(), {job.validation_dataset_id()}));
    }
    const DatasetShape shape{
        .max_seq_len = hp.max_seq_len, .kind = ModelKind(kind), .max_question_len = hp.QuestionBudget()};
    ASSIGN_OR_RETURN(DatasetReport report, ValidateDataset(train, validation, *tokenizer, shape, limits,
                                                           existing.empty() ? nullptr : &existing));
    ValidationOutcome out;
    out.task_kind = kind;
    out.labels = report.labels;
    out.num_train_examples = report.num_train;
    out.num_validation_examples = report.num_validation;
    out.warnings = report.warnings;
    out.hyperparameters = ToProto(hp);
    return out;
  };
}

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(Options options) {
  if (options.jobs == nullptr || options.db == nullptr || options.encoder == nullptr || options.tokenizer == nullptr) {
    return absl::InvalidArgumentError("JobRunner needs a job manager, a database, an encoder and a tokenizer");
  }
  if (options.keep_versions < 1) return absl::InvalidArgumentError("keep_versions must be >= 1");
  return std::unique_ptr<JobRunner>(new JobRunner(std::move(options)));
}

JobRunner::~JobRunner() { Stop(); }

void JobRunner::Start() {
  worker_ = std::thread([this] {
    while (!stopping_.load()) {
      absl::Status s = RunNext(absl::Milliseconds(200));
      (void)s;  // outcomes are recorded on the jobs themselves
    }
  });
}

void JobRunner::RequestStop() {
  stopping_.store(true);
  options_.jobs->Shutdown();
}

void JobRunner::Stop() {
  RequestStop();
  if (worker_.joinable()) worker_.join();
}

absl::Status JobRunner::RunNext(absl::Duration timeout) {
  std::optional<storage::v1::JobRecord> job = options_.jobs->NextJob(timeout);
  if (!job.has_value()) return absl::NotFoundError("no job to run");
  return Run(*std::move(job));
}

absl::Status JobRunner::FailDurably(const storage::v1::JobRecord& job, const absl::Status& error) {
  absl::Duration backoff = absl::Milliseconds(200);
  while (true) {
    absl::Status s = options_.jobs->Fail(job, error);
    if (s.ok() || !(absl::IsResourceExhausted(s) || absl::IsUnavailable(s))) return s;
    if (stopping_.load()) {
      options_.jobs->Release(job.job_id());  // stays RUNNING; resumes after restart
      return s;
    }
    LOG(WARNING) << "job " << job.job_id() << ": cannot record its failure yet (" << s.message() << "); retrying in "
                 << absl::FormatDuration(backoff);
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
}

absl::Status JobRunner::Run(storage::v1::JobRecord job) {
  absl::StatusOr<storage::PromotionResult> promoted = Execute(job);
  return Finish(job, promoted);
}

absl::Status JobRunner::Finish(const storage::v1::JobRecord& job,
                               const absl::StatusOr<storage::PromotionResult>& promoted) {
  if (promoted.ok()) return absl::OkStatus();  // the queue told serving (on_task_changed)
  const absl::Status& s = promoted.status();
  if (absl::IsAborted(s) && stopping_.load()) {
    options_.jobs->Release(job.job_id());  // stays RUNNING; resumes after restart
    return s;
  }
  if (absl::IsCancelled(s)) {
    RETURN_IF_ERROR(options_.jobs->FinishCancelled(job));
    return s;
  }
  RETURN_IF_ERROR(FailDurably(job, s));
  return s;
}

absl::StatusOr<storage::PromotionResult> JobRunner::Execute(storage::v1::JobRecord& job) {
  ASSIGN_OR_RETURN(const Hyperparameters hp, ResolveHyperparameters(job.hyperparameters(), options_.defaults));
  ASSIGN_OR_RETURN(TrainingData data, LoadTrainingData(job));
  ASSIGN_OR_RETURN(std::optional<TrainerState> resume, ResumePoint(job));
  int64_t last_progress = 0;
  const TrainerHooks hooks = MakeHooks(job, hp, &last_progress);
  ASSIGN_OR_RETURN(TrainingResult result,
                   Train(*options_.encoder, *options_.tokenizer, data, hp, hooks, resume ? &*resume : nullptr));
  return Promote(job, data, hp, result);
}

absl::StatusOr<TrainingData> JobRunner::LoadTrainingData(const storage::v1::JobRecord& job) {
  TrainingData data;
  data.kind = ModelKind(job.task_kind());
  data.labels.assign(job.labels().begin(), job.labels().end());
  const std::vector<std::string> ids(job.dataset_ids().begin(), job.dataset_ids().end());
  ASSIGN_OR_RETURN(data.train, LoadExamples(*options_.db, job.tenant(), ids));
  if (!job.validation_dataset_id().empty()) {
    ASSIGN_OR_RETURN(data.validation, LoadExamples(*options_.db, job.tenant(), {job.validation_dataset_id()}));
  }
  return data;
}

absl::StatusOr<std::optional<TrainerState>> JobRunner::ResumePoint(storage::v1::JobRecord& job) {
  absl::StatusOr<storage::v1::CheckpointRecord> checkpoint = options_.db->checkpoints().Get(job.job_id());
  if (absl::IsNotFound(checkpoint.status())) return std::nullopt;
  if (!checkpoint.ok()) return checkpoint.status();
  // Checkpoints written before adapter format 2 record the weights-only
  // fingerprint.
  if (checkpoint->encoder_fingerprint() != options_.encoder->fingerprint() &&
      checkpoint->encoder_fingerprint() != options_.encoder->weights_fingerprint()) {
    return absl::FailedPreconditionError("the job's checkpoint was written for another encoder");
  }
  TrainerState resume = FromCheckpoint(*checkpoint);
  storage::v1::JobEvent e;
  e.mutable_warning()->set_kind("resumed");
  e.mutable_warning()->set_message(absl::StrCat("resumed from the checkpoint at step ", resume.step, " (", resume.epoch,
                                                " epochs completed) after a restart"));
  (void)options_.jobs->RecordEvent(job, e);  // informational, best effort
  return resume;
}

TrainerHooks JobRunner::MakeHooks(storage::v1::JobRecord& job, const Hyperparameters& hp, int64_t* last_progress) {
  const std::string job_id = job.job_id();
  TrainerHooks hooks;
  hooks.cancelled = [this, job_id] { return options_.jobs->CancelRequested(job_id) && !stopping_.load(); };
  hooks.preempted = [this] { return stopping_.load(); };
  hooks.run_on_device = options_.run_on_device;
  hooks.on_checkpoint = [this, job_id](const TrainerState& state) -> absl::Status {
    storage::v1::CheckpointRecord record = ToCheckpoint(job_id, state, options_.encoder->fingerprint());
    RETURN_IF_ERROR(options_.db->checkpoints().Put(record));
    if (options_.after_checkpoint) options_.after_checkpoint(record);
    return absl::OkStatus();
  };
  hooks.on_epoch = [this, &job](const EpochReport& report) {
    storage::v1::JobEvent e;
    *e.mutable_epoch_metrics() = ToProto(report);
    (void)options_.jobs->RecordEvent(job, e);  // metrics are best effort; state is not
  };
  // The losses of the steps since the last progress event.
  auto loss_sum = std::make_shared<std::pair<double, int64_t>>(0.0, 0);
  hooks.on_step = [this, &job, batch_size = hp.batch_size, epochs = hp.epochs, last_progress, loss_sum](
                      int64_t step, int64_t total, double loss) {
    if (options_.on_step) options_.on_step(batch_size);
    if (std::isfinite(loss)) {
      loss_sum->first += loss;
      ++loss_sum->second;
    }
    // Persist progress every 10 steps: enough for a live progress bar.
    if (step - *last_progress < 10 && step != total) return;
    *last_progress = step;
    storage::v1::JobEvent e;
    if (loss_sum->second > 0) e.mutable_progress()->set_train_loss(loss_sum->first / loss_sum->second);
    *loss_sum = {0.0, 0};
    e.mutable_progress()->set_step(step);
    e.mutable_progress()->set_total_steps(total);
    e.mutable_progress()->set_total_epochs(epochs);
    // The epoch in progress, 1-based (the last one once all steps are done).
    e.mutable_progress()->set_epoch(
        static_cast<int32_t>(std::min<int64_t>(epochs, step * epochs / std::max<int64_t>(1, total) + 1)));
    (void)options_.jobs->RecordEvent(job, e);
  };
  return hooks;
}

absl::StatusOr<storage::PromotionResult> JobRunner::Promote(storage::v1::JobRecord& job, const TrainingData& data,
                                                            const Hyperparameters& hp, const TrainingResult& result) {
  // A run that diverged must not become a version that answers NaN.
  if (absl::Status finite = model::CheckFinite(*result.best); !finite.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("training diverged: ", finite.message(), "; try a lower learning_rate"));
  }
  storage::v1::TaskRecord task =
      TaskRecordFor(job.tenant(), job.task_id(), result.best->config(), options_.encoder->fingerprint());
  ASSIGN_OR_RETURN(std::string bytes,
                   model::SerializeAdapterSet(*result.best, options_.encoder->fingerprint(),
                                              {{"task_id", job.task_id()}, {"job_id", job.job_id()}}));
  *job.mutable_best_metrics() = ToProto(result.best_epoch);
  absl::StatusOr<storage::PromotionResult> promoted = options_.jobs->Complete(job, task, bytes, options_.keep_versions);
  if (!promoted.ok()) {
    // A cancel that arrived during the last step wins over the promotion:
    // Finish ends the job (as stored now) CANCELLED.
    absl::StatusOr<storage::v1::JobRecord> now = options_.jobs->Get(job.tenant(), job.job_id());
    if (now.ok() && now->state() == storage::v1::JOB_STATE_CANCELLING) {
      job = *std::move(now);
      return absl::CancelledError("cancelled while its adapters were being promoted");
    }
  }
  return promoted;
}

}  // namespace adapterd::training
