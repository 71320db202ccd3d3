#include "client/commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <istream>
#include <limits>
#include <ostream>
#include <sstream>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/api_util.h"
#include "common/file_util.h"
#include "common/job_state.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "common/zip_archive.h"

namespace adapterd::client {
namespace {

// Marks a status as "the job ended FAILED / CANCELLED" for ExitCodeFor.
constexpr char kJobOutcomePayload[] = "type.adapterd.dev/adapterctl.JobOutcome";
// Marks Health's "the server answered, but not SERVING" (exit code 1), as
// opposed to a health call that failed (its own exit code, e.g. 9).
constexpr char kNotServingPayload[] = "type.adapterd.dev/adapterctl.NotServing";

absl::Status JobOutcomeError(const v1::TrainingJob& job) {
  const bool cancelled = job.state() == v1::JOB_STATE_CANCELLED;
  std::string message = absl::StrCat("job ", job.job_id(), cancelled ? " was CANCELLED" : " FAILED");
  if (!job.error_message().empty()) absl::StrAppend(&message, ": ", job.error_message());
  absl::Status status = cancelled ? absl::CancelledError(message) : absl::AbortedError(message);
  status.SetPayload(kJobOutcomePayload, absl::Cord(cancelled ? "CANCELLED" : "FAILED"));
  return status;
}

// --- Formatting ----------------------------------------------------------------

std::string TaskStateName(v1::TaskState state) {
  std::string name = v1::TaskState_Name(state);
  if (absl::StartsWith(name, "TASK_STATE_")) name = name.substr(11);
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : name;
}

std::string FormatTime(int64_t micros) {
  if (micros == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixMicros(micros), absl::UTCTimeZone());
}

std::string FormatEta(double seconds) {
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100.0 * fraction); }

// Code points, a fair approximation of terminal width for table layout.
size_t DisplayWidth(std::string_view s) {
  return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// One table cell: control characters become spaces, and long text is cut
// (on a code-point boundary) with an ellipsis.
std::string Cell(std::string_view s, size_t max_width = 60) {
  std::string out;
  size_t width = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) {
      if (width == max_width) {
        // Back up to make room for the ellipsis.
        while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
        if (!out.empty()) out.pop_back();
        out += "\u2026";
        return out;
      }
      ++width;
    }
    out.push_back(c < 0x20 || c == 0x7f ? ' ' : s[i]);
  }
  return out;
}

void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths(header.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], DisplayWidth(row[i]));
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - DisplayWidth(row[i]) + 2, ' ');
    }
    out << line << "\n";
  };
  print(header);
  for (const auto& row : rows) print(row);
}

void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  for (const auto& [key, value] : fields) {
    out << key << ":" << std::string(width - key.size() + 2, ' ') << value << "\n";
  }
}

std::string ProtoToJson(const google::protobuf::Message& message, bool multi_line) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = multi_line;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(message, &json, options).ok()) return "{}";
  if (multi_line && !json.empty() && json.back() == '\n') json.pop_back();
  return json;
}

void PrintJson(const CommandEnv& env, const google::protobuf::Message& message) {
  *env.out << ProtoToJson(message, /*multi_line=*/true) << "\n";
}

// The score as a double that prints (JSON) with the float's exact value:
// 9 significant digits round-trip any float, so scripts can compare scores
// bit for bit.
double RoundedScore(float score) { return std::strtod(absl::StrFormat("%.9g", score).c_str(), nullptr); }

std::string FormatHyperparameters(const v1::Hyperparameters& h) {
  std::vector<std::string> parts;
  if (h.has_learning_rate()) parts.push_back(absl::StrCat("learning_rate=", h.learning_rate()));
  if (h.has_epochs()) parts.push_back(absl::StrCat("epochs=", h.epochs()));
  if (h.has_batch_size()) parts.push_back(absl::StrCat("batch_size=", h.batch_size()));
  if (h.has_bottleneck_size()) parts.push_back(absl::StrCat("bottleneck=", h.bottleneck_size()));
  if (h.has_activation()) parts.push_back(absl::StrCat("activation=", h.activation()));
  if (h.has_max_seq_len()) parts.push_back(absl::StrCat("max_seq_len=", h.max_seq_len()));
  if (h.has_seed()) parts.push_back(absl::StrCat("seed=", h.seed()));
  if (h.has_validation_fraction()) {
    parts.push_back(absl::StrCat("validation_fraction=", h.validation_fraction()));
  }
  if (h.has_warmup_fraction()) parts.push_back(absl::StrCat("warmup_fraction=", h.warmup_fraction()));
  if (h.has_weight_decay()) parts.push_back(absl::StrCat("weight_decay=", h.weight_decay()));
  if (h.has_max_grad_norm()) parts.push_back(absl::StrCat("max_grad_norm=", h.max_grad_norm()));
  if (h.has_checkpoint_every_steps()) {
    parts.push_back(absl::StrCat("checkpoint_every_steps=", h.checkpoint_every_steps()));
  }
  if (h.freeze_layer_norms()) parts.push_back("freeze_layer_norms");
  return parts.empty() ? "(server defaults)" : absl::StrJoin(parts, " ");
}

}  // namespace

// The metric that selects the task's best epoch, as the server names it
// (EpochMetrics.selection): "val accuracy 91.2%", "val Spearman 0.8123".
std::string SelectionText(const v1::EpochMetrics& m) {
  const v1::SelectionMetric& s = m.selection();
  if (s.label().empty()) return "val metric -";  // a server from before EpochMetrics.selection
  return absl::StrCat(s.label(), " ", s.fraction() ? Percent(s.value()) : absl::StrFormat("%.4f", s.value()));
}

std::string FormatEpochMetrics(const v1::EpochMetrics& m) {
  return absl::StrFormat("epoch %d: train loss %.4f, val loss %.4f, %s", m.epoch(), m.train_loss(), m.val_loss(),
                         SelectionText(m));
}

