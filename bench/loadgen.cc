// adapterd-loadgen: a closed-loop load generator for Predict.
//
// N client threads each send one Predict at a time (closed loop) for a fixed
// duration (after a warm-up of a quarter of it); each request picks its task
// from K tasks, uniformly or by a Zipf law. It reports requests/s, texts/s
// and p50/p99 latency per phase, and the ratios the targets are
// stated in, all measured in one run (this machine is shared and noisy, so
// only same-run ratios are meaningful):
//
//   in-process, 1 task          InferenceEngine::Predict, no gRPC
//   in-process, K tasks (Zipf)  -> mixed/single ratio
//   gRPC, K tasks (Zipf)        -> server/in-process ratio (with --server)
//   cold adapter loads          RocksDB -> device-ready, p50/p99
//   task kinds (--kinds)        K tasks of the five kinds against K
//                               classification tasks, in tokens/s (the
//                               rows' tokens: the same work per token)
//                               -> mixed-kind/single-kind ratio; QA alone
//                               at 2 windows per context, requests/s
//
// The K tasks are random near-identity adapter sets (bottleneck --bottleneck)
// for the model in --model_dir: promoted into a temporary RocksDB for the
// in-process phases and imported into the server (ImportAdapter, ids
// "loadgen-<i>") for the gRPC phase. Start the server on the same model:
//   adapterd --model_dir M --data_dir /tmp/lg --threads 2 &
//   adapterd-loadgen --model_dir M --server 127.0.0.1:8500
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_main.h"
#include "client/adapterd_client.h"
#include "common/malloc_tuning.h"
#include "common/status_macros.h"
#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/cpu_kernels.h"
#include "server/model/model_loader.h"
#include "server/model/serving_form.h"
#include "server/model/tensor_io.h"
#include "server/model/text_pieces.h"
#include "server/serving/adapter_cache.h"
#include "server/serving/inference_engine.h"
#include "server/training/kind_records.h"
#include "server/training/trainer.h"
#include "storage/database.h"
#include "storage/keys.h"

namespace adapterd::bench {
namespace {

struct Flags {
  std::string model_dir;
  std::string server;
  int tasks = 100;
  std::string popularity = "zipf";  // or uniform
  double zipf_s = 1.0;
  int concurrency = 8;
  double seconds = 10;
  int texts_per_request = 1;
  int words = 100;  // ~128 word pieces with specials at most (max_seq_len truncates)
  int max_seq_len = 128;
  int bottleneck = 64;
  std::string dtype = "fp32";
  std::string device = "cpu";
  std::string strategy = "auto";
  // The server's defaults (ServerOptions), not the engine's smaller ones.
  int64_t host_cache_bytes = int64_t{4} << 30;
  int64_t device_cache_bytes = int64_t{1} << 30;
  int64_t slab_bottleneck = -1;
  int64_t split_overhead_tokens = -1;
  int threads = 0;
  int max_batch_size = 32;
  int max_queue_delay_us = 2000;
  int cold_loads = 100;
  bool with_training = true;
  int training_concurrency = 0;  // 0 = concurrency / 4 ("moderate load")
  double training_share = 0.2;
  int micro_batch = 8;
  bool kinds = true;
};

struct PhaseResult {
  std::string name;
  double seconds = 0;
  int64_t requests = 0;
  int64_t texts = 0;
  int64_t errors = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double rps() const { return requests / seconds; }
};

// Batch shapes of the in-process engine, summed between Take() calls.
class BatchShapes : public serving::ServingObserver {
 public:
  void OnBatch(const serving::BatchStats& s) override {
    absl::MutexLock lock(&mu_);
    ++batches_;
    rows_ += s.rows;
    tasks_ += s.distinct_tasks;
    padding_ += s.padding_ratio;
  }
  // "N batches, R rows and T tasks per batch, padding P%" since the last call.
  std::string Take() {
    absl::MutexLock lock(&mu_);
    const double n = std::max<double>(1, static_cast<double>(batches_));
    std::string line = absl::StrFormat("%lld batches: %.1f rows and %.1f tasks per batch, padding %.1f%%",
                                       static_cast<long long>(batches_), static_cast<double>(rows_) / n,
                                       static_cast<double>(tasks_) / n, 100 * padding_ / n);
    batches_ = rows_ = tasks_ = 0;
    padding_ = 0;
    return line;
  }

