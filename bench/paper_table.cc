// adapterd-paper-table: the paper's comparison (Houlsby et al. 2019,
// Table 2) on the default encoder and the real datasets of examples/:
// Houlsby adapters (m = 2, 8, 64) vs full fine-tuning vs cheaper baselines
// (the task's head only; head plus LayerNorm), each with its learning rate
// and number of epochs chosen on the validation split by the task kind's
// metric (server/training/task_rows.h), and reported on the test split with
// the parameters trained per task.
//
// A dataset's kind comes from its name (KindOfDataset): the real datasets
// of the task kinds (examples/kinds/, examples/make_real_kind_datasets.py:
// changelog_qa, copyright_ner, package_sizes) read NAME_{split}.json /
// .jsonl / .csv; every other name is sequence classification over
// NAME_{split}.csv.
//
//   adapterd-paper-table run --model_dir models/adapterd-mini-en --results R.jsonl
//   adapterd-paper-table report --model_dir models/adapterd-mini-en --results R.jsonl
//
// `run` trains every configuration of the grid that is not yet in the
// results file and appends one JSON line per run, so that an interrupted
// sweep continues where it stopped (bench/paper_table.sh wraps both).
// Within a run the trainer keeps the best epoch on validation (as the
// service does); for full fine-tuning the encoder's weights of that epoch
// are restored too before the test evaluation.
//
// Each row records the model's fingerprint; `run` refuses a results file
// that holds runs of another model (a rebuilt default encoder needs a new
// sweep). `--shard K/N` runs every N-th configuration of the grid, starting
// at the K-th, so that N processes with one thread each share the sweep and
// one results file (each row is one O_APPEND write; bench/paper_table.sh
// starts one shard per core).
//
// Grid: adapters and the baselines: lr in {3e-4, 1e-3, 3e-3};
// full fine-tuning: lr in {3e-5, 1e-4, 3e-4}; epochs in {3, 10, 20}; one
// seed. Runs are ordered by epochs, then dataset, method and lr, so that a
// partial sweep already covers every cell.
#include <CLI/CLI.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/dataset_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"
#include "server/training/kind_examples.h"
#include "server/training/kind_rules.h"
#include "server/training/trainer.h"

namespace adapterd::bench {
namespace {

using training::Example;
using training::TrainableParts;

struct Method {
  std::string name;     // key in the results file
  std::string display;  // row title
  TrainableParts parts;
  int64_t bottleneck;
  std::vector<double> lrs;
};

const std::vector<Method>& Methods() {
  static const std::vector<Method> kMethods = {
      {"adapters64", "Adapters (m = 64)", TrainableParts::kAdapters, 64, {3e-4, 1e-3, 3e-3}},
      {"adapters8", "Adapters (m = 8)", TrainableParts::kAdapters, 8, {3e-4, 1e-3, 3e-3}},
      {"adapters2", "Adapters (m = 2)", TrainableParts::kAdapters, 2, {3e-4, 1e-3, 3e-3}},
      {"full", "Full fine-tuning", TrainableParts::kFullFineTune, 64, {3e-5, 1e-4, 3e-4}},
      {"head_ln", "Head + LayerNorm only", TrainableParts::kHeadAndLayerNorm, 64, {3e-4, 1e-3, 3e-3}},
      {"head", "Head only", TrainableParts::kHeadOnly, 64, {3e-4, 1e-3, 3e-3}},
  };
  return kMethods;
}

using model::TaskKind;

// The kind of the dataset called `name`, and its files' extension.
TaskKind KindOfDataset(const std::string& name) {
  if (name == "changelog_qa") return TaskKind::kExtractiveQa;
  if (name == "copyright_ner") return TaskKind::kTokenClassification;
  if (name == "package_sizes") return TaskKind::kRegression;
  return TaskKind::kSequenceClassification;
}
std::string Extension(TaskKind kind) {
  if (kind == TaskKind::kExtractiveQa) return ".json";
  if (kind == TaskKind::kTokenClassification) return ".jsonl";
  return ".csv";
}
// How the report names a kind's metric.
std::string MetricName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kExtractiveQa:
      return "SQuAD F1";
    case TaskKind::kTokenClassification:
      return "entity F1";
    case TaskKind::kRegression:
      return "Spearman";
    case TaskKind::kMultiLabelClassification:
      return "micro-F1";
    default:
      return "acc";
  }
}