namespace {

std::string FormatProgressCell(const v1::TrainingJob& job) {
  const auto& p = job.progress();
  if (p.total_steps() <= 0) return "-";
  return absl::StrFormat("ep %d/%d %s", p.epoch(), p.total_epochs(),
                         Percent(static_cast<double>(p.step()) / static_cast<double>(p.total_steps())));
}

void PrintDataset(const CommandEnv& env, const v1::Dataset& dataset) {
  if (env.json) return PrintJson(env, dataset);
  std::vector<std::pair<std::string, int64_t>> labels(dataset.label_counts().begin(), dataset.label_counts().end());
  std::sort(labels.begin(), labels.end());
  std::vector<std::string> label_parts;
  label_parts.reserve(labels.size());
  for (const auto& [label, count] : labels) label_parts.push_back(absl::StrCat(label, "=", count));
  PrintFields(*env.out, {{"dataset_id", dataset.dataset_id()},
                         {"name", dataset.display_name()},
                         {"examples", absl::StrCat(dataset.num_examples())},
                         {"bytes", absl::StrCat(dataset.num_bytes())},
                         {"labels", absl::StrJoin(label_parts, " ")},
                         {"created", FormatTime(dataset.created_at_micros())},
                         {"sha256", dataset.content_sha256()}});
}

void PrintJob(const CommandEnv& env, const v1::TrainingJob& job) {
  if (env.json) return PrintJson(env, job);
  std::vector<std::pair<std::string, std::string>> fields = {
      {"job_id", job.job_id()},
      {"task_id", job.task_id()},
      {"state", JobStateName(job.state())},
      {"request_id", job.request_id().empty() ? "-" : job.request_id()},
      {"datasets", absl::StrJoin(job.dataset_ids(), ", ")},
      {"validation", job.validation_dataset_id().empty() ? "split of the training data" : job.validation_dataset_id()},
      {"hyperparameters", FormatHyperparameters(job.hyperparameters())},
  };
  if (job.labels_size() > 0) fields.emplace_back("labels", absl::StrJoin(job.labels(), ", "));
  if (job.num_train_examples() > 0) {
    fields.emplace_back(
        "examples", absl::StrCat(job.num_train_examples(), " train, ", job.num_validation_examples(), " validation"));
  }
  if (job.progress().total_steps() > 0) {
    fields.emplace_back(
        "progress", absl::StrFormat("epoch %d/%d, step %d/%d", job.progress().epoch(), job.progress().total_epochs(),
                                    job.progress().step(), job.progress().total_steps()));
  }
  if (job.best_metrics().epoch() > 0) {
    fields.emplace_back("best", FormatEpochMetrics(job.best_metrics()));
  }
  if (job.result_version() > 0) fields.emplace_back("result_version", absl::StrCat(job.result_version()));
  if (!job.error_message().empty()) fields.emplace_back("error", job.error_message());
  fields.emplace_back("attempts", absl::StrCat(job.attempts()));
  fields.emplace_back("created", FormatTime(job.created_at_micros()));
  fields.emplace_back("started", FormatTime(job.started_at_micros()));
  fields.emplace_back("finished", FormatTime(job.finished_at_micros()));
  PrintFields(*env.out, fields);
}

void PrintTask(const CommandEnv& env, const v1::Task& task) {
  if (env.json) return PrintJson(env, task);
  PrintFields(*env.out, {{"task_id", task.task_id()},
                         {"state", TaskStateName(task.state())},
                         {"kind", TaskKindFlag(task.task_kind())},
                         {"labels", absl::StrJoin(task.labels(), ", ")},
                         {"current_version", absl::StrCat(task.current_version())},
                         {"versions", absl::StrJoin(task.versions(), ", ")},
                         {"current_job_id", task.current_job_id().empty() ? "-" : task.current_job_id()},
                         {"adapter", absl::StrFormat("bottleneck %d, %s", task.adapter_config().bottleneck_size(),
                                                     task.adapter_config().activation())},
                         {"parameters", absl::StrCat(task.num_parameters())},
                         {"adapter_bytes", absl::StrCat(task.adapter_bytes())},
                         {"encoder", task.encoder_fingerprint()},
                         {"created", FormatTime(task.created_at_micros())},
                         {"updated", FormatTime(task.updated_at_micros())}});
}

// --- Watching a job ----------------------------------------------------------------

// Prints a watch stream: event lines, plus one live progress line on a TTY.
class WatchPrinter {
 public:
  explicit WatchPrinter(const CommandEnv& env) : env_(env) {}
  ~WatchPrinter() { EndLiveLine(); }

  void Print(const v1::WatchTrainingJobResponse& response) {
    job_ = response.job();
    for (const auto& event : response.events()) last_seq_ = std::max(last_seq_, event.seq());
    if (env_.json) {
      *env_.out << ProtoToJson(response, /*multi_line=*/false) << "\n" << std::flush;
      return;
    }
    for (const auto& event : response.events()) PrintEvent(event);
    if (env_.tty && job_.state() == v1::JOB_STATE_RUNNING) {
      // Without a progress event yet, the job's last update stands in for
      // the time of its progress snapshot.
      const int64_t progress_micros = std::max(last_progress_micros_, job_.updated_at_micros());
      *env_.out << "\r\x1b[K" << FormatProgressLine(job_, last_train_loss_, progress_micros) << std::flush;
      live_line_ = true;
    }
  }

  const v1::TrainingJob& job() const { return job_; }
  int64_t last_seq() const { return last_seq_; }
  bool seen_any() const { return !job_.job_id().empty(); }

  void EndLiveLine() {
    if (live_line_) *env_.out << "\r\x1b[K" << std::flush;
    live_line_ = false;
  }

