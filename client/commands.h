// The commands of adapterctl, as functions that tests can call directly.
//
// Each command takes a CommandEnv (the client, output streams, formatting
// flags) and its arguments, writes its result to env.out (progress and notes
// to env.err) and returns a Status. adapterctl.cc only parses the command
// line, calls one of these and turns the Status into an exit code with
// ReportError(): the exit codes are listed in kExitCodesHelp.
//
// Thread safety: commands are not meant to run concurrently on one
// CommandEnv (they write to its streams); the client itself is thread-safe.
// Ownership: CommandEnv borrows everything it points to.
#ifndef ADAPTERD_CLIENT_COMMANDS_H_
#define ADAPTERD_CLIENT_COMMANDS_H_

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/adapterd_client.h"
#include "common/dataset_file.h"

namespace adapterd::client {

struct CommandEnv {
  AdapterdClient* client = nullptr;
  std::ostream* out = nullptr;
  std::ostream* err = nullptr;
  // Input for commands that read stdin (predict without texts).
  std::istream* in = nullptr;
  // Print machine-readable JSON instead of tables.
  bool json = false;
  // env.out is a terminal: redraw one live progress line while watching.
  bool tty = false;
};

// --- Exit codes ----------------------------------------------------------------
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;  // any other error; `health`: answered, not SERVING
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInvalidArgument = 3;
inline constexpr int kExitNotFound = 4;
inline constexpr int kExitAlreadyExists = 5;
inline constexpr int kExitFailedPrecondition = 6;
inline constexpr int kExitResourceExhausted = 7;
inline constexpr int kExitUnauthenticated = 8;
inline constexpr int kExitUnavailable = 9;
inline constexpr int kExitDeadlineExceeded = 10;
inline constexpr int kExitJobFailed = 11;
inline constexpr int kExitJobCancelled = 12;

// The exit-code table for `adapterctl --help`.
extern const char kExitCodesHelp[];

// The exit code for a command's result (0 for OK).
int ExitCodeFor(const absl::Status& status);
// A human explanation of `status` for the terminal, naming `server` where
// that helps (UNAVAILABLE: "cannot reach adapterd at ...: is it running?").
std::string DescribeError(const absl::Status& status, std::string_view server);
// Prints "adapterctl: <DescribeError>" to env.err (unless OK) and returns
// ExitCodeFor(status).
int ReportError(const CommandEnv& env, const absl::Status& status, std::string_view server);

// --- Datasets ------------------------------------------------------------------
struct DatasetsUploadArgs {
  std::string file;
  DatasetFormat format = DatasetFormat::kAuto;
  std::string dataset_id;    // "" = the server assigns one
  std::string display_name;  // "" = the file's base name
  std::string task_id;       // the task it is for: routes the upload to that task's replica
};
absl::Status DatasetsUpload(const CommandEnv& env, const DatasetsUploadArgs& args);
// `task_id`: routing hint ("" = the task a server-assigned id carries).
absl::Status DatasetsGet(const CommandEnv& env, const std::string& dataset_id, const std::string& task_id = "");
// Every dataset of the caller, as a table or --json.
absl::Status DatasetsList(const CommandEnv& env);
absl::Status DatasetsDelete(const CommandEnv& env, const std::string& dataset_id, const std::string& task_id = "");

// --- Training ------------------------------------------------------------------
// adapterctl's names of the task kinds (`train --kind`): classification,
// multi-label, regression, ner, qa. TaskKindFlag names UNSPECIFIED
// "classification" (what the server makes of it for a new task).
inline constexpr std::pair<const char*, v1::TaskKind> kTaskKindFlags[] = {
    {"classification", v1::TASK_KIND_SEQUENCE_CLASSIFICATION},
    {"multi-label", v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION},
    {"regression", v1::TASK_KIND_REGRESSION},
    {"ner", v1::TASK_KIND_TOKEN_CLASSIFICATION},
    {"qa", v1::TASK_KIND_EXTRACTIVE_QA},
};
std::string TaskKindFlag(v1::TaskKind kind);

struct TrainArgs {
  std::string task_id;
  // UNSPECIFIED: the existing task's kind, or classification for a new one.
  v1::TaskKind kind = v1::TASK_KIND_UNSPECIFIED;
  std::string data_file;
  std::string validation_file;  // "" = a split of the training data
  DatasetFormat format = DatasetFormat::kAuto;
  // "" = derived from the task, the files' examples and the hyperparameters
  // (DefaultRequestId), so that re-running the same command is idempotent.
  std::string request_id;
  v1::Hyperparameters hyperparameters;  // unset fields: the server's defaults
  bool detach = false;                  // create the job, do not watch it
};
// Uploads the data (dataset ids derived from their content, so a retry
// reuses what is already uploaded), creates the job and, unless detached,
// watches it to the end: OK on SUCCEEDED, a job-outcome error (exit code 11
// or 12) on FAILED / CANCELLED.
absl::Status Train(const CommandEnv& env, const TrainArgs& args);

// Content-derived ids used by Train: a file's dataset is "data-" and the
// first 40 hex digits of the SHA-256 of its bytes (the Python client's too).
std::string DatasetIdForFile(std::string_view bytes);
std::string DefaultRequestId(const v1::CreateTrainingJobRequest& request);

// --- Jobs ------------------------------------------------------------------------
struct JobsListArgs {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  std::string task_id;
  int32_t page_size = 0;  // 0 = the server's default
  std::string page_token;
  bool all = false;  // follow next_page_token to the end
};
absl::Status JobsList(const CommandEnv& env, const JobsListArgs& args);
absl::Status JobsGet(const CommandEnv& env, const std::string& job_id);
absl::Status JobsCancel(const CommandEnv& env, const std::string& job_id);
// Watches until the job is terminal; same outcome as Train.
absl::Status JobsWatch(const CommandEnv& env, const std::string& job_id);

// "queued", "QUEUED" or "JOB_STATE_QUEUED" -> JOB_STATE_QUEUED.
absl::StatusOr<v1::JobState> ParseJobState(std::string_view name);

// The metric that selects the job's best epoch, as the server names it
// (EpochMetrics.selection): "val accuracy 91.2%", "val Spearman 0.8123".
std::string SelectionText(const v1::EpochMetrics& metrics);
// "epoch 2: train loss 0.1234, val loss 0.2345, " and SelectionText.
std::string FormatEpochMetrics(const v1::EpochMetrics& metrics);

// One-line progress summary of a running job: epoch, step/total, loss, the
// selection metric, ETA (from the job's start and the time of
// `latest_progress_micros`).
std::string FormatProgressLine(const v1::TrainingJob& job, double last_train_loss, int64_t latest_progress_micros);

// --- Tasks ---------------------------------------------------------------------
absl::Status TasksList(const CommandEnv& env);
absl::Status TasksGet(const CommandEnv& env, const std::string& task_id);
absl::Status TasksDelete(const CommandEnv& env, const std::string& task_id);
struct TasksExportArgs {
  std::string task_id;
  int64_t version = 0;   // 0 = current
  std::string out_file;  // "-" = env.out
  // "adapterd" (the adapter file) or "adapterhub": the AdapterHub directory,
  // written as the directory out_file (created; an existing one must be
  // empty), or as a zip when out_file ends in ".zip" or is "-".
  std::string format = "adapterd";
  bool accept_layer_norm_loss = false;
};
absl::Status TasksExport(const CommandEnv& env, const TasksExportArgs& args);
struct TasksImportArgs {
  std::string task_id;
  // An adapterd adapter file; with format "adapterhub", an AdapterHub
  // adapter directory (its files are zipped) or a zip of one.
  std::string path;
  std::string format = "adapterd";  // "adapterd" | "adapterhub"
};
absl::Status TasksImport(const CommandEnv& env, const TasksImportArgs& args);

// The regular files directly in `dir` (AdapterHub's save_adapter output),
// as one zip for ImportAdapter. INVALID_ARGUMENT when it holds none.
absl::StatusOr<std::string> ZipAdapterHubDirectory(const std::string& dir);

// --- Predict -------------------------------------------------------------------
struct PredictArgs {
  std::string task_id;
  int64_t version = 0;
  bool all_scores = false;
  // The texts: `texts`, else the lines of `file`, else the lines of env.in
  // (blank lines skipped, CR of CRLF dropped). Both texts and file:
  // INVALID_ARGUMENT.
  std::vector<std::string> texts;
  std::string file;                // one text per line ("" = none)
  std::vector<std::string> pairs;  // empty, or one per text
  // Texts per Predict call; long inputs are sent in several calls, all on
  // the version the first call was served by.
  int batch_size = 64;
  // Multi-label: the probability a label needs (0 = the task's); extractive
  // QA: answers per question (0 = 1).
  double threshold = 0;
  int top_k_answers = 0;
};
absl::Status Predict(const CommandEnv& env, const PredictArgs& args);

// --- Health --------------------------------------------------------------------
// Prints the serving status; OK only when SERVING. A server that answers
// but is not serving is UNAVAILABLE("... NOT_SERVING"), which ExitCodeFor
// maps to kExitError (1); a health call that fails keeps its own code
// (an unreachable server: kExitUnavailable).
absl::Status Health(const CommandEnv& env);

}  // namespace adapterd::client

#endif  // ADAPTERD_CLIENT_COMMANDS_H_