struct Split {
  TaskKind kind = TaskKind::kSequenceClassification;
  std::vector<Example> train, validation, test;
  std::vector<std::string> labels;
};

absl::StatusOr<std::vector<Example>> ReadSplit(const std::string& path) {
  ASSIGN_OR_RETURN(const std::vector<v1::Example> rows, adapterd::ReadDatasetFile(path));
  std::vector<Example> out;
  out.reserve(rows.size());
  for (const v1::Example& r : rows) out.push_back(training::ExampleFromProto(r));
  return out;
}

absl::StatusOr<Split> ReadDataset(const std::string& dir, const std::string& name) {
  Split s;
  s.kind = KindOfDataset(name);
  const std::string ext = Extension(s.kind);
  ASSIGN_OR_RETURN(s.train, ReadSplit(absl::StrCat(dir, "/", name, "_train", ext)));
  ASSIGN_OR_RETURN(s.validation, ReadSplit(absl::StrCat(dir, "/", name, "_validation", ext)));
  ASSIGN_OR_RETURN(s.test, ReadSplit(absl::StrCat(dir, "/", name, "_test", ext)));
  std::set<std::string> labels;
  for (const Example& e : s.train) {
    for (const std::string& l : training::LabelNamesOf(s.kind, e)) labels.insert(l);
  }
  s.labels.assign(labels.begin(), labels.end());
  if (s.kind == TaskKind::kTokenClassification) s.labels = model::BioTagSet(s.labels);
  return s;
}

// The share of the most frequent test label (sequence classification).
double MajorityRate(const std::vector<Example>& examples) {
  std::map<std::string, int64_t> counts;
  int64_t most = 0;
  for (const Example& e : examples) most = std::max(most, ++counts[e.label]);
  return examples.empty() ? 0.0 : static_cast<double>(most) / static_cast<double>(examples.size());
}

std::string RunKey(const std::string& dataset, const std::string& method, double lr, int epochs, uint64_t seed) {
  return absl::StrFormat("%s/%s/lr=%g/epochs=%d/seed=%d", dataset, method, lr, epochs, seed);
}

absl::StatusOr<std::vector<nlohmann::json>> ReadResults(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      return absl::DataLossError(absl::StrCat(path, ": line ", n, ": ", e.what()));
    }
  }
  return out;
}

// A fresh encoder from the checkpoint: frozen (shared by every run but full
// fine-tuning) or trainable (one per full fine-tuning run: it is updated in
// place).
absl::StatusOr<std::unique_ptr<model::BertEncoder>> FreshEncoder(const std::string& model_dir,
                                                                 const model::BertConfig& config, bool trainable) {
  ASSIGN_OR_RETURN(model::SafetensorsFile file, model::SafetensorsFile::Open(model_dir + "/model.safetensors"));
  ASSIGN_OR_RETURN(model::ResolvedWeights resolved,
                   model::ResolveEncoderWeights(file, config, c10::Device(c10::kCPU), at::kFloat));
  if (trainable) {
    // Never train mapped checkpoint bytes.
    RETURN_IF_ERROR(model::GuardTorch("copy weights", [&]() {
      model::EncoderWeights& w = resolved.weights;
      for (at::Tensor* t : {&w.word_embeddings, &w.position_embeddings, &w.token_type_embeddings, &w.emb_ln_weight,
                            &w.emb_ln_bias, &w.pooler_weight, &w.pooler_bias}) {
        if (t->defined()) *t = t->clone();
      }
      for (model::EncoderLayerWeights& l : w.layers) {
        for (at::Tensor* t : {&l.qkv_weight, &l.qkv_bias, &l.attn_out_weight, &l.attn_out_bias, &l.attn_ln_weight,
                              &l.attn_ln_bias, &l.intermediate_weight, &l.intermediate_bias, &l.output_weight,
                              &l.output_bias, &l.output_ln_weight, &l.output_ln_bias}) {
          *t = t->clone();
        }
      }
    }));
  }
  return model::BertEncoder::Create(config, std::move(resolved.weights),
                                    {.device = c10::Device(c10::kCPU),
                                     .dtype = at::kFloat,
                                     .fingerprint = resolved.fingerprint,
                                     .trainable = trainable});
}