 private:
  void PrintEvent(const v1::JobEvent& event) {
    switch (event.kind_case()) {
      case v1::JobEvent::kStateChange: {
        const auto& change = event.state_change();
        std::string line = absl::StrCat("state ", JobStateName(change.to()));
        if (!change.reason().empty()) absl::StrAppend(&line, " (", change.reason(), ")");
        PrintLine(line);
        break;
      }
      case v1::JobEvent::kEpochMetrics: {
        const auto& m = event.epoch_metrics();
        last_train_loss_ = m.train_loss();
        PrintLine(absl::StrFormat("%s, %.0f examples/s", FormatEpochMetrics(m), m.examples_per_second()));
        break;
      }
      case v1::JobEvent::kWarning:
        PrintLine(absl::StrCat("warning: ", event.warning().message()));
        break;
      case v1::JobEvent::kProgress:
        last_progress_micros_ = event.time_micros();
        break;
      case v1::JobEvent::KIND_NOT_SET:
        break;
    }
  }

  void PrintLine(std::string_view line) {
    EndLiveLine();
    *env_.out << line << "\n" << std::flush;
  }

  const CommandEnv& env_;
  v1::TrainingJob job_;
  int64_t last_seq_ = 0;
  double last_train_loss_ = std::numeric_limits<double>::quiet_NaN();
  int64_t last_progress_micros_ = 0;
  bool live_line_ = false;
};

// Watches `job_id` to its end, resuming after transient UNAVAILABLE errors
// (a server restart: jobs survive it), and turns the final state into the
// command's result.
absl::Status WatchToEnd(const CommandEnv& env, const std::string& job_id, std::string_view task_id_hint) {
  constexpr int kMaxReconnects = 5;
  WatchPrinter printer(env);
  v1::WatchTrainingJobRequest request;
  request.set_job_id(job_id);
  for (int reconnects = 0;; ++reconnects) {
    const int64_t seq_before = printer.last_seq();
    absl::Status status = env.client->WatchTrainingJob(
        request,
        [&](const v1::WatchTrainingJobResponse& response) {
          printer.Print(response);
          return true;
        },
        task_id_hint);
    if (status.ok()) break;
    const bool progressed = printer.last_seq() > seq_before || printer.seen_any();
    if (status.code() != absl::StatusCode::kUnavailable || !progressed || reconnects >= kMaxReconnects) {
      printer.EndLiveLine();
      return status;
    }
    printer.EndLiveLine();
    *env.err << "adapterctl: lost the watch stream (" << status.message() << "), reconnecting\n";
    absl::SleepFor(absl::Seconds(1 + reconnects));
    request.set_after_seq(printer.last_seq());
  }
  printer.EndLiveLine();
  v1::TrainingJob job = printer.job();
  if (!IsTerminal(job.state())) {
    ASSIGN_OR_RETURN(job, env.client->GetTrainingJob(job_id, task_id_hint));
  }
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      if (!env.json) {
        std::string line =
            absl::StrCat("job ", job.job_id(), " SUCCEEDED: task ", job.task_id(), " version ", job.result_version());
        if (job.best_metrics().epoch() > 0) {
          absl::StrAppend(&line, " (", SelectionText(job.best_metrics()), ")");
        }
        *env.out << line << "\n";
      }
      return absl::OkStatus();
    case v1::JOB_STATE_FAILED:
    case v1::JOB_STATE_CANCELLED:
      return JobOutcomeError(job);
    default:
      return absl::UnknownError(
          absl::StrCat("the watch of job ", job_id, " ended while it was ", JobStateName(job.state())));
  }
}

// --- Content-derived ids ---------------------------------------------------------------

std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// A dataset file's upload metadata: its format (the server reads it) and
// its name without directories (for the format's extension and messages).
v1::UploadDatasetRequest::Metadata FileMetadata(const std::string& file, DatasetFormat format) {
  v1::UploadDatasetRequest::Metadata metadata;
  metadata.set_file_format(ToApiFormat(format));
  const size_t slash = file.find_last_of('/');
  metadata.set_file_name(slash == std::string::npos ? file : file.substr(slash + 1));
  metadata.set_display_name(metadata.file_name());
  return metadata;
}

// Uploads a training file under its content-derived id (DatasetIdForFile),
// or reuses the stored dataset of that id when it holds the same bytes.
absl::StatusOr<std::string> UploadOrReuse(const CommandEnv& env, const std::string& file, DatasetFormat format,
                                          const std::string& task_id) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(file));
  v1::UploadDatasetRequest::Metadata metadata = FileMetadata(file, format);
  metadata.set_dataset_id(DatasetIdForFile(bytes));
  absl::StatusOr<v1::Dataset> dataset = env.client->UploadDatasetFile(metadata, bytes, task_id);
  if (dataset.ok()) {
    *env.err << "uploaded " << file << " as dataset " << dataset->dataset_id() << " (" << dataset->num_examples()
             << " examples)\n";
    return dataset->dataset_id();
  }
  if (dataset.status().code() != absl::StatusCode::kAlreadyExists) return dataset.status();
  ASSIGN_OR_RETURN(const v1::Dataset existing, env.client->GetDataset(metadata.dataset_id(), task_id));
  if (existing.file_sha256() != Sha256Hex(bytes)) {
    return absl::AlreadyExistsError(
        absl::StrCat("dataset ", metadata.dataset_id(), " already exists with different content"));
  }
  *env.err << file << " is already uploaded as dataset " << existing.dataset_id() << "\n";
  return existing.dataset_id();
}

// Texts for predict: arguments, else a file, else stdin; one per line.
absl::StatusOr<std::vector<std::string>> CollectTexts(const CommandEnv& env, const PredictArgs& args) {
  if (!args.texts.empty() && !args.file.empty()) {
    return absl::InvalidArgumentError("give texts as arguments or --file, not both");
  }
  if (!args.texts.empty()) return args.texts;
  std::vector<std::string> texts;
  auto add_lines = [&texts](std::istream& in) {
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      // Blank lines separate nothing: skip them rather than send texts the
      // server rejects.
      if (!absl::StripAsciiWhitespace(line).empty()) texts.push_back(std::move(line));
    }
  };
  if (!args.file.empty()) {
    ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(args.file));
    std::istringstream in(contents);
    add_lines(in);
  } else if (env.in != nullptr) {
    add_lines(*env.in);
  }
  // The server would refuse the whole call; say which text is at fault.
  for (size_t i = 0; i < texts.size(); ++i) {
    if (!IsValidUtf8(texts[i])) {
      return absl::InvalidArgumentError(absl::StrCat("text ", i + 1, " is not valid UTF-8"));
    }
  }
  return texts;
}

}  // namespace

