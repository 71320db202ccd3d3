// adapterctl: the command-line client of adapterd.
//
// This file only wires CLI11 to the command functions of client/commands.h,
// where the behaviour (and its tests) live. Run `adapterctl --help`.
#include <unistd.h>

#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/adapterd_client.h"
#include "client/commands.h"
#include "common/dataset_file.h"
#include "common/status_macros.h"

namespace adapterd::client {
namespace {

using Action = std::function<absl::Status(const CommandEnv&)>;

const std::vector<std::string> kFormats = {"auto", "csv", "jsonl", "json", "ndjson", "squad"};

// The command line: every option's storage, and the command the parse
// chose (`action`). One Add function per command group; the callbacks
// capture `this`, which outlives the parse.
class CommandLine {
 public:
  void AddGlobalOptions(CLI::App& app) {
    app.add_option("--server", options_.server, "adapterd address (host:port)")
        ->envname("ADAPTERD_SERVER")
        ->capture_default_str();
    app.add_option("--api-key", options_.api_key, "API key, sent as 'authorization: Bearer <key>'")
        ->envname("ADAPTERD_API_KEY");
    app.add_option("--timeout", timeout_seconds_,
                   "deadline of every call in seconds (default: 30; watching a job: none unless "
                   "--timeout is given)")
        ->check(CLI::PositiveNumber);
    app.add_flag("--json", json_, "print JSON instead of tables");
    app.add_flag("--tls", tls_, "connect over TLS, trusting the system's roots (implied by --tls-ca/--tls-cert)")
        ->envname("ADAPTERD_TLS");
    app.add_option("--tls-ca", tls_files_.ca_file, "PEM CA certificate(s) the server's certificate must chain to")
        ->envname("ADAPTERD_TLS_CA");
    app.add_option("--tls-cert", tls_files_.cert_file, "PEM client certificate, for servers that require one (mTLS)")
        ->envname("ADAPTERD_TLS_CERT");
    app.add_option("--tls-key", tls_files_.key_file, "PEM private key of --tls-cert")->envname("ADAPTERD_TLS_KEY");
    app.add_option("--tls-server-name", options_.tls_server_name,
                   "name the server's certificate carries, when not the host in --server")
        ->envname("ADAPTERD_TLS_SERVER_NAME");
  }
  void AddDatasets(CLI::App& app) {
    auto* datasets = app.add_subcommand("datasets", "upload, list, inspect and delete datasets");
    datasets->require_subcommand(1);
    auto* upload =
        datasets->add_subcommand("upload", "upload a CSV (header text,label or text,text_pair,label) or JSONL file");
    upload->add_option("FILE", upload_args_.file, "dataset file (.csv, .jsonl)")->required();
    upload->add_option("--id", upload_args_.dataset_id, "dataset id (default: server-assigned)");
    upload->add_option("--name", upload_args_.display_name, "display name (default: file name)");
    upload->add_option("--task", upload_args_.task_id,
                       "the task it is for: behind a task-sharding router the upload lands on that task's replica");
    upload->add_option("--format", upload_format_, "file format")
        ->check(CLI::IsMember(kFormats))
        ->capture_default_str();
    upload->callback([this] {
      action_ = [this](const CommandEnv& env) {
        ASSIGN_OR_RETURN(upload_args_.format, ParseDatasetFormat(upload_format_));
        return DatasetsUpload(env, upload_args_);
      };
    });
    auto* dataset_get = datasets->add_subcommand("get", "show a dataset");
    dataset_get->add_option("ID", dataset_id_, "dataset id")->required();
    dataset_get->add_option("--task", dataset_task_,
                            "routing hint behind a task-sharding router (default: the task a server-assigned id "
                            "carries)");
    dataset_get->callback(
        [&] { action_ = [this](const CommandEnv& env) { return DatasetsGet(env, dataset_id_, dataset_task_); }; });
    datasets->add_subcommand("list", "list datasets (every replica's, behind a router)")->callback([this] {
      action_ = [](const CommandEnv& env) { return DatasetsList(env); };
    });
    auto* dataset_delete =
        datasets->add_subcommand("delete", "delete a dataset (refused while a queued or running job uses it)");
    dataset_delete->add_option("ID", dataset_id_, "dataset id")->required();
    dataset_delete->add_option("--task", dataset_task_,
                               "routing hint behind a task-sharding router (default: the task a server-assigned id "
                               "carries)");
    dataset_delete->callback(
        [&] { action_ = [this](const CommandEnv& env) { return DatasetsDelete(env, dataset_id_, dataset_task_); }; });
  }
  void AddTrain(CLI::App& app) {
    auto* train = app.add_subcommand("train", "upload data, create a training job for a task and watch it to the end");
    train->add_option("--task", train_args_.task_id, "task id to train (new, or a new version)")->required();
    train->add_option("--data", train_args_.data_file, "training data (.csv, .jsonl, or a SQuAD .json file)")
        ->required();
    train->add_option("--validation", train_args_.validation_file,
                      "validation data (default: a stratified split of --data)");
    train->add_option("--format", train_format_, "data file format")
        ->check(CLI::IsMember(kFormats))
        ->capture_default_str();
    std::map<std::string, v1::TaskKind> kinds;
    for (const auto& [name, kind] : client::kTaskKindFlags) kinds.emplace(name, kind);
    train->add_option("--kind", train_args_.kind, "what the task learns (default: the task's kind, or classification)")
        ->transform(CLI::CheckedTransformer(kinds, CLI::ignore_case));
    train->add_option("--request-id", train_args_.request_id,
                      "idempotency key (default: a hash of task, data and hyperparameters)");
    auto* lr_opt =
        train->add_option("--learning-rate", learning_rate_, "peak learning rate")->check(CLI::PositiveNumber);
    auto* epochs_opt = train->add_option("--epochs", epochs_, "passes over the data")->check(CLI::PositiveNumber);
    auto* batch_opt = train->add_option("--batch-size", batch_size_, "examples per step")->check(CLI::PositiveNumber);
    auto* bottleneck_opt =
        train->add_option("--bottleneck", bottleneck_, "adapter bottleneck size")->check(CLI::PositiveNumber);
    auto* activation_opt = train->add_option("--activation", activation_, "adapter nonlinearity")
                               ->check(CLI::IsMember({"gelu", "gelu_new", "relu", "tanh", "silu"}));
    auto* seq_opt =
        train->add_option("--max-seq-len", max_seq_len_, "longest tokenized input")->check(CLI::PositiveNumber);
    auto* seed_opt = train->add_option("--seed", seed_, "random seed");
    auto* fraction_opt = train
                             ->add_option("--validation-fraction", validation_fraction_,
                                          "held-out fraction when no --validation is given")
                             ->check(CLI::Range(0.0, 1.0));
    auto* warmup_opt =
        train->add_option("--warmup-fraction", warmup_fraction_, "fraction of the steps spent in linear warmup")
            ->check(CLI::Range(0.0, 1.0));
    auto* decay_opt =
        train->add_option("--weight-decay", weight_decay_, "AdamW weight decay")->check(CLI::NonNegativeNumber);
    auto* clip_opt =
        train->add_option("--max-grad-norm", max_grad_norm_, "gradient-norm clip")->check(CLI::PositiveNumber);
    auto* checkpoint_opt = train->add_option("--checkpoint-every", checkpoint_every_, "checkpoint every N steps")
                               ->check(CLI::PositiveNumber);
    auto* freeze_opt = train->add_flag("--freeze-layer-norms", freeze_layer_norms_,
                                       "train the adapters and head only, the LayerNorms kept (AdapterHub's "
                                       "regime: the task then exports to its format without loss)");
    train->add_flag("--detach", train_args_.detach, "create the job and return without watching");
    train->callback([=, this] {
      auto& h = train_args_.hyperparameters;
      if (lr_opt->count() > 0) h.set_learning_rate(learning_rate_);
      if (epochs_opt->count() > 0) h.set_epochs(epochs_);
      if (batch_opt->count() > 0) h.set_batch_size(batch_size_);
      if (bottleneck_opt->count() > 0) h.set_bottleneck_size(bottleneck_);
      if (activation_opt->count() > 0) h.set_activation(activation_);
      if (seq_opt->count() > 0) h.set_max_seq_len(max_seq_len_);
      if (seed_opt->count() > 0) h.set_seed(seed_);
      if (fraction_opt->count() > 0) h.set_validation_fraction(validation_fraction_);
      if (warmup_opt->count() > 0) h.set_warmup_fraction(warmup_fraction_);
      if (decay_opt->count() > 0) h.set_weight_decay(weight_decay_);
      if (clip_opt->count() > 0) h.set_max_grad_norm(max_grad_norm_);
      if (checkpoint_opt->count() > 0) h.set_checkpoint_every_steps(checkpoint_every_);
      if (freeze_opt->count() > 0) h.set_freeze_layer_norms(freeze_layer_norms_);
      action_ = [this](const CommandEnv& env) {
        ASSIGN_OR_RETURN(train_args_.format, ParseDatasetFormat(train_format_));
        return Train(env, train_args_);
      };
    });
  }
  void AddJobs(CLI::App& app) {
    auto* jobs = app.add_subcommand("jobs", "list, inspect, cancel and watch training jobs");
    jobs->require_subcommand(1);
    auto* jobs_list = jobs->add_subcommand("list", "list training jobs, oldest first");
    jobs_list->add_option("--state", state_filter_, "only jobs in this state (queued, running, succeeded, ...)");
    jobs_list->add_option("--task", list_args_.task_id, "only jobs of this task");
    jobs_list->add_option("--page-size", list_args_.page_size, "jobs per page (server default: 50)")
        ->check(CLI::NonNegativeNumber);
    jobs_list->add_option("--page-token", list_args_.page_token, "continue a previous listing");
    jobs_list->add_flag("--all", list_args_.all, "fetch every page");
    jobs_list->callback([this] {
      action_ = [this](const CommandEnv& env) {
        if (!state_filter_.empty()) {
          ASSIGN_OR_RETURN(list_args_.state, ParseJobState(state_filter_));
        }
        return JobsList(env, list_args_);
      };
    });
    auto* jobs_get = jobs->add_subcommand("get", "show a training job");
    jobs_get->add_option("ID", job_id_, "job id")->required();
    jobs_get->callback([this] { action_ = [this](const CommandEnv& env) { return JobsGet(env, job_id_); }; });
    auto* jobs_cancel = jobs->add_subcommand("cancel", "cancel a queued or running job");
    jobs_cancel->add_option("ID", job_id_, "job id")->required();
    jobs_cancel->callback([&] { action_ = [this](const CommandEnv& env) { return JobsCancel(env, job_id_); }; });
    auto* jobs_watch = jobs->add_subcommand("watch", "follow a job until it finishes (exit code: its outcome)");
    jobs_watch->add_option("ID", job_id_, "job id")->required();
    jobs_watch->callback([&] { action_ = [this](const CommandEnv& env) { return JobsWatch(env, job_id_); }; });
  }
  void AddTasks(CLI::App& app) {
    auto* tasks = app.add_subcommand("tasks", "list, inspect, delete, export and import tasks");
    tasks->require_subcommand(1);
    tasks->add_subcommand("list", "list tasks")->callback([this] {
      action_ = [](const CommandEnv& env) { return TasksList(env); };
    });
    auto* tasks_get = tasks->add_subcommand("get", "show a task");
    tasks_get->add_option("TASK", task_id_, "task id")->required();
    tasks_get->callback([this] { action_ = [this](const CommandEnv& env) { return TasksGet(env, task_id_); }; });
    auto* tasks_delete = tasks->add_subcommand("delete", "delete a task and all its versions");
    tasks_delete->add_option("TASK", task_id_, "task id")->required();
    tasks_delete->callback([&] { action_ = [this](const CommandEnv& env) { return TasksDelete(env, task_id_); }; });
    auto* tasks_export = tasks->add_subcommand("export", "download a task's adapter file");
    tasks_export->add_option("TASK", export_args_.task_id, "task id")->required();
    tasks_export->add_option("--version", export_args_.version, "version (default: current)")
        ->check(CLI::NonNegativeNumber);
    tasks_export
        ->add_option("--out", export_args_.out_file,
                     "output file ('-' = stdout); with --format adapterhub, a new directory (or a .zip file)")
        ->required();
    tasks_export->add_option("--format", export_args_.format, "adapterd (default) or adapterhub")
        ->check(CLI::IsMember({"adapterd", "adapterhub"}));
    tasks_export->add_flag("--accept-layer-norm-loss", export_args_.accept_layer_norm_loss,
                           "with --format adapterhub: export a task whose LayerNorms were trained, without them");
    tasks_export->callback([&] { action_ = [this](const CommandEnv& env) { return TasksExport(env, export_args_); }; });
    auto* tasks_import = tasks->add_subcommand(
        "import", "create a task from an adapter file, or from an AdapterHub adapter directory (--format adapterhub)");
    tasks_import->add_option("TASK", import_.task_id, "new task id")->required();
    tasks_import
        ->add_option("PATH", import_.path,
                     "adapter file; with --format adapterhub, the directory save_adapter wrote (or a zip of it)")
        ->required();
    tasks_import->add_option("--format", import_.format, "adapterd (default) or adapterhub")
        ->check(CLI::IsMember({"adapterd", "adapterhub"}));
    tasks_import->callback([this] { action_ = [this](const CommandEnv& env) { return TasksImport(env, import_); }; });
  }
  void AddPredict(CLI::App& app) {
    auto* predict = app.add_subcommand(
        "predict",
        "predict with a task: texts as arguments, --file with one per line, or stdin (QA: the questions, "
        "with --context per question)");
    predict->add_option("--task", predict_args_.task_id, "task id")->required();
    predict->add_option("--version", predict_args_.version, "task version (default: current)")
        ->check(CLI::NonNegativeNumber);
    predict->add_flag("--all-scores", predict_args_.all_scores, "show every label's probability");
    predict->add_option("--file", predict_args_.file, "read texts from this file, one per line");
    predict
        ->add_option("--pair,--context", predict_args_.pairs,
                     "second segment, one per text (repeat); extractive QA: each question's context")
        ->allow_extra_args(false);
    predict
        ->add_option("--threshold", predict_args_.threshold,
                     "multi-label: the probability a label needs (default: the task's, 0.5)")
        ->check(CLI::Range(0.0, 1.0));
    predict->add_option("--top-k", predict_args_.top_k_answers, "extractive QA: answers per question (default 1)")
        ->check(CLI::Range(0, 20));
    predict->add_option("--batch", predict_args_.batch_size, "texts per request")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    predict->add_option("TEXT", predict_args_.texts, "texts (QA: questions)");
    predict->callback([this] { action_ = [this](const CommandEnv& env) { return Predict(env, predict_args_); }; });
  }
  void AddHealth(CLI::App& app) {
    app.add_subcommand("health",
                       "check that the server is SERVING (exit 0), answers but is not serving "
                       "(exit 1), or cannot be reached (exit 9)")
        ->callback([this] { action_ = [](const CommandEnv& env) { return Health(env); }; });
  }