struct RunArgs {
  std::string model_dir, data_dir = "examples", results;
  std::vector<std::string> datasets = {"debian_sections", "wordnet_supersenses"};
  std::vector<std::string> methods = {"adapters64", "adapters8", "full", "head_ln", "head"};  // and adapters2
  std::vector<int> epochs = {3, 10, 20};
  std::vector<double> lrs;  // a subset of each method's grid; empty = all of it
  uint64_t seed = 42;
  int max_seq_len = 128;
  int threads = 0;
  int64_t max_runs = 0;
  std::string shard = "0/1";  // K/N
  // fp32, or bf16: every method but full fine-tuning trains on a bf16 copy
  // of the encoder (mixed precision: server/training/trainer.h); the test
  // split is evaluated on the fp32 encoder either way, so rows of the two
  // differ only in how they trained (bf16 rows also record the test figure
  // on the bf16 encoder). bf16 rows' keys end in "/bf16".
  std::string training_dtype = "fp32";
};

absl::StatusOr<std::pair<int, int>> ParseShard(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '/');
  int k = -1, n = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &k) || !absl::SimpleAtoi(parts[1], &n) || n < 1 || k < 0 ||
      k >= n) {
    return absl::InvalidArgumentError(absl::StrCat("--shard must be K/N with 0 <= K < N, not \"", text, "\""));
  }
  return std::make_pair(k, n);
}

// The one model whose fingerprint every row of `rows` (read from `path`)
// records; "" when there are no rows; FAILED_PRECONDITION when they mix
// models, "unrecorded" standing for rows without one.
absl::StatusOr<std::string> ModelOfResults(const std::vector<nlohmann::json>& rows, const std::string& path) {
  if (rows.empty()) return std::string();
  const std::string model = rows.front().value("model", "unrecorded");
  for (const nlohmann::json& r : rows) {
    if (r.value("model", "unrecorded") != model) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " mixes runs of two models: ", model, " and ", r.value("model", "unrecorded")));
    }
  }
  return model;
}