// --- Errors and exit codes -------------------------------------------------------------

const char kExitCodesHelp[] =
    "Exit codes:\n"
    "  0   success (train/jobs watch: the job SUCCEEDED; health: SERVING)\n"
    "  1   other error (health: the server answered, but is not SERVING)\n"
    "  2   usage error\n"
    "  3   invalid argument (bad input file, bad request)\n"
    "  4   not found\n"
    "  5   already exists\n"
    "  6   failed precondition (e.g. the task has no ready version)\n"
    "  7   quota or limit reached (resource exhausted)\n"
    "  8   authentication failed or permission denied\n"
    "  9   server unavailable\n"
    "  10  deadline exceeded (--timeout)\n"
    "  11  the training job FAILED\n"
    "  12  the training job was CANCELLED\n";

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  if (const auto outcome = status.GetPayload(kJobOutcomePayload); outcome.has_value()) {
    return *outcome == "CANCELLED" ? kExitJobCancelled : kExitJobFailed;
  }
  if (status.GetPayload(kNotServingPayload).has_value()) return kExitError;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return kExitInvalidArgument;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kAlreadyExists:
      return kExitAlreadyExists;
    case absl::StatusCode::kFailedPrecondition:
      return kExitFailedPrecondition;
    case absl::StatusCode::kResourceExhausted:
      return kExitResourceExhausted;
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kPermissionDenied:
      return kExitUnauthenticated;
    case absl::StatusCode::kUnavailable:
      return kExitUnavailable;
    case absl::StatusCode::kDeadlineExceeded:
      return kExitDeadlineExceeded;
    default:
      return kExitError;
  }
}

std::string DescribeError(const absl::Status& status, std::string_view server) {
  std::string message(status.message());
  const std::string at = std::string(server);
  if (status.GetPayload(kJobOutcomePayload).has_value()) return message;
  switch (status.code()) {
    case absl::StatusCode::kUnavailable: {
      // A task-sharded deployment: the router or the fan-out of a list could
      // not reach a replica behind `at` (docs/DEPLOYMENT.md).
      if (absl::StrContains(message, "replica")) {
        return absl::StrCat("adapterd at ", at, " answered UNAVAILABLE: ", message);
      }
      // gRPC's own connection failures, as opposed to a server that answered
      // UNAVAILABLE itself (starting up or draining).
      const bool connect_failure = message.empty() || absl::StrContains(message, "connect") ||
                                   absl::StrContains(message, "DNS") || absl::StrContains(message, "resolv") ||
                                   absl::StrContains(message, "Socket closed");
      if (connect_failure) {
        return absl::StrCat("cannot reach adapterd at ", at, ": is it running? (", message, ")");
      }
      return absl::StrCat("adapterd at ", at, " is unavailable (starting up or shutting down?): ", message);
    }
    case absl::StatusCode::kUnauthenticated:
      return absl::StrCat("the server rejected the API key (set --api-key or ADAPTERD_API_KEY): ", message);
    case absl::StatusCode::kPermissionDenied:
      return absl::StrCat("permission denied: ", message);
    case absl::StatusCode::kNotFound:
      return absl::StrCat("not found: ", message);
    case absl::StatusCode::kAlreadyExists:
      return absl::StrCat("already exists: ", message);
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
      return message;
    case absl::StatusCode::kResourceExhausted:
      return absl::StrCat("quota or limit reached: ", message);
    case absl::StatusCode::kDeadlineExceeded:
      return absl::StrCat("the call to ", at, " timed out (raise --timeout?): ", message);
    case absl::StatusCode::kUnimplemented:
      // gRPC answers a method the server lacks with no message; adapterd's
      // own UNIMPLEMENTED says what it does not do yet.
      if (message.empty()) return absl::StrCat("the server at ", at, " does not support this call (an older version?)");
      return absl::StrCat("not supported: ", message);
    default:
      return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", message);
  }
}

int ReportError(const CommandEnv& env, const absl::Status& status, std::string_view server) {
  if (!status.ok()) *env.err << "adapterctl: " << DescribeError(status, server) << "\n";
  return ExitCodeFor(status);
}

// --- Datasets ------------------------------------------------------------------------

namespace {

// Every page of a list call, in one response: `call` is made with each next
// page token until the server returns none.
template <typename Request, typename Call, typename Response, typename Item>
absl::StatusOr<Response> ListEveryPage(const Call& call,
                                       google::protobuf::RepeatedPtrField<Item>* (Response::*items)()) {
  Request request;
  Response all;
  while (true) {
    ASSIGN_OR_RETURN(Response page, call(request));
    for (Item& item : *(page.*items)()) *(all.*items)()->Add() = std::move(item);
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  return all;
}

}  // namespace

absl::Status DatasetsUpload(const CommandEnv& env, const DatasetsUploadArgs& args) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadFileToString(args.file));
  v1::UploadDatasetRequest::Metadata metadata = FileMetadata(args.file, args.format);
  metadata.set_dataset_id(args.dataset_id);
  if (!args.display_name.empty()) metadata.set_display_name(args.display_name);
  *env.err << "uploading " << args.file << " (" << bytes.size() << " bytes)\n";
  ASSIGN_OR_RETURN(const v1::Dataset dataset, env.client->UploadDatasetFile(metadata, bytes, args.task_id));
  PrintDataset(env, dataset);
  return absl::OkStatus();
}

absl::Status DatasetsGet(const CommandEnv& env, const std::string& dataset_id, const std::string& task_id) {
  ASSIGN_OR_RETURN(const v1::Dataset dataset, env.client->GetDataset(dataset_id, task_id));
  PrintDataset(env, dataset);
  return absl::OkStatus();
}