  // After the parse: the client the chosen command talks to, then the
  // command's exit code.
  int Run(const CLI::App& app);

 private:
  AdapterdClient::Options options_;
  double timeout_seconds_ = 0;
  bool json_ = false;
  bool tls_ = false;
  TlsClientFiles tls_files_;
  Action action_;
  // datasets
  DatasetsUploadArgs upload_args_;
  std::string upload_format_ = "auto";
  std::string dataset_id_, dataset_task_;
  // train
  TrainArgs train_args_;
  std::string train_format_ = "auto";
  double learning_rate_ = 0, validation_fraction_ = 0, warmup_fraction_ = 0, weight_decay_ = 0, max_grad_norm_ = 0;
  bool freeze_layer_norms_ = false;
  int32_t epochs_ = 0, batch_size_ = 0, bottleneck_ = 0, max_seq_len_ = 0, checkpoint_every_ = 0;
  uint64_t seed_ = 0;
  std::string activation_;
  // jobs
  JobsListArgs list_args_;
  std::string state_filter_;
  std::string job_id_;
  // tasks
  std::string task_id_;
  TasksExportArgs export_args_;
  TasksImportArgs import_;
  // predict
  PredictArgs predict_args_;
};

int CommandLine::Run(const CLI::App& app) {
  if (timeout_seconds_ > 0) {
    options_.default_deadline = absl::Seconds(timeout_seconds_);
    options_.watch_deadline = absl::Seconds(timeout_seconds_);
  }
  const std::string server = options_.server;
  if (tls_ || !tls_files_.ca_file.empty() || !tls_files_.cert_file.empty() || !tls_files_.key_file.empty()) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = TlsChannelCredentials(tls_files_);
    if (!credentials.ok()) {
      std::cerr << "adapterctl: " << credentials.status().message() << "\n";
      return kExitUsage;
    }
    options_.credentials = *std::move(credentials);
  }
  CommandEnv env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.in = &std::cin;
  env.json = json_;
  env.tty = ::isatty(STDOUT_FILENO) == 1;
  absl::StatusOr<std::unique_ptr<AdapterdClient>> client = AdapterdClient::Create(std::move(options_));
  if (!client.ok()) return ReportError(env, client.status(), server);
  env.client = client->get();
  if (!action_) {  // every leaf subcommand sets one; a guard, not a path
    std::cerr << app.help();
    return kExitUsage;
  }
  return ReportError(env, action_(env), server);
}

int Main(int argc, char** argv) {
  CLI::App app{
      "adapterctl: train and serve text classifiers on an adapterd server.\n"
      "Each task is a set of Houlsby adapters on the server's frozen BERT encoder."};
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand
  app.footer(std::string("\n") + kExitCodesHelp);
  CommandLine cl;
  cl.AddGlobalOptions(app);
  cl.AddDatasets(app);
  cl.AddTrain(app);
  cl.AddJobs(app);
  cl.AddTasks(app);
  cl.AddPredict(app);
  cl.AddHealth(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  return cl.Run(app);
}

}  // namespace
}  // namespace adapterd::client

int main(int argc, char** argv) { return adapterd::client::Main(argc, argv); }