absl::Status Run(const RunArgs& a) {
  ASSIGN_OR_RETURN(const auto shard, ParseShard(a.shard));
  model::SetComputeThreads(a.threads);
  ASSIGN_OR_RETURN(model::LoadedModel m, model::LoadBertModel(a.model_dir, {.max_seq_len = a.max_seq_len}));
  if (a.training_dtype != "fp32" && a.training_dtype != "bf16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--training_dtype must be fp32 or bf16, not \"", a.training_dtype, "\""));
  }
  const bool bf16 = a.training_dtype == "bf16";
  model::LoadedModel reduced;
  if (bf16) {
    if (std::find(a.methods.begin(), a.methods.end(), "full") != a.methods.end()) {
      return absl::InvalidArgumentError("--training_dtype bf16 trains every method but full fine-tuning");
    }
    ASSIGN_OR_RETURN(reduced,
                     model::LoadBertModel(a.model_dir, {.dtype = at::kBFloat16, .max_seq_len = a.max_seq_len}));
  }
  ASSIGN_OR_RETURN(std::vector<nlohmann::json> done_rows, ReadResults(a.results));
  ASSIGN_OR_RETURN(const std::string results_model, ModelOfResults(done_rows, a.results));
  if (!results_model.empty() && results_model != m.fingerprint) {
    return absl::FailedPreconditionError(absl::StrCat(a.results, " holds runs of another model (", results_model,
                                                      ", not ", m.fingerprint, " in ", a.model_dir,
                                                      "); give a new --results file"));
  }
  std::set<std::string> done;
  for (const nlohmann::json& r : done_rows) done.insert(r.value("key", ""));
  std::map<std::string, Split> data;
  for (const std::string& d : a.datasets) {
    ASSIGN_OR_RETURN(data[d], ReadDataset(a.data_dir, d));
  }
  std::ofstream out(a.results, std::ios::app);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot append to ", a.results));

  int64_t runs = 0, index = -1;
  for (int epochs : a.epochs) {
    for (const std::string& d : a.datasets) {
      for (const Method& method : Methods()) {
        if (std::find(a.methods.begin(), a.methods.end(), method.name) == a.methods.end()) continue;
        for (double lr : method.lrs) {
          if (!a.lrs.empty() &&
              std::none_of(a.lrs.begin(), a.lrs.end(), [&](double x) { return std::abs(x - lr) <= 1e-9 * lr; })) {
            continue;
          }
          const std::string key = RunKey(d, method.name, lr, epochs, a.seed) + (bf16 ? "/bf16" : "");
          if (++index % shard.second != shard.first || done.count(key)) continue;
          if (a.max_runs > 0 && runs >= a.max_runs) return absl::OkStatus();
          ++runs;
          const Split& split = data[d];
          std::unique_ptr<model::BertEncoder> owned;
          const model::BertEncoder* encoder = bf16 ? reduced.encoder.get() : m.encoder.get();
          if (method.parts == TrainableParts::kFullFineTune) {
            ASSIGN_OR_RETURN(owned, FreshEncoder(a.model_dir, m.config, /*trainable=*/true));
            encoder = owned.get();
          }
          training::Hyperparameters hp;
          hp.learning_rate = lr;
          hp.epochs = epochs;
          hp.bottleneck_size = method.bottleneck;
          hp.max_seq_len = a.max_seq_len;
          hp.seed = a.seed;
          hp.trainable = method.parts;
          // Full fine-tuning: keep the encoder of the best epoch (the same
          // rule as the trainer: the kind's metric, then lower loss).
          std::vector<at::Tensor> best_weights;
          double best_acc = -1e300, best_loss = 0;
          training::TrainerHooks hooks;
          hooks.on_epoch = [&](const training::EpochReport& r) {
            const double metric = training::SelectionMetric(split.kind, r.validation);
            std::fprintf(stderr, "  %s epoch %d: val %s %.4f loss %.4f\n", key.c_str(), r.epoch,
                         MetricName(split.kind).c_str(), metric, r.validation.loss);
            const bool better = metric > best_acc || (metric == best_acc && r.validation.loss < best_loss);
            if (!better) return;
            best_acc = metric;
            best_loss = r.validation.loss;
            if (owned) {
              at::NoGradGuard no_grad;
              best_weights.clear();
              for (const at::Tensor& t : owned->weights().Tensors()) best_weights.push_back(t.detach().clone());
            }
          };
          const auto t0 = std::chrono::steady_clock::now();
          ASSIGN_OR_RETURN(
              training::TrainingResult result,
              training::Train(
                  *encoder, *m.tokenizer,
                  {.kind = split.kind, .train = split.train, .validation = split.validation, .labels = split.labels},
                  hp, hooks));
          const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (owned && !best_weights.empty()) {
            RETURN_IF_ERROR(model::GuardTorch("restore the best epoch", [&]() {
              at::NoGradGuard no_grad;
              const std::vector<at::Tensor> now = owned->weights().Tensors();
              for (size_t i = 0; i < now.size(); ++i) now[i].copy_(best_weights[i]);
            }));
          }
          ASSIGN_OR_RETURN(
              const training::Evaluation test,
              training::Evaluate(bf16 ? *m.encoder : *encoder, *m.tokenizer, *result.best, split.test, a.max_seq_len));
          const auto figures = [](const training::Evaluation& e) {
            return nlohmann::json{
                {"loss", e.loss}, {"accuracy", e.accuracy},       {"micro_f1", e.micro_f1}, {"macro_f1", e.macro_f1},
                {"f1", e.f1},     {"exact_match", e.exact_match}, {"spearman", e.spearman}, {"pearson", e.pearson},
                {"mse", e.mse}};
          };
          const double val_metric = training::SelectionMetric(split.kind, result.best_epoch.validation);
          const double test_metric = training::SelectionMetric(split.kind, test);
          nlohmann::json row = {
              {"key", key},
              {"task_kind", std::string(model::TaskKindName(split.kind))},
              {"validation_metric", val_metric},
              {"test_metric", test_metric},
              {"validation", figures(result.best_epoch.validation)},
              {"test", figures(test)},
              {"model", m.fingerprint},
              {"dataset", d},
              {"method", method.name},
              {"lr", lr},
              {"epochs", epochs},
              {"seed", a.seed},
              {"training_dtype", a.training_dtype},
              {"best_epoch", result.best_epoch.epoch},
              {"validation_accuracy", result.best_epoch.validation.accuracy},
              {"validation_loss", result.best_epoch.validation.loss},
              {"test_accuracy", test.accuracy},
              {"test_loss", test.loss},
              {"trainable_parameters", training::TrainableParameterCount(*result.best, method.parts, *encoder)},
              {"encoder_parameters", m.encoder->NumParameters()},
              {"train_examples", split.train.size()},
              {"test_examples", split.test.size()},
              {"seconds", seconds},
              {"threads", at::get_num_threads()}};
          if (split.kind == TaskKind::kSequenceClassification) row["test_majority"] = MajorityRate(split.test);
          if (bf16) {
            // The same adapters on the encoder they trained on, as a server
            // with --training_dtype serving serves them.
            ASSIGN_OR_RETURN(const training::Evaluation served,
                             training::Evaluate(*encoder, *m.tokenizer, *result.best, split.test, a.max_seq_len));
            row["test_metric_on_training_encoder"] = training::SelectionMetric(split.kind, served);
          }
          const std::string line = row.dump() + "\n";  // one write: shards share the file
          out.write(line.data(), static_cast<std::streamsize>(line.size()));
          out.flush();
          std::printf("%-60s val %.4f (epoch %d)  test %.4f  %.0f s\n", key.c_str(), val_metric,
                      result.best_epoch.epoch, test_metric, seconds);
          std::fflush(stdout);
        }
      }
    }
  }
  return absl::OkStatus();
}