absl::Status DatasetsList(const CommandEnv& env) {
  ASSIGN_OR_RETURN(const v1::ListDatasetsResponse all,
                   ListEveryPage<v1::ListDatasetsRequest>(
                       [&](const v1::ListDatasetsRequest& r) { return env.client->ListDatasets(r); },
                       &v1::ListDatasetsResponse::mutable_datasets));
  if (env.json) {
    PrintJson(env, all);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : all.datasets()) {
    rows.push_back({d.dataset_id(), Cell(d.display_name(), 30), absl::StrCat(d.num_examples()),
                    absl::StrCat(d.num_bytes()), FormatTime(d.created_at_micros())});
  }
  PrintTable(*env.out, {"DATASET", "NAME", "EXAMPLES", "BYTES", "CREATED"}, rows);
  return absl::OkStatus();
}

absl::Status DatasetsDelete(const CommandEnv& env, const std::string& dataset_id, const std::string& task_id) {
  RETURN_IF_ERROR(env.client->DeleteDataset(dataset_id, task_id));
  if (env.json) {
    *env.out << nlohmann::json{{"deleted", dataset_id}}.dump() << "\n";
  } else {
    *env.out << "deleted dataset " << dataset_id << "\n";
  }
  return absl::OkStatus();
}

// --- Training --------------------------------------------------------------------------

std::string TaskKindFlag(v1::TaskKind kind) {
  if (kind == v1::TASK_KIND_UNSPECIFIED) kind = v1::TASK_KIND_SEQUENCE_CLASSIFICATION;
  for (const auto& [name, k] : kTaskKindFlags) {
    if (k == kind) return name;
  }
  return absl::StrCat(static_cast<int>(kind));
}

std::string DatasetIdForFile(std::string_view bytes) { return absl::StrCat("data-", Sha256Hex(bytes).substr(0, 40)); }

std::string DefaultRequestId(const v1::CreateTrainingJobRequest& request) {
  v1::CreateTrainingJobRequest copy = request;
  copy.clear_request_id();
  return absl::StrCat("ctl-", Sha256Hex(SerializeDeterministic(copy)).substr(0, 40));
}

absl::Status Train(const CommandEnv& env, const TrainArgs& args) {
  if (args.task_id.empty()) return absl::InvalidArgumentError("--task is required");
  v1::CreateTrainingJobRequest request;
  request.set_task_id(args.task_id);
  request.set_task_kind(args.kind);
  ASSIGN_OR_RETURN(const std::string train_id, UploadOrReuse(env, args.data_file, args.format, args.task_id));
  request.add_dataset_ids(train_id);
  if (!args.validation_file.empty()) {
    ASSIGN_OR_RETURN(const std::string validation_id,
                     UploadOrReuse(env, args.validation_file, args.format, args.task_id));
    request.set_validation_dataset_id(validation_id);
  }
  *request.mutable_hyperparameters() = args.hyperparameters;
  request.set_request_id(args.request_id.empty() ? DefaultRequestId(request) : args.request_id);

  ASSIGN_OR_RETURN(const v1::TrainingJob job, env.client->CreateTrainingJob(request));
  if (args.request_id.empty() && IsTerminal(job.state())) {
    // The derived request id made this an idempotent replay of a finished job.
    *env.err << "note: the same request already ran as job " << job.job_id() << " (" << JobStateName(job.state())
             << "); pass --request-id to train again\n";
  }
  if (args.detach) {
    if (env.json) {
      PrintJson(env, job);
    } else {
      *env.out << "job " << job.job_id() << " (task " << job.task_id() << ") is " << JobStateName(job.state()) << "\n"
               << "watch it with: adapterctl jobs watch " << job.job_id() << "\n";
    }
    return absl::OkStatus();
  }
  *env.err << "job " << job.job_id() << " training task " << job.task_id() << "\n";
  return WatchToEnd(env, job.job_id(), job.task_id());
}

// --- Jobs ------------------------------------------------------------------------------

absl::StatusOr<v1::JobState> ParseJobState(std::string_view name) {
  std::string upper = absl::AsciiStrToUpper(std::string(name));
  if (!absl::StartsWith(upper, "JOB_STATE_")) upper = absl::StrCat("JOB_STATE_", upper);
  v1::JobState state;
  if (!v1::JobState_Parse(upper, &state) || state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown job state '", std::string(name),
                     "' (use validating, queued, running, succeeded, failed, cancelling or cancelled)"));
  }
  return state;
}

std::string FormatProgressLine(const v1::TrainingJob& job, double last_train_loss, int64_t latest_progress_micros) {
  const auto& p = job.progress();
  std::string line = JobStateName(job.state());
  if (p.total_steps() <= 0) return line;
  absl::StrAppend(
      &line, absl::StrFormat("  epoch %d/%d  step %d/%d (%s)", p.epoch(), p.total_epochs(), p.step(), p.total_steps(),
                             Percent(static_cast<double>(p.step()) / static_cast<double>(p.total_steps()))));
  if (std::isnan(last_train_loss) && job.best_metrics().epoch() > 0) {
    last_train_loss = job.best_metrics().train_loss();
  }
  if (!std::isnan(last_train_loss)) absl::StrAppend(&line, absl::StrFormat("  loss %.4f", last_train_loss));
  if (job.best_metrics().epoch() > 0) {
    absl::StrAppend(&line, "  ", SelectionText(job.best_metrics()));
  }
  // Both times come from the server's clock, so client clock skew does not
  // matter.
  const int64_t elapsed = latest_progress_micros - job.started_at_micros();
  if (job.started_at_micros() > 0 && elapsed > 0 && p.step() > 0 && p.step() < p.total_steps()) {
    const double seconds_per_step = static_cast<double>(elapsed) / 1e6 / static_cast<double>(p.step());
    absl::StrAppend(&line, "  ETA ", FormatEta(seconds_per_step * static_cast<double>(p.total_steps() - p.step())));
  }
  return line;
}