 private:
  absl::Mutex mu_;
  int64_t batches_ ABSL_GUARDED_BY(mu_) = 0, rows_ ABSL_GUARDED_BY(mu_) = 0, tasks_ ABSL_GUARDED_BY(mu_) = 0;
  double padding_ ABSL_GUARDED_BY(mu_) = 0;
};

// Picks task indexes: uniform or Zipf(s) over [0, k).
class TaskPicker {
 public:
  TaskPicker(int k, bool zipf, double s) {
    double total = 0;
    for (int i = 0; i < k; ++i) {
      total += zipf ? 1.0 / std::pow(i + 1, s) : 1.0;
      cdf_.push_back(total);
    }
    for (double& c : cdf_) c /= total;
  }
  int Pick(std::mt19937_64& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<int>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

// Runs `call(rng)` in a closed loop on `concurrency` threads for `seconds`;
// a phase with errors prints how many and the first one.
PhaseResult RunClosedLoop(const std::string& name, const Flags& f,
                          const std::function<absl::Status(std::mt19937_64&)>& call) {
  std::atomic<bool> stop{false};
  absl::Mutex first_error_mu;
  absl::Status first_error;
  std::vector<std::vector<double>> latencies(static_cast<size_t>(f.concurrency));
  std::vector<int64_t> errors(static_cast<size_t>(f.concurrency), 0);
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < f.concurrency; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      while (!stop.load()) {
        const auto a = std::chrono::steady_clock::now();
        const absl::Status status = call(rng);
        const auto b = std::chrono::steady_clock::now();
        if (status.ok()) {
          latencies[static_cast<size_t>(t)].push_back(std::chrono::duration<double, std::milli>(b - a).count());
        } else {
          ++errors[static_cast<size_t>(t)];
          absl::MutexLock lock(&first_error_mu);
          if (first_error.ok()) first_error = status;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
  stop = true;
  for (auto& th : threads) th.join();
  PhaseResult r;
  r.name = name;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::vector<double> all;
  for (size_t t = 0; t < latencies.size(); ++t) {
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
    r.errors += errors[t];
  }
  r.requests = static_cast<int64_t>(all.size());
  r.texts = r.requests * f.texts_per_request;
  r.p50_ms = Percentile(all, 0.50);
  r.p99_ms = Percentile(all, 0.99);
  std::printf("%-28s %8.1f req/s %9.1f texts/s  p50 %8.2f ms  p99 %8.2f ms  errors %lld\n", name.c_str(), r.rps(),
              r.texts / r.seconds, r.p50_ms, r.p99_ms, static_cast<long long>(r.errors));
  if (!first_error.ok()) std::printf("  first error: %s\n", first_error.ToString().c_str());
  std::fflush(stdout);
  return r;
}

std::vector<std::string> MakeTexts(const model::BertTokenizer& tok, const Flags& f, std::mt19937_64& rng) {
  std::vector<std::string> words;
  for (const std::string& t : tok.tokens()) {
    if (t.size() >= 3 && std::all_of(t.begin(), t.end(), [](char c) { return c >= 'a' && c <= 'z'; })) {
      words.push_back(t);
    }
  }
  if (words.empty()) words.push_back("a");
  std::vector<std::string> texts;
  for (int i = 0; i < f.texts_per_request; ++i) {
    std::string s;
    for (int w = 0; w < f.words; ++w) {
      absl::StrAppend(&s, w ? " " : "", words[std::uniform_int_distribution<size_t>(0, words.size() - 1)(rng)]);
    }
    texts.push_back(std::move(s));
  }
  return texts;
}

// The flags, on the command line and as the run's Flags.
int ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app{"adapterd-loadgen: closed-loop Predict load; in-process engine vs gRPC server, 1 vs K tasks"};
  app.add_option("--model_dir", f.model_dir, "HuggingFace BERT directory (the server's model)")->required();
  app.add_option("--server", f.server, "adapterd host:port for the gRPC phase (empty: in-process only)");
  app.add_option("--tasks", f.tasks, "K resident tasks")->capture_default_str();
  app.add_option("--popularity", f.popularity, "zipf or uniform")->capture_default_str();
  app.add_option("--zipf_s", f.zipf_s, "Zipf exponent")->capture_default_str();
  app.add_option("--concurrency", f.concurrency, "closed-loop clients")->capture_default_str();
  app.add_option("--seconds", f.seconds, "duration of each phase")->capture_default_str();
  app.add_option("--texts_per_request", f.texts_per_request, "texts per Predict")->capture_default_str();
  app.add_option("--words", f.words, "words per text (truncated to --max_seq_len pieces)")->capture_default_str();
  app.add_option("--max_seq_len", f.max_seq_len, "tokens per text")->capture_default_str();
  app.add_option("--bottleneck", f.bottleneck, "adapter size m")->capture_default_str();
  app.add_option("--host_cache_bytes", f.host_cache_bytes, "in-process engine's host tier (adapterd's default)")
      ->capture_default_str();
  app.add_option("--device_cache_bytes", f.device_cache_bytes, "in-process engine's device tier (adapterd's default)")
      ->capture_default_str();
  app.add_option("--adapter_slab_bottleneck", f.slab_bottleneck,
                 "in-process engine's resident slab (adapterd's default, -1: 64 on CUDA, none on CPU; 0 = none)")
      ->capture_default_str();
  app.add_option("--split_overhead_tokens", f.split_overhead_tokens,
                 "in-process engine: the price of one more forward per batch in tokens (-1: the device's default; "
                 "a huge value runs every batch as one forward)")
      ->capture_default_str();
  app.add_option("--strategy", f.strategy, "mixed-task strategy of the in-process engine: auto, gather or segments")
      ->check(CLI::IsMember({"auto", "gather", "segments"}))
      ->capture_default_str();
  app.add_option("--device", f.device, "device of the in-process engine: cpu, cuda or cuda:N (match the server's)")
      ->capture_default_str();
  app.add_option("--dtype", f.dtype, "serving dtype of the in-process engine: fp32 or bf16 (match the server's)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--threads", f.threads, "LibTorch threads for the in-process engine (0 = all)")->capture_default_str();
  app.add_option("--max_batch_size", f.max_batch_size, "in-process batcher")->capture_default_str();
  app.add_option("--max_queue_delay_us", f.max_queue_delay_us, "in-process batcher")->capture_default_str();
  app.add_option("--cold_loads", f.cold_loads, "cold adapter loads to time")->capture_default_str();
  app.add_option("--with_training", f.with_training, "measure Predict with a training job running")
      ->capture_default_str();
  app.add_option("--training_concurrency", f.training_concurrency,
                 "clients for the training comparison (0 = concurrency/4)")
      ->capture_default_str();
  app.add_option("--training_share", f.training_share, "executor share kept by training")->capture_default_str();
  app.add_option("--micro_batch", f.micro_batch, "training micro-batch rows")->capture_default_str();
  app.add_option("--kinds", f.kinds, "measure mixed task kinds against one kind, and QA alone")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return -1;
}

// One run: the model, a database of K tasks, the in-process engine over it
// and the texts, shared by the phases, each its own step. Members are
// destroyed engine first (it reads the model and the database).
class LoadGen {
 public:
  explicit LoadGen(Flags f) : f_(std::move(f)) {}

  // Every phase in order; the process's exit code.
  int Run() {
    if (absl::Status s = Setup(); !s.ok()) return Fail(s);
    RunInProcessPhases();
    if (f_.kinds) RunKindPhases();
    if (!f_.server.empty()) {
      if (absl::Status s = RunServerPhase(); !s.ok()) return Fail(s);
    }
    if (f_.with_training) RunTrainingPhase();
    MeasureColdLoads();
    Teardown();
    return 0;
  }

 private:
  static int Fail(const absl::Status& s) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }

  // The model, the K tasks stored as adapter versions, the engine, the texts.
  absl::Status Setup() {
    // Line by line even into a file, so a crash leaves every finished line.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::printf("%s\n", adapterd::KeepLargeBuffersOnTheHeap().c_str());
    model::SetComputeThreads(f_.threads);
    model::OneBlasThreadUnderOneDnn();  // as adapterd does

    model::LoadOptions lo;
    lo.max_seq_len = f_.max_seq_len;
    lo.dtype = f_.dtype == "bf16" ? c10::kBFloat16 : c10::kFloat;
    ASSIGN_OR_RETURN(lo.device, model::ParseDevice(f_.device));
    absl::StatusOr<model::LoadedModel> m = model::LoadBertModel(f_.model_dir, lo);
    if (!m.ok())
      return absl::Status(m.status().code(), absl::StrCat("loading ", f_.model_dir, ": ", m.status().message()));
    m_ = std::make_unique<model::LoadedModel>(*std::move(m));
    std::printf("model %s: %lld layers, hidden %lld; %d tasks (%s), m=%d, concurrency %d, %d text(s)/request\n",
                f_.model_dir.c_str(), static_cast<long long>(m_->config.num_hidden_layers),
                static_cast<long long>(m_->config.hidden_size), f_.tasks, f_.popularity.c_str(), f_.bottleneck,
                f_.concurrency, f_.texts_per_request);
    RETURN_IF_ERROR(StoreTasks());
    RETURN_IF_ERROR(CreateEngine());
    std::mt19937_64 text_rng(42);
    for (int i = 0; i < 64; ++i) corpus_.push_back(MakeTexts(*m_->tokenizer, f_, text_rng));
    picker_ = std::make_unique<TaskPicker>(f_.tasks, f_.popularity == "zipf", f_.zipf_s);
    return absl::OkStatus();
  }

  // Task i's adapter file, made again on each call (deterministic: seed
  // 7 + i) rather than held: 1,000 BERT-base sets would be 9.7 GB.
  absl::StatusOr<std::string> AdapterFile(int i,
                                          model::TaskKind kind = model::TaskKind::kSequenceClassification) const {
    model::AdapterConfig ac;
    ac.bottleneck_size = f_.bottleneck;
    ac.kind = kind;
    ac.labels = {"negative", "positive"};
    if (kind == model::TaskKind::kMultiLabelClassification) ac.labels = {"price", "quality", "delivery", "service"};
    if (kind == model::TaskKind::kTokenClassification)
      ac.labels = model::BioTagSet(std::vector<std::string>{"PER", "LOC"});
    if (kind == model::TaskKind::kRegression || kind == model::TaskKind::kExtractiveQa) ac.labels.clear();
    if (kind == model::TaskKind::kRegression) ac.target = {.mean = 3, .stddev = 1};
    if (kind == model::TaskKind::kExtractiveQa) ac.qa = QaWindowing();
    ASSIGN_OR_RETURN(auto set, model::AdapterSet::CreateInitialized(m_->config, m_->encoder->weights(), ac, 7 + i,
                                                                    c10::Device(c10::kCPU)));
    return model::SerializeAdapterSet(*set, m_->fingerprint);
  }

  absl::Status StoreTasks() {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("adapterd-loadgen-", ::getpid());
    storage::Database::Options dbo;
    dbo.path = dir_.string();
    ASSIGN_OR_RETURN(db_, storage::Database::Open(dbo));
    for (int i = 0; i < f_.tasks; ++i) {
      storage::Promotion p;
      p.task.set_tenant("default");
      p.task.set_task_id(absl::StrCat("loadgen-", i));
      p.task.add_labels("negative");
      p.task.add_labels("positive");
      p.task.mutable_adapter_config()->set_bottleneck_size(f_.bottleneck);
      ASSIGN_OR_RETURN(p.adapter_bytes, AdapterFile(i));
      RETURN_IF_ERROR(db_->PromoteAdapterVersion(std::move(p)).status());
    }
    for (int i = 0; f_.kinds && i < f_.tasks; ++i) {
      storage::Promotion p;
      p.task.set_tenant("default");
      p.task.set_task_id(absl::StrCat("kind-", i));
      p.task.set_task_kind(training::RecordKind(KindOf(i)));
      p.task.mutable_adapter_config()->set_bottleneck_size(f_.bottleneck);
      ASSIGN_OR_RETURN(p.adapter_bytes, AdapterFile(i, KindOf(i)));
      RETURN_IF_ERROR(db_->PromoteAdapterVersion(std::move(p)).status());
    }
    return absl::OkStatus();
  }

  // Task kind-i's kind: the five in turn.
  static model::TaskKind KindOf(int i) { return static_cast<model::TaskKind>(1 + i % 5); }

  // One request of each kind and the tokens of its rows.
  struct KindRequest {
    serving::PredictRequest request;
    int64_t tokens = 0;
  };
  // The QA tasks' windows: --max_seq_len long, run_squad's ratio of stride.
  model::QaWindowing QaWindowing() const {
    return {.max_seq_len = f_.max_seq_len, .doc_stride = model::DefaultDocStride(f_.max_seq_len)};
  }
  // The rows a request makes, with the engine's own window builders
  // (text_pieces.h): one truncated row per text, or windows.
  int64_t RowTokens(model::TaskKind kind, const std::string& text, const std::string& pair) const {
    const model::BertTokenizer& tok = *m_->tokenizer;
    const int32_t len = f_.max_seq_len;
    std::vector<model::SlidingWindow> windows;
    if (kind == model::TaskKind::kTokenClassification) {
      windows = model::TaggingWindows(tok, model::PiecesOfText(tok, text), len);
    } else if (kind == model::TaskKind::kExtractiveQa) {
      windows = model::QaWindows(tok, text, model::PiecesOfText(tok, pair), QaWindowing(), len);
    } else {
      return static_cast<int64_t>(tok.Encode(text).input_ids.size());
    }
    int64_t n = 0;
    for (const model::SlidingWindow& w : windows) n += static_cast<int64_t>(w.input_ids.size());
    return n;
  }
  // QA: an 8-word question and a context of exactly two windows.
  KindRequest QaRequest(std::mt19937_64& rng) const {
    Flags words = f_;
    words.texts_per_request = 1;
    words.words = 8;
    KindRequest k;
    k.request.texts = MakeTexts(*m_->tokenizer, words, rng);
    const model::BertTokenizer& tok = *m_->tokenizer;
    const int32_t room = f_.max_seq_len - 3 - static_cast<int32_t>(tok.TokenizeToIds(k.request.texts[0]).size());
    words.words = 1;
    std::string context;
    while (static_cast<int32_t>(tok.TokenizeToIds(context).size()) <
           room + model::DefaultDocStride(f_.max_seq_len) / 2) {
      absl::StrAppend(&context, context.empty() ? "" : " ", MakeTexts(tok, words, rng)[0]);
    }
    k.request.text_pairs = {context};
    k.tokens = RowTokens(model::TaskKind::kExtractiveQa, k.request.texts[0], context);
    return k;
  }
  void MakeKindCorpus() {
    std::mt19937_64 rng(43);
    kind_corpus_.resize(6);
    for (int kind = 1; kind <= 5; ++kind) {
      for (int i = 0; i < 16; ++i) {
        KindRequest k;
        if (kind == static_cast<int>(model::TaskKind::kExtractiveQa)) {
          k = QaRequest(rng);
        } else {
          k.request.texts = corpus_[static_cast<size_t>(i) % corpus_.size()];
          for (const std::string& t : k.request.texts) k.tokens += RowTokens(static_cast<model::TaskKind>(kind), t, "");
        }
        kind_corpus_[static_cast<size_t>(kind)].push_back(std::move(k));
      }
    }
  }

  // Mixed kinds against one kind at the same work per token, then QA alone.
  void RunKindPhases() {
    MakeKindCorpus();
    for (int i = 0; i < f_.tasks; ++i) (void)engine_->cache().Get("default", absl::StrCat("kind-", i));
    std::atomic<int64_t> tokens{0};
    // Classification tasks, their tokens counted the same way.
    auto one_kind = [&](std::mt19937_64& rng) {
      serving::PredictRequest r;
      r.tenant = "default";
      r.task_id = absl::StrCat("loadgen-", picker_->Pick(rng));
      r.texts = corpus_[rng() % corpus_.size()];
      int64_t n = 0;
      for (const std::string& t : r.texts) n += RowTokens(model::TaskKind::kSequenceClassification, t, "");
      absl::Status s = engine_->Predict(r).status();
      if (s.ok()) tokens += n;
      return s;
    };
    auto kinds = [&](int only_kind) {
      return [&, only_kind](std::mt19937_64& rng) {
        int task = picker_->Pick(rng);
        if (only_kind > 0) task = task - task % 5 + (only_kind - 1);
        if (task >= f_.tasks) task = only_kind - 1;
        const std::vector<KindRequest>& pool = kind_corpus_[static_cast<size_t>(KindOf(task))];
        const KindRequest& k = pool[rng() % pool.size()];
        serving::PredictRequest r = k.request;
        r.tenant = "default";
        r.task_id = absl::StrCat("kind-", task);
        absl::Status s = engine_->Predict(r).status();
        if (s.ok()) tokens += k.tokens;
        return s;
      };
    };
    const PhaseResult single = RunClosedLoop(absl::StrCat("kinds: ", f_.tasks, " classification"), f_, one_kind);
    const double single_tps = static_cast<double>(tokens.exchange(0)) / single.seconds;
    std::printf("  %s; %.0f tokens/s\n", shapes_.Take().c_str(), single_tps);
    const PhaseResult mixed = RunClosedLoop(absl::StrCat("kinds: ", f_.tasks, " of 5 kinds"), f_, kinds(0));
    const double mixed_tps = static_cast<double>(tokens.exchange(0)) / mixed.seconds;
    std::printf("  %s; %.0f tokens/s\n", shapes_.Take().c_str(), mixed_tps);
    std::printf("ratio  mixed kinds / one kind (tokens/s, in-process):  %.3f\n", mixed_tps / single_tps);
    const PhaseResult qa = RunClosedLoop("kinds: extractive QA only", f_, kinds(5));
    std::printf("  %s; QA at 2 windows per context: %.1f questions/s, %.0f tokens/s\n", shapes_.Take().c_str(),
                qa.rps(), static_cast<double>(tokens.exchange(0)) / qa.seconds);
  }

  absl::Status CreateEngine() {
    serving::InferenceEngine::Options eo;
    eo.encoder = m_->encoder.get();
    eo.tokenizer = m_->tokenizer.get();
    eo.db = db_.get();
    eo.max_seq_len = f_.max_seq_len;
    eo.max_batch_size = f_.max_batch_size;
    eo.max_queue_delay_us = f_.max_queue_delay_us;
    eo.min_training_share = f_.training_share;
    eo.observer = &shapes_;
    eo.host_cache_bytes = f_.host_cache_bytes;
    eo.slab_bottleneck = f_.slab_bottleneck;
    eo.split_overhead_tokens = f_.split_overhead_tokens;
    eo.device_cache_bytes = f_.device_cache_bytes;
    eo.strategy = f_.strategy == "gather"     ? model::MixedStrategy::kGatherBmm
                  : f_.strategy == "segments" ? model::MixedStrategy::kSegments
                                              : model::MixedStrategy::kAuto;
    ASSIGN_OR_RETURN(engine_, serving::InferenceEngine::Create(std::move(eo)));
    return absl::OkStatus();
  }

  // A closed-loop client's call to the in-process engine: task 0, or a task
  // the picker draws.
  std::function<absl::Status(std::mt19937_64&)> InProcess(bool many) {
    return [this, many](std::mt19937_64& rng) {
      serving::PredictRequest r;
      r.tenant = "default";
      r.task_id = absl::StrCat("loadgen-", many ? picker_->Pick(rng) : 0);
      r.texts = corpus_[rng() % corpus_.size()];
      return engine_->Predict(r).status();
    };
  }

  // Warm-up, then 1 task against K tasks.
  void RunInProcessPhases() {
    // Warm every task into the device tier first (the targets are for resident tasks).
    for (int i = 0; i < f_.tasks; ++i) (void)engine_->cache().Get("default", absl::StrCat("loadgen-", i));
    // Then the process itself: the first batches of each shape pay one-time
    // costs (on CUDA, cuDNN's attention plans: seconds of p99 on an H100;
    // docs/PERFORMANCE.md), which would otherwise all fall on the 1-task phase.
    {
      Flags warm = f_;
      warm.seconds = std::max(1.0, f_.seconds / 4);
      RunClosedLoop("in-process warm-up", warm, InProcess(true));
    }
    (void)shapes_.Take();
    const PhaseResult one = RunClosedLoop("in-process, 1 task", f_, InProcess(false));
    std::printf("  %s\n", shapes_.Take().c_str());
    many_ = RunClosedLoop(absl::StrCat("in-process, ", f_.tasks, " tasks"), f_, InProcess(true));
    std::printf("  %s\n", shapes_.Take().c_str());
    std::printf("ratio  %d tasks / 1 task (in-process):  %.3f\n", f_.tasks, many_.rps() / one.rps());
  }

  // The same K tasks imported into the server at --server, and its rate
  // against the in-process engine's.
  absl::Status RunServerPhase() {
    client::AdapterdClient::Options co;
    co.server = f_.server;
    co.wait_for_ready = true;
    ASSIGN_OR_RETURN(std::unique_ptr<client::AdapterdClient> c, client::AdapterdClient::Create(co));
    for (int i = 0; i < f_.tasks; ++i) {
      ASSIGN_OR_RETURN(std::string bytes, AdapterFile(i));
      auto t = c->ImportAdapter(absl::StrCat("loadgen-", i), bytes);
      if (!t.ok() && !absl::IsAlreadyExists(t.status())) {
        return absl::Status(t.status().code(), absl::StrCat("import: ", t.status().message()));
      }
    }
    auto grpc_call = [&](std::mt19937_64& rng) {
      v1::PredictRequest r;
      r.set_task_id(absl::StrCat("loadgen-", picker_->Pick(rng)));
      for (const std::string& t : corpus_[rng() % corpus_.size()]) r.add_texts(t);
      return c->Predict(r).status();
    };
    // One warm-up pass so the server's device tier holds every task too.
    Flags warm = f_;
    warm.seconds = std::max(1.0, f_.seconds / 4);
    RunClosedLoop("gRPC warm-up", warm, grpc_call);
    const PhaseResult server = RunClosedLoop(absl::StrCat("gRPC, ", f_.tasks, " tasks"), f_, grpc_call);
    std::printf("ratio  gRPC server / in-process (%d tasks):  %.3f\n", f_.tasks, server.rps() / many_.rps());
    return absl::OkStatus();
  }

  // Moderate load, without and then with a training job sharing the executor.
  void RunTrainingPhase() {
    Flags moderate = f_;
    moderate.concurrency = f_.training_concurrency > 0 ? f_.training_concurrency : std::max(1, f_.concurrency / 4);
    const PhaseResult quiet =
        RunClosedLoop(absl::StrCat("moderate (", moderate.concurrency, " clients)"), moderate, InProcess(true));
    training::TrainingData data;
    data.labels = {"negative", "positive"};
    std::mt19937_64 trng(9);
    for (int i = 0; i < 2048; ++i) {
      data.train.push_back({MakeTexts(*m_->tokenizer, f_, trng)[0], "", data.labels[static_cast<size_t>(i % 2)]});
    }
    training::Hyperparameters hp;
    hp.epochs = 1000;  // runs until cancelled
    hp.max_seq_len = f_.max_seq_len;
    hp.micro_batch_size = f_.micro_batch;
    hp.bottleneck_size = f_.bottleneck;
    std::atomic<bool> stop{false};
    std::atomic<int64_t> steps{0};
    training::TrainerHooks hooks;
    hooks.cancelled = [&] { return stop.load(); };
    hooks.on_step = [&](int64_t, int64_t, double) { ++steps; };
    hooks.run_on_device = [&](const std::function<absl::Status()>& fn) { return engine_->executor().RunTraining(fn); };
    std::thread trainer([&] { (void)training::Train(*m_->encoder, *m_->tokenizer, data, hp, hooks); });
    // Let the trainer reach its first micro-batch before measuring.
    while (engine_->executor().stats().training_runs == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const serving::DeviceExecutor::Stats before = engine_->executor().stats();
    const PhaseResult busy = RunClosedLoop(absl::StrCat("moderate + training"), moderate, InProcess(true));
    const serving::DeviceExecutor::Stats after = engine_->executor().stats();
    stop = true;
    trainer.join();
    const double train_s = after.training_busy_seconds - before.training_busy_seconds;
    const double infer_s = after.inference_busy_seconds - before.inference_busy_seconds;
    const double runs = static_cast<double>(after.training_runs - before.training_runs);
    const double micro_ms = runs > 0 ? 1000 * train_s / runs : 0;
    std::printf(
        "training during the phase: %lld steps, micro-batch %.1f ms, share of busy time %.2f (target >= %.2f)\n",
        static_cast<long long>(steps.load()), micro_ms, train_s / std::max(1e-9, train_s + infer_s), f_.training_share);
    std::printf("p99 with training %.2f ms vs without %.2f ms + one micro-batch %.2f ms = %.2f ms\n", busy.p99_ms,
                quiet.p99_ms, micro_ms, quiet.p99_ms + micro_ms);
  }

  // Cold loads: RocksDB -> device-ready adapter, timed through the cache
  // (the serving form, written when Setup's warm-up loaded each task), then
  // a host-tier hit, then the parts alone: the serving form's read and
  // decode, and the adapter file's read and parse that loads did before.
  void MeasureColdLoads() {
    auto task = [&](int i) { return absl::StrCat("loadgen-", i % f_.tasks); };
    std::vector<double> cold;
    for (int i = 0; i < f_.cold_loads; ++i) {
      engine_->cache().Invalidate("default", task(i));
      const absl::Time a = absl::Now();
      if (engine_->cache().Get("default", task(i)).ok()) cold.push_back(absl::ToDoubleMilliseconds(absl::Now() - a));
    }
    PrintPercentiles(absl::StrFormat("cold adapter load (m=%d), RocksDB", f_.bottleneck), cold);
    // A host-tier hit: a cache whose device tier holds nothing decodes the
    // serving form it holds on every Get after the first.
    std::vector<double> host;
    serving::AdapterCache::Options co;
    co.encoder = m_->encoder.get();
    co.db = db_.get();
    co.host_budget_bytes = f_.host_cache_bytes;
    co.device_budget_bytes = 0;
    if (auto cache = serving::AdapterCache::Create(std::move(co)); cache.ok()) {
      for (int i = 0; i < std::min(f_.cold_loads, f_.tasks); ++i) (void)(*cache)->Get("default", task(i), 1);
      for (int i = 0; i < f_.cold_loads; ++i) {
        const absl::Time a = absl::Now();
        if ((*cache)->Get("default", task(i), 1).ok()) host.push_back(absl::ToDoubleMilliseconds(absl::Now() - a));
      }
    }
    PrintPercentiles("cold adapter load, host tier", host);

    // The parts alone, on the same tasks.
    std::vector<double> form_read, form_decode, host_decode, slab_store, file_read, file_parse;
    const model::BertEncoder& e = *m_->encoder;
    // The slot write a load through a cache with a slab adds (AdapterSlab::Store).
    std::shared_ptr<model::AdapterSlab> slab;
    if (f_.slab_bottleneck != 0) {
      const int64_t width = f_.slab_bottleneck > 0 ? f_.slab_bottleneck : f_.bottleneck;
      auto created = model::AdapterSlab::Create(
          m_->config, {.capacity = 1, .bottleneck = width, .device = e.device(), .dtype = e.dtype()});
      if (created.ok()) slab = *std::move(created);
    }
    for (int i = 0; i < f_.cold_loads; ++i) {
      const absl::Time a = absl::Now();
      auto form = db_->adapters().GetCurrentServingForm("default", task(i));
      const absl::Time b = absl::Now();
      if (!form.ok() || !form->bytes.has_value()) continue;
      const std::string key = storage::keys::Adapter("default", task(i), form->version);
      model::ServingFormExpectation expect{.source = key, .encoder_fingerprint = e.fingerprint(), .dtype = e.dtype()};
      auto verified = model::DecodeServingForm(*form->bytes, m_->config, e.device(), expect);
      const absl::Time c = absl::Now();
      expect.verify_digest = false;
      auto unverified = model::DecodeServingForm(*form->bytes, m_->config, e.device(), expect);
      const absl::Time d = absl::Now();
      if (!verified.ok() || !unverified.ok()) {
        std::fprintf(stderr, "serving form of %s: %s\n", key.c_str(),
                     (verified.ok() ? unverified.status() : verified.status()).ToString().c_str());
        continue;
      }
      form_read.push_back(absl::ToDoubleMilliseconds(b - a));
      form_decode.push_back(absl::ToDoubleMilliseconds(c - b));
      host_decode.push_back(absl::ToDoubleMilliseconds(d - c));
      if (slab != nullptr) {
        const absl::Time s0 = absl::Now();
        if (slab->Store(**verified).ok()) slab_store.push_back(absl::ToDoubleMilliseconds(absl::Now() - s0));
      }
    }
    for (int i = 0; i < f_.cold_loads; ++i) {
      const absl::Time a = absl::Now();
      auto current = db_->adapters().GetCurrent("default", task(i));
      const absl::Time b = absl::Now();
      if (!current.ok()) continue;
      auto set = model::DeserializeAdapterSet(current->bytes, m_->config, e.fingerprint(), e.device(),
                                              {.check_finite = false, .dtype = e.dtype()});
      const absl::Time c = absl::Now();
      if (!set.ok()) continue;
      file_read.push_back(absl::ToDoubleMilliseconds(b - a));
      file_parse.push_back(absl::ToDoubleMilliseconds(c - b));
    }
    PrintPercentiles("  serving form: RocksDB read (checksums off)", form_read);
    PrintPercentiles("  serving form: XXH3 + decode", form_decode);
    PrintPercentiles("  serving form: decode alone (host tier)", host_decode);
    PrintPercentiles("  resident slab: the slot's write", slab_store);
    PrintPercentiles("  adapter file: RocksDB read (checksums on)", file_read);
    PrintPercentiles("  adapter file: parse + convert", file_parse);
  }

  static void PrintPercentiles(const std::string& what, std::vector<double> ms) {
    std::printf("%-46s p50 %8.2f ms  p99 %8.2f ms  (%zu)\n", what.c_str(), Percentile(ms, 0.5), Percentile(ms, 0.99),
                ms.size());
  }

  // Each step named on stderr.
  void Teardown() {
    // Each teardown step is named, so that a crash after the last figure (seen
    // on an H100) says in which step it happened.
    std::fflush(stdout);
    std::fprintf(stderr, "loadgen: teardown: engine\n");
    engine_.reset();
    std::fprintf(stderr, "loadgen: teardown: database\n");
    (void)db_->Close();
    std::fprintf(stderr, "loadgen: teardown: directory\n");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::fprintf(stderr, "loadgen: teardown: model and locals\n");
  }

  Flags f_;
  std::unique_ptr<model::LoadedModel> m_;
  std::filesystem::path dir_;
  std::unique_ptr<storage::Database> db_;
  BatchShapes shapes_;
  std::unique_ptr<serving::InferenceEngine> engine_;  // reads m_, db_ and shapes_
  std::vector<std::vector<std::string>> corpus_;
  std::vector<std::vector<KindRequest>> kind_corpus_;  // by TaskKind
  std::unique_ptr<TaskPicker> picker_;
  PhaseResult many_;  // the in-process K-task phase, which the server phase is compared with
};

int Main(int argc, char** argv) {
  Flags f;
  if (const int code = ParseFlags(argc, argv, f); code >= 0) return code;
  return LoadGen(std::move(f)).Run();
}

}  // namespace
}  // namespace adapterd::bench

int main(int argc, char** argv) {
  // A crash prints its stack (a benchmark run on a lent machine may be the
  // only one).
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler({});
  const int rc = adapterd::bench::Main(argc, argv);
  std::fprintf(stderr, "loadgen: teardown: static destructors\n");
  return rc;
}