double ValidationMetric(const nlohmann::json& row) {
  return row.contains("validation_metric") ? row.at("validation_metric").get<double>()
                                           : row.at("validation_accuracy").get<double>();
}
double TestMetric(const nlohmann::json& row) {
  return row.contains("test_metric") ? row.at("test_metric").get<double>() : row.at("test_accuracy").get<double>();
}

struct ReportArgs {
  std::string results;
  std::vector<std::string> datasets = {"debian_sections", "wordnet_supersenses"};
};

// Markdown: per method, the configuration with the best validation metric
// (the kind's; ties: lower validation loss, then fewer epochs) and its test
// metric. Rows written before the kinds carry accuracy only.
absl::Status Report(const ReportArgs& a) {
  ASSIGN_OR_RETURN(const std::vector<nlohmann::json> rows, ReadResults(a.results));
  if (rows.empty()) return absl::NotFoundError(absl::StrCat(a.results, ": no results"));
  ASSIGN_OR_RETURN(const std::string model, ModelOfResults(rows, a.results));
  std::map<std::pair<std::string, std::string>, std::vector<const nlohmann::json*>> cells;
  for (const nlohmann::json& r : rows) cells[{r.at("dataset"), r.at("method")}].push_back(&r);
  auto chosen = [&](const std::string& d, const std::string& method) -> const nlohmann::json* {
    auto it = cells.find({d, method});
    if (it == cells.end()) return nullptr;
    const nlohmann::json* best = nullptr;
    for (const nlohmann::json* r : it->second) {
      auto key = [](const nlohmann::json* x) {
        return std::make_tuple(ValidationMetric(*x), -x->at("validation_loss").get<double>(),
                               -x->at("epochs").get<int>());
      };
      if (best == nullptr || key(r) > key(best)) best = r;
    }
    return best;
  };
  int64_t encoder_params = rows.front().at("encoder_parameters").get<int64_t>();
  // The task's classification head, which every method trains: the head-only
  // rows' count. Like the paper's Table 1 (full fine-tuning = 100%), the
  // params column counts what a method trains besides it.
  std::map<std::string, int64_t> head_params;
  for (const nlohmann::json& r : rows) {
    if (r.at("method") == "head") head_params[r.at("dataset")] = r.at("trainable_parameters").get<int64_t>();
  }

  std::string header = "| Method | Trained params / task, besides the head (% of encoder) |";
  std::string rule = "|---|---:|";
  for (const std::string& d : a.datasets) {
    absl::StrAppend(&header, " ", d, " test ", MetricName(KindOfDataset(d)), " |");
    absl::StrAppend(&rule, "---:|");
  }
  absl::StrAppend(&header, " Mean |");
  absl::StrAppend(&rule, "---:|");
  std::cout << header << "\n" << rule << "\n";
  for (const Method& method : Methods()) {
    std::string line = absl::StrCat("| ", method.display, " |");
    double sum = 0;
    int n = 0;
    int64_t params = -1;  // besides the head; -1 while unknown
    std::string cols;
    for (const std::string& d : a.datasets) {
      const nlohmann::json* r = chosen(d, method.name);
      if (r == nullptr) {
        absl::StrAppend(&cols, " n/a |");
        continue;
      }
      if (auto head = head_params.find(d); head != head_params.end()) {
        params = std::max<int64_t>(params, r->at("trainable_parameters").get<int64_t>() - head->second);
      }
      const double acc = TestMetric(*r);
      absl::StrAppend(&cols, absl::StrFormat(" %.1f |", 100 * acc));
      sum += acc;
      ++n;
    }
    if (n == 0) continue;
    absl::StrAppend(
        &line,
        params < 0 ? std::string(" n/a (no head-only run) |")
                   : absl::StrFormat(" %d (%.4g%%) |", params,
                                     100.0 * static_cast<double>(params) / static_cast<double>(encoder_params)),
        cols,
        n == static_cast<int>(a.datasets.size()) ? absl::StrFormat(" %.1f |", 100 * sum / n) : std::string(" n/a |"));
    std::cout << line << "\n";
  }
  std::string majority = "| Majority class | 0 |";
  for (const std::string& d : a.datasets) {
    const nlohmann::json* any = nullptr;
    for (const nlohmann::json& r : rows) {
      if (r.at("dataset") == d) any = &r;
    }
    absl::StrAppend(&majority, any && any->contains("test_majority")
                                   ? absl::StrFormat(" %.1f |", 100 * any->at("test_majority").get<double>())
                                   : std::string(" n/a |"));
  }
  std::cout << majority << " |\n\nEncoder parameters: " << encoder_params
            << ". Percentages are of the encoder's parameters. Every method also trains the task's head:";
  for (const auto& [d, n] : head_params) std::cout << " " << n << " parameters on " << d << ";";
  std::cout << " the runs' trainable_parameters include it. Model " << model << ".\n\n";

  std::cout << "Chosen configurations (best validation metric; runs in the sweep):\n\n"
            << "| Dataset | Method | lr | epochs | best epoch | val metric | test metric | runs | train s |\n"
            << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& d : a.datasets) {
    for (const Method& method : Methods()) {
      const nlohmann::json* r = chosen(d, method.name);
      if (r == nullptr) continue;
      std::cout << absl::StrFormat("| %s | %s | %g | %d | %d | %.1f | %.1f | %d | %.0f |\n", d, method.name,
                                   r->at("lr").get<double>(), r->at("epochs").get<int>(),
                                   r->at("best_epoch").get<int>(), 100 * ValidationMetric(*r), 100 * TestMetric(*r),
                                   static_cast<int>(cells[{d, method.name}].size()), r->at("seconds").get<double>());
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  CLI::App app{"adapterd-paper-table: adapters vs full fine-tuning vs baselines on real datasets"};
  app.require_subcommand(1);
  RunArgs ra;
  auto* run = app.add_subcommand("run", "train every configuration not yet in --results");
  run->add_option("--model_dir", ra.model_dir, "HuggingFace BERT directory")->required();
  run->add_option("--results", ra.results, "JSON-lines results file (appended)")->required();
  run->add_option("--data_dir", ra.data_dir, "directory of NAME_{train,validation,test}.csv")->capture_default_str();
  run->add_option("--datasets", ra.datasets, "dataset names")->delimiter(',')->capture_default_str();
  run->add_option("--methods", ra.methods, "adapters64, adapters8, adapters2, full, head_ln, head")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--epochs", ra.epochs, "epoch counts of the grid")->delimiter(',')->capture_default_str();
  run->add_option("--lrs", ra.lrs,
                  "only these learning rates of each method's grid (default: the whole grid; "
                  "a value outside a method's grid selects none of its runs)")
      ->delimiter(',');
  run->add_option("--seed", ra.seed, "training seed")->capture_default_str();
  run->add_option("--max_seq_len", ra.max_seq_len, "tokens per example")->capture_default_str();
  run->add_option("--threads", ra.threads, "LibTorch threads (0 = one per hardware thread)");
  run->add_option("--max_runs", ra.max_runs, "stop after N new runs (0 = all)");
  run->add_option("--training_dtype", ra.training_dtype, "fp32, or bf16 (mixed precision; not with full)")
      ->capture_default_str();
  run->add_option("--shard", ra.shard, "K/N: run every N-th configuration from the K-th (0-based)")
      ->capture_default_str();
  ReportArgs pa;
  auto* report = app.add_subcommand("report", "print the Markdown table of a results file");
  report->add_option("--results", pa.results, "JSON-lines results file")->required();
  report->add_option("--datasets", pa.datasets, "dataset names (columns)")->delimiter(',')->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const absl::Status s = *run ? Run(ra) : Report(pa);
  if (!s.ok()) {
    std::cerr << "adapterd-paper-table: " << s << "\n";
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace adapterd::bench

int main(int argc, char** argv) { return adapterd::bench::Main(argc, argv); }