absl::Status JobsList(const CommandEnv& env, const JobsListArgs& args) {
  v1::ListTrainingJobsRequest request;
  request.set_state(args.state);
  request.set_task_id(args.task_id);
  request.set_page_size(args.page_size);
  request.set_page_token(args.page_token);
  v1::ListTrainingJobsResponse all;
  while (true) {
    ASSIGN_OR_RETURN(v1::ListTrainingJobsResponse page, env.client->ListTrainingJobs(request));
    for (auto& job : *page.mutable_jobs()) *all.add_jobs() = std::move(job);
    all.set_next_page_token(page.next_page_token());
    if (!args.all || page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  if (env.json) {
    PrintJson(env, all);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& job : all.jobs()) {
    rows.push_back({job.job_id(), Cell(job.task_id(), 40), JobStateName(job.state()), FormatProgressCell(job),
                    job.best_metrics().epoch() > 0 ? SelectionText(job.best_metrics()) : "-",
                    FormatTime(job.created_at_micros())});
  }
  PrintTable(*env.out, {"JOB_ID", "TASK", "STATE", "PROGRESS", "BEST", "CREATED"}, rows);
  if (!all.next_page_token().empty()) {
    *env.err << "more jobs: --page-token " << all.next_page_token() << " (or --all)\n";
  }
  return absl::OkStatus();
}

absl::Status JobsGet(const CommandEnv& env, const std::string& job_id) {
  ASSIGN_OR_RETURN(const v1::TrainingJob job, env.client->GetTrainingJob(job_id));
  PrintJob(env, job);
  return absl::OkStatus();
}

absl::Status JobsCancel(const CommandEnv& env, const std::string& job_id) {
  ASSIGN_OR_RETURN(const v1::TrainingJob job, env.client->CancelTrainingJob(job_id));
  if (env.json) {
    PrintJson(env, job);
  } else {
    *env.out << "job " << job.job_id() << " is " << JobStateName(job.state()) << "\n";
  }
  return absl::OkStatus();
}

absl::Status JobsWatch(const CommandEnv& env, const std::string& job_id) { return WatchToEnd(env, job_id, {}); }

// --- Tasks -------------------------------------------------------------------------------

absl::Status TasksList(const CommandEnv& env) {
  ASSIGN_OR_RETURN(
      const v1::ListTasksResponse all,
      ListEveryPage<v1::ListTasksRequest>([&](const v1::ListTasksRequest& r) { return env.client->ListTasks(r); },
                                          &v1::ListTasksResponse::mutable_tasks));
  if (env.json) {
    PrintJson(env, all);
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& task : all.tasks()) {
    rows.push_back({task.task_id(), TaskKindFlag(task.task_kind()), TaskStateName(task.state()),
                    absl::StrCat(task.current_version()), absl::StrJoin(task.versions(), ","),
                    Cell(absl::StrJoin(task.labels(), ","), 40), absl::StrCat(task.num_parameters()),
                    FormatTime(task.updated_at_micros())});
  }
  PrintTable(*env.out, {"TASK", "KIND", "STATE", "VERSION", "VERSIONS", "LABELS", "PARAMS", "UPDATED"}, rows);
  return absl::OkStatus();
}

absl::Status TasksGet(const CommandEnv& env, const std::string& task_id) {
  ASSIGN_OR_RETURN(const v1::Task task, env.client->GetTask(task_id));
  PrintTask(env, task);
  return absl::OkStatus();
}

absl::Status TasksDelete(const CommandEnv& env, const std::string& task_id) {
  RETURN_IF_ERROR(env.client->DeleteTask(task_id));
  if (env.json) {
    *env.out << nlohmann::json{{"deleted", task_id}}.dump() << "\n";
  } else {
    *env.out << "deleted task " << task_id << "\n";
  }
  return absl::OkStatus();
}

namespace {

// The AdapterHub zip's files written into `dir` (created; an existing one
// must be empty, so that no file of another adapter is left beside them).
absl::Status WriteAdapterHubDirectory(const std::string& dir, const std::string& zip) {
  ASSIGN_OR_RETURN(const ZipFiles files, ReadZipFiles(zip, {.max_entries = 16}));
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not empty: the AdapterHub directory goes into a new or empty one"));
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (const auto& [name, bytes] : files) {
    RETURN_IF_ERROR(WriteFileAtomically((std::filesystem::path(dir) / name).string(), bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TasksExport(const CommandEnv& env, const TasksExportArgs& args) {
  if (args.out_file.empty()) return absl::InvalidArgumentError("--out is required");
  ExportAdapterOptions options{.accept_layer_norm_loss = args.accept_layer_norm_loss};
  if (args.format == "adapterhub") {
    options.format = v1::ADAPTER_FORMAT_ADAPTERHUB;
  } else if (args.format != "adapterd") {
    return absl::InvalidArgumentError(absl::StrCat("--format must be adapterd or adapterhub, not '", args.format, "'"));
  } else if (args.accept_layer_norm_loss) {
    return absl::InvalidArgumentError("--accept-layer-norm-loss goes with --format adapterhub");
  }
  ASSIGN_OR_RETURN(const ExportedAdapter exported, env.client->ExportAdapter(args.task_id, args.version, options));
  const bool directory =
      options.format == v1::ADAPTER_FORMAT_ADAPTERHUB && args.out_file != "-" && !absl::EndsWith(args.out_file, ".zip");
  if (args.out_file == "-") {
    env.out->write(exported.bytes.data(), static_cast<std::streamsize>(exported.bytes.size()));
    env.out->flush();
  } else if (directory) {
    RETURN_IF_ERROR(WriteAdapterHubDirectory(args.out_file, exported.bytes));
  } else {
    RETURN_IF_ERROR(WriteFileAtomically(args.out_file, exported.bytes));
  }
  *env.err << "exported task " << args.task_id << " version " << exported.version << " (" << exported.bytes.size()
           << " bytes) to " << args.out_file << "\n";
  return absl::OkStatus();
}

absl::StatusOr<std::string> ZipAdapterHubDirectory(const std::string& dir) {
  ZipFiles files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file()) continue;
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(entry.path().string()));
    files.emplace(entry.path().filename().string(), std::move(bytes));
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat(dir, " holds no files"));
  return WriteZipFiles(files);
}

absl::Status TasksImport(const CommandEnv& env, const TasksImportArgs& args) {
  v1::AdapterFormat format = v1::ADAPTER_FORMAT_ADAPTERD;
  if (args.format == "adapterhub") {
    format = v1::ADAPTER_FORMAT_ADAPTERHUB;
  } else if (args.format != "adapterd") {
    return absl::InvalidArgumentError(absl::StrCat("--format must be adapterd or adapterhub, not '", args.format, "'"));
  }
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(args.path, ec);
  if (is_dir && format != v1::ADAPTER_FORMAT_ADAPTERHUB) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.path, " is a directory: an AdapterHub adapter directory imports with --format adapterhub"));
  }
  ASSIGN_OR_RETURN(const std::string bytes, is_dir ? ZipAdapterHubDirectory(args.path) : ReadFileToString(args.path));
  ASSIGN_OR_RETURN(const v1::Task task, env.client->ImportAdapter(args.task_id, bytes, format));
  if (!task.import_warning().empty()) *env.err << "warning: " << task.import_warning() << "\n";
  PrintTask(env, task);
  return absl::OkStatus();
}

// --- Predict -----------------------------------------------------------------------------

namespace {

// `text` with [the span](label) marked at each of `spans` (code points,
// in order, apart).
struct Marked {
  int32_t start, end;
  std::string label;
};
std::string MarkSpans(const std::string& text, const std::vector<Marked>& spans) {
  const std::vector<size_t> at = CodePointOffsets(text);
  const auto byte = [&](int32_t cp) {
    return at[std::clamp<size_t>(static_cast<size_t>(std::max(cp, 0)), 0, at.size() - 1)];
  };
  std::string out;
  size_t from = 0;
  for (const Marked& m : spans) {
    const size_t b = byte(m.start), e = byte(m.end);
    if (b < from || e < b) continue;
    absl::StrAppend(&out, text.substr(from, b - from), "[", text.substr(b, e - b), "](", m.label, ")");
    from = e;
  }
  return out + text.substr(std::min(from, text.size()));
}

// The answer in its context: up to `around` code points each side, with
// "..." where the context goes on.
std::string AnswerInContext(const std::string& context, const v1::Answer& a, int32_t around = 30) {
  const std::vector<size_t> at = CodePointOffsets(context);
  const auto n = static_cast<int32_t>(at.size() - 1);
  const int32_t from = std::max(0, a.start() - around), to = std::min(n, a.end() + around);
  const auto piece = [&](int32_t b, int32_t e) {
    return context.substr(at[static_cast<size_t>(b)], at[static_cast<size_t>(e)] - at[static_cast<size_t>(b)]);
  };
  return absl::StrCat(from > 0 ? "..." : "", piece(from, a.start()), "[", piece(a.start(), a.end()), "]",
                      piece(a.end(), to), to < n ? "..." : "");
}

nlohmann::json ScoresJson(const google::protobuf::RepeatedPtrField<v1::LabelScore>& list) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::LabelScore& s : list) out.push_back({{"label", s.label()}, {"score", RoundedScore(s.score())}});
  return out;
}

// How adapterctl shows one kind's predictions: its table columns after the
// text (and pair), those columns' cells, and its JSON fields. One row per
// kind in kPredictionViews; a kind this build does not know (a newer
// server's) shows as classification does, its label and score.
struct PredictionView {
  v1::TaskKind kind;
  std::initializer_list<std::string_view> header;
  std::vector<std::string> (*cells)(const v1::Prediction& p, const std::string& text, const std::string& pair);
  void (*json)(const v1::Prediction& p, nlohmann::json& row);
  // Texts are questions and pairs their contexts, which the cells show
  // around the answer instead of whole.
  bool questions = false;
};

const PredictionView kPredictionViews[] = {
    {v1::TASK_KIND_SEQUENCE_CLASSIFICATION,
     {"LABEL", "SCORE"},
     [](const v1::Prediction& p, const std::string&, const std::string&) -> std::vector<std::string> {
       return {Cell(p.label(), 40), absl::StrFormat("%.4f", p.score())};
     },
     [](const v1::Prediction& p, nlohmann::json& row) {
       row["label"] = p.label();
       row["score"] = RoundedScore(p.score());
     }},
    {v1::TASK_KIND_MULTI_LABEL_CLASSIFICATION,
     {"LABELS"},
     [](const v1::Prediction& p, const std::string&, const std::string&) -> std::vector<std::string> {
       std::vector<std::string> labels;
       for (const v1::LabelScore& l : p.labels()) labels.push_back(absl::StrFormat("%s %.4f", l.label(), l.score()));
       return {Cell(labels.empty() ? std::string("-") : absl::StrJoin(labels, ", "), 60)};
     },
     [](const v1::Prediction& p, nlohmann::json& row) { row["labels"] = ScoresJson(p.labels()); }},
    {v1::TASK_KIND_REGRESSION,
     {"VALUE"},
     [](const v1::Prediction& p, const std::string&, const std::string&) -> std::vector<std::string> {
       return {absl::StrFormat("%.6g", p.value())};
     },
     [](const v1::Prediction& p, nlohmann::json& row) { row["value"] = p.value(); }},
    {v1::TASK_KIND_TOKEN_CLASSIFICATION,
     {"ENTITIES", "MARKED"},
     [](const v1::Prediction& p, const std::string& text, const std::string&) -> std::vector<std::string> {
       std::vector<Marked> spans;
       for (const v1::Entity& e : p.entities()) spans.push_back({e.start(), e.end(), e.label()});
       return {absl::StrCat(p.entities_size()), Cell(MarkSpans(text, spans), 100)};
     },
     [](const v1::Prediction& p, nlohmann::json& row) {
       row["entities"] = nlohmann::json::array();
       for (const v1::Entity& e : p.entities()) {
         row["entities"].push_back({{"label", e.label()},
                                    {"start", e.start()},
                                    {"end", e.end()},
                                    {"text", e.text()},
                                    {"score", RoundedScore(e.score())}});
       }
     }},
    {v1::TASK_KIND_EXTRACTIVE_QA,
     {"ANSWER", "SCORE", "IN CONTEXT"},
     [](const v1::Prediction& p, const std::string&, const std::string& pair) -> std::vector<std::string> {
       if (p.answers_size() == 0) return {"-", "", ""};
       const v1::Answer& a = p.answers(0);
       if (a.text().empty()) return {"(no answer)", absl::StrFormat("%.4f", a.score()), ""};
       return {Cell(a.text(), 40), absl::StrFormat("%.4f", a.score()), Cell(AnswerInContext(pair, a), 100)};
     },
     [](const v1::Prediction& p, nlohmann::json& row) {
       row["answers"] = nlohmann::json::array();
       for (const v1::Answer& a : p.answers()) {
         row["answers"].push_back(
             {{"text", a.text()}, {"start", a.start()}, {"end", a.end()}, {"score", RoundedScore(a.score())}});
       }
     },
     /*questions=*/true},
};

const PredictionView& ViewOf(v1::TaskKind kind) {
  for (const PredictionView& view : kPredictionViews) {
    if (view.kind == kind) return view;
  }
  return kPredictionViews[0];
}

absl::Status PrintPredictions(const CommandEnv& env, const PredictArgs& args, const std::vector<std::string>& texts,
                              const std::vector<v1::Prediction>& predictions, v1::TaskKind kind, int64_t version) {
  const PredictionView& view = ViewOf(kind);
  const bool qa = view.questions;
  if (env.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < texts.size(); ++i) {
      nlohmann::json row = {{qa ? "question" : "text", texts[i]}};
      if (!args.pairs.empty()) row[qa ? "context" : "text_pair"] = args.pairs[i];
      view.json(predictions[i], row);
      if (args.all_scores && predictions[i].all_scores_size() > 0)
        row["all_scores"] = ScoresJson(predictions[i].all_scores());
      rows.push_back(std::move(row));
    }
    nlohmann::json doc = {{"task_id", args.task_id}, {"version", version}};
    if (kind != v1::TASK_KIND_UNSPECIFIED) doc["task_kind"] = v1::TaskKind_Name(kind);
    doc["predictions"] = std::move(rows);
    *env.out << doc.dump(2) << "\n";
    return absl::OkStatus();
  }
  // QA shows the answer in its context instead of the whole context.
  const bool pair_column = !args.pairs.empty() && !qa;
  std::vector<std::string> header = {qa ? "QUESTION" : "TEXT"};
  if (pair_column) header.push_back("TEXT_PAIR");
  for (std::string_view h : view.header) header.emplace_back(h);
  const bool scores = args.all_scores && predictions.front().all_scores_size() > 0;
  if (scores) {
    for (const auto& s : predictions.front().all_scores()) header.push_back(absl::StrCat("P(", s.label(), ")"));
  }
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string pair = args.pairs.empty() ? "" : args.pairs[i];
    std::vector<std::string> row = {Cell(texts[i])};
    if (pair_column) row.push_back(Cell(pair));
    for (std::string& c : view.cells(predictions[i], texts[i], pair)) row.push_back(std::move(c));
    if (scores) {
      for (const auto& s : predictions[i].all_scores()) row.push_back(absl::StrFormat("%.4f", s.score()));
    }
    rows.push_back(std::move(row));
  }
  PrintTable(*env.out, header, rows);
  return absl::OkStatus();
}

}  // namespace

absl::Status Predict(const CommandEnv& env, const PredictArgs& args) {
  if (args.task_id.empty()) return absl::InvalidArgumentError("--task is required");
  if (args.batch_size <= 0) return absl::InvalidArgumentError("the batch size must be positive");
  ASSIGN_OR_RETURN(const std::vector<std::string> texts, CollectTexts(env, args));
  if (texts.empty()) return absl::InvalidArgumentError("no texts to classify");
  if (!args.pairs.empty() && args.pairs.size() != texts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", args.pairs.size(), " --pair for ", texts.size(), " texts; give one per text"));
  }
  std::vector<v1::Prediction> predictions;
  predictions.reserve(texts.size());
  int64_t version = args.version;
  v1::TaskKind kind = v1::TASK_KIND_UNSPECIFIED;
  const auto batch = static_cast<size_t>(args.batch_size);
  for (size_t begin = 0; begin < texts.size(); begin += batch) {
    const size_t end = std::min(texts.size(), begin + batch);
    v1::PredictRequest request;
    request.set_task_id(args.task_id);
    // Later batches stay on the version that served the first one.
    request.set_version(version);
    request.set_return_all_scores(args.all_scores);
    request.set_threshold(args.threshold);
    request.set_top_k_answers(args.top_k_answers);
    for (size_t i = begin; i < end; ++i) {
      request.add_texts(texts[i]);
      if (!args.pairs.empty()) request.add_text_pairs(args.pairs[i]);
    }
    ASSIGN_OR_RETURN(v1::PredictResponse response, env.client->Predict(request));
    if (response.predictions_size() != static_cast<int>(end - begin)) {
      return absl::InternalError(absl::StrCat("the server returned ", response.predictions_size(), " predictions for ",
                                              end - begin, " texts"));
    }
    version = response.version();
    kind = response.task_kind();
    for (auto& p : *response.mutable_predictions()) predictions.push_back(std::move(p));
  }

  return PrintPredictions(env, args, texts, predictions, kind, version);
}

// --- Health ------------------------------------------------------------------------------

absl::Status Health(const CommandEnv& env) {
  ASSIGN_OR_RETURN(const ServingStatus status, env.client->Health());
  const std::string_view name = ServingStatusName(status);
  if (env.json) {
    *env.out << nlohmann::json{{"status", std::string(name)}}.dump() << "\n";
  } else {
    *env.out << name << "\n";
  }
  if (status != ServingStatus::kServing) {
    absl::Status not_serving = absl::UnavailableError(absl::StrCat("the health check answered ", std::string(name)));
    not_serving.SetPayload(kNotServingPayload, absl::Cord(std::string(name)));
    return not_serving;
  }
  return absl::OkStatus();
}

}  // namespace adapterd::client
