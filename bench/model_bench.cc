// Encoder throughput: plain encoder vs one task vs 32 tasks mixed in a batch
// (both strategies, from each task's own tensors and from a resident slab),
// in fp32 and bf16. Not a test: it measures speed.
//
//   build/bench/model_bench [--preset=base] [--batch=32] [--seq=128] [--tasks=32]
//                           [--bottleneck=64] [--threads=N] [--benchmark_min_time=2]
//                           [--benchmark_filter=...]
//                           [--layers=L --hidden=H --heads=A --intermediate=F --vocab=V]
// The geometry flags override the preset's (a candidate default encoder's
// serving cost, docs/QUALITY.md); --vocab sets the vocabulary size [30522].
//
// BM_DtypeCalibration times --dtype auto's start-up calibration at the
// preset's geometry (its cost, both dtypes' times and its choice).
//
// After the runs it prints the ratios that docs/PERFORMANCE.md tracks, all
// taken from this one run (the machine is shared and noisy; only ratios
// within a run are comparable).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "common/malloc_tuning.h"
#include "server/model/adapter_set.h"
#include "server/model/adapter_slab.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/dtype_calibration.h"
#include "server/model/tensor_io.h"
#include "server/model/tokenizer.h"

namespace adapterd::model {
namespace {

struct BenchConfig {
  std::string preset = "base";
  int64_t batch = 32;
  int64_t seq = 128;
  int64_t tasks = 32;
  int64_t bottleneck = 64;
  int threads = 0;  // 0: one per hardware thread
  // Overrides of the preset's geometry (0: the preset's).
  int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0;
  int64_t vocab = 30522;
};
BenchConfig g_cfg;

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "model_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// Lazily built fixtures per dtype, shared by every benchmark.
struct Fixture {
  std::unique_ptr<BertEncoder> encoder;
  std::shared_ptr<const AdapterStack> one_task;
  std::shared_ptr<const AdapterStack> many_tasks;
  std::shared_ptr<const AdapterSet> single;
  std::vector<std::shared_ptr<const AdapterSet>> sets;
  // The same tasks resident in a slab (AdapterSlab::Store), as the serving
  // cache holds them.
  std::shared_ptr<AdapterSlab> slab;
  std::vector<std::shared_ptr<const AdapterSet>> slab_sets;
  EncoderInput input;
};

Fixture& GetFixture(c10::ScalarType dtype) {
  static std::map<c10::ScalarType, std::unique_ptr<Fixture>> fixtures;
  auto& slot = fixtures[dtype];
  if (slot) return *slot;
  slot = std::make_unique<Fixture>();
  auto config = BertConfig::Preset(g_cfg.preset, g_cfg.vocab);
  Check(config.status());
  if (g_cfg.layers > 0) config->num_hidden_layers = g_cfg.layers;
  if (g_cfg.hidden > 0) config->hidden_size = g_cfg.hidden;
  if (g_cfg.heads > 0) config->num_attention_heads = g_cfg.heads;
  if (g_cfg.intermediate > 0) config->intermediate_size = g_cfg.intermediate;
  Check(config->Validate());
  auto weights = RandomEncoderWeights(*config, 1);
  Check(weights.status());
  BertEncoder::Options opts;
  opts.dtype = dtype;
  opts.fingerprint = "bench";
  auto enc = BertEncoder::Create(*config, *std::move(weights), opts);
  Check(enc.status());
  slot->encoder = *std::move(enc);
  std::vector<std::shared_ptr<const AdapterSet>> sets;
  for (int64_t t = 0; t < g_cfg.tasks; ++t) {
    AdapterConfig ac;
    ac.bottleneck_size = g_cfg.bottleneck;
    ac.labels = {"a", "b", "c"};
    auto set =
        AdapterSet::CreateInitialized(*config, slot->encoder->weights(), ac, static_cast<uint64_t>(t + 1), at::kCPU);
    Check(set.status());
    sets.push_back(std::move(*set));
  }
  auto many = AdapterStack::Create(sets, *config, at::kCPU, dtype, /*build_gather_tensors=*/true);
  Check(many.status());
  slot->many_tasks = *many;
  auto one = AdapterStack::Create(std::span(sets).first(1), *config, at::kCPU, dtype, true);
  Check(one.status());
  slot->one_task = *one;
  slot->single = std::shared_ptr<const AdapterSet>(slot->one_task, &slot->one_task->slot(0));
  slot->sets = sets;
  auto slab = AdapterSlab::Create(
      *config, {.capacity = g_cfg.tasks, .bottleneck = g_cfg.bottleneck, .device = at::kCPU, .dtype = dtype});
  Check(slab.status());
  slot->slab = *slab;
  for (const auto& set : sets) {
    auto cast = set->Clone(at::kCPU, dtype);
    Check(cast.status());
    auto stored = slot->slab->Store(**cast);
    Check(stored.status());
    slot->slab_sets.push_back(*std::move(stored));
  }
  at::manual_seed(0);
  at::Tensor ids = at::randint(5, g_cfg.vocab, {g_cfg.batch, g_cfg.seq}, at::kLong);
  slot->input = {ids, at::zeros_like(ids), at::ones_like(ids)};
  return *slot;
}

c10::ScalarType DTypeArg(int64_t arg) { return arg == 0 ? at::kFloat : at::kBFloat16; }

void SetCounters(benchmark::State& state) {
  const double seqs = static_cast<double>(state.iterations() * g_cfg.batch);
  state.counters["seq/s"] = benchmark::Counter(seqs, benchmark::Counter::kIsRate);
  state.counters["tok/s"] = benchmark::Counter(seqs * static_cast<double>(g_cfg.seq), benchmark::Counter::kIsRate);
}

void BM_PlainEncoder(benchmark::State& state) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto out = f.encoder->Forward(f.input);
    Check(out.status());
    benchmark::DoNotOptimize(out->pooled.data_ptr());
  }
  SetCounters(state);
}

// What the serving engine does for each mixed batch on a GPU: stack the
// batch's tasks with their gather tensors. At small presets the time is per
// operator, and on a GPU each operator is a kernel launch (one more per task
// and adapter can halve the engine's mixed-task rate: docs/PERFORMANCE.md).
// Operators that launch a kernel on a GPU, counted by name through
// RecordFunction: what a stack costs in launches wherever it runs.
thread_local std::map<std::string, int64_t>* t_op_counts = nullptr;
std::unique_ptr<at::ObserverContext> CountOp(const at::RecordFunction& fn) {
  static const std::set<std::string> launching = {"aten::cat",   "aten::copy_",           "aten::fill_",
                                                  "aten::zero_", "aten::constant_pad_nd", "aten::index_select"};
  if (t_op_counts != nullptr && launching.count(fn.name())) ++(*t_op_counts)[fn.name()];
  return nullptr;
}

// The launching operators `fn` runs, by name.
template <typename Fn>
std::map<std::string, int64_t> CountLaunchingOps(Fn&& fn) {
  std::map<std::string, int64_t> counts;
  t_op_counts = &counts;
  const at::CallbackHandle handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(&CountOp).scopes({at::RecordScope::FUNCTION}));
  fn();
  at::removeCallback(handle);
  t_op_counts = nullptr;
  return counts;
}

int64_t Total(const std::map<std::string, int64_t>& counts) {
  int64_t total = 0;
  for (const auto& [name, n] : counts) total += n;
  return total;
}

// Arg 1: 0 = the tasks' own tensors (a copy of every task's adapters per
// batch), 1 = the tasks resident in a slab (only the heads are stacked).
void BM_StackWithGatherTensors(benchmark::State& state) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  const auto& sets = state.range(1) == 0 ? f.sets : f.slab_sets;
  c10::InferenceMode guard;
  {
    std::map<std::string, int64_t> counts = CountLaunchingOps(
        [&] { Check(AdapterStack::Create(sets, f.encoder->config(), at::kCPU, f.encoder->dtype(), true).status()); });
    state.counters["launching_ops"] = static_cast<double>(Total(counts));
    state.counters["cat_ops"] = static_cast<double>(counts["aten::cat"]);
  }
  for (auto _ : state) {
    auto stack = AdapterStack::Create(sets, f.encoder->config(), at::kCPU, f.encoder->dtype(), true);
    Check(stack.status());
    benchmark::DoNotOptimize(stack->get());
  }
  state.counters["tasks"] = static_cast<double>(f.sets.size());
}

void BM_OneTask(benchmark::State& state) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto out = f.encoder->Forward(f.input, *f.single);
    Check(out.status());
    benchmark::DoNotOptimize(out->logits.data_ptr());
  }
  SetCounters(state);
}

void MixedTasks(benchmark::State& state, MixedStrategy strategy) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  c10::InferenceMode guard;
  std::vector<int64_t> slots(static_cast<size_t>(g_cfg.batch));
  // Every row its own task (round-robin), interleaved as requests arrive.
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i) % g_cfg.tasks;
  for (auto _ : state) {
    auto out = f.encoder->Forward(f.input, *f.many_tasks, slots, {.strategy = strategy});
    Check(out.status());
    benchmark::DoNotOptimize(out->logits.data_ptr());
  }
  SetCounters(state);
}

// --dtype auto's start-up calibration (server/model/dtype_calibration.h,
// defaults: 8 x 64 tokens, layer 0, one thread) on this preset's fp32 weights, as the
// server runs it once: per iteration its whole cost; its two timings per
// row, their ratio and its choice (the label) are the last iteration's. It
// reads only layer 0, so --layers=1 gives a preset's figures without building
// the rest (--preset=large --layers=1). --batch and --seq do not apply.
void BM_DtypeCalibration(benchmark::State& state) {
  Fixture& f = GetFixture(at::kFloat);
  DtypeTimings t;
  for (auto _ : state) {
    auto timed = CalibrateDtypes(f.encoder->config(), f.encoder->weights());
    Check(timed.status());
    t = *timed;
  }
  state.counters["fp32_ms_per_row"] = 1e3 * t.fp32_seconds_per_row;
  state.counters["bf16_ms_per_row"] = 1e3 * t.bf16_seconds_per_row;
  state.counters["bf16_speedup"] = t.Bf16Speedup();
  state.counters["reps"] = t.reps;
  state.SetLabel("chooses " + ChooseFasterDtype(t));
}

void BM_MixedSegments(benchmark::State& state) { MixedTasks(state, MixedStrategy::kSegments); }
void BM_MixedGatherBmm(benchmark::State& state) { MixedTasks(state, MixedStrategy::kGatherBmm); }

// What the serving engine does per mixed batch with the tasks resident in a
// slab: the batch's stack (only the heads are copied), then the forward,
// timed together. Counts the launching operators of one batch: with the
// gathered strategy their number does not grow with the tasks.
void MixedSlab(benchmark::State& state, MixedStrategy strategy) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  c10::InferenceMode guard;
  std::vector<int64_t> slots(static_cast<size_t>(g_cfg.batch));
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int64_t>(i) % g_cfg.tasks;
  auto batch = [&] {
    auto stack = AdapterStack::Create(f.slab_sets, f.encoder->config(), at::kCPU, f.encoder->dtype(),
                                      strategy == MixedStrategy::kGatherBmm);
    Check(stack.status());
    auto out = f.encoder->Forward(f.input, **stack, slots, {.strategy = strategy});
    Check(out.status());
    benchmark::DoNotOptimize(out->logits.data_ptr());
  };
  state.counters["launching_ops"] = static_cast<double>(Total(CountLaunchingOps(batch)));
  for (auto _ : state) batch();
  SetCounters(state);
}
// Writing one task into a slab slot (what a cold load adds to the decode:
// AdapterSlab::Store), the slot given back after each write.
void BM_SlabStore(benchmark::State& state) {
  Fixture& f = GetFixture(DTypeArg(state.range(0)));
  c10::InferenceMode guard;
  auto slab = AdapterSlab::Create(f.encoder->config(),
                                  {.capacity = 1, .bottleneck = g_cfg.bottleneck, .dtype = f.encoder->dtype()});
  Check(slab.status());
  auto cast = f.sets[0]->Clone(at::kCPU, f.encoder->dtype());
  Check(cast.status());
  state.counters["launching_ops"] =
      static_cast<double>(Total(CountLaunchingOps([&] { Check((*slab)->Store(**cast).status()); })));
  for (auto _ : state) {
    auto stored = (*slab)->Store(**cast);
    Check(stored.status());
  }
}

void BM_MixedSlabSegments(benchmark::State& state) { MixedSlab(state, MixedStrategy::kSegments); }
void BM_MixedSlabGather(benchmark::State& state) { MixedSlab(state, MixedStrategy::kGatherBmm); }

// Tokenizing with and without each piece's span in the text (the spans cost
// what the task kinds that need offsets pay on top of the ids), on the
// default encoder's vocabulary. Arg: 0 = ids only, 1 = with offsets.
void Tokenize(benchmark::State& state) {
  static const std::unique_ptr<BertTokenizer> tokenizer = [] {
    auto t = BertTokenizer::FromVocabFile(ADAPTERD_BENCH_VOCAB, TokenizerOptions{});
    Check(t.status());
    return *std::move(t);
  }();
  // Mostly ASCII, as most texts are, with some accents, CJK and an emoji.
  const std::string text =
      "The Caf\u00e9 on Main Street served a na\u00efve but delightful cr\u00e8me br\u00fbl\u00e9e, "
      "and the staff (all three of them) were friendly \u2014 we will be back! "
      "\u4e2d\u6587 too, 10/10 \U0001F600. Shipping took 4 days; the box arrived dented.";
  size_t pieces = 0;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      pieces += tokenizer->TokenizeToIds(text).size();
    } else {
      pieces += tokenizer->TokenizeWithOffsets(text).size();
    }
  }
  benchmark::DoNotOptimize(pieces);
  state.counters["seq/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
void BM_Tokenize(benchmark::State& state) { Tokenize(state); }

// Collects seq/s per benchmark name for the closing ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      auto it = r.counters.find("seq/s");
      std::string name = r.benchmark_name();
      if (auto cut = name.find("/min_time"); cut != std::string::npos) name.resize(cut);
      if (name.starts_with("adapterd::model::")) name = name.substr(17);
      if (it != r.counters.end()) rates_[name] = it->second.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void PrintRatios() const {
    auto ratio = [&](const std::string& a, const std::string& b) {
      auto ia = rates_.find(a), ib = rates_.find(b);
      if (ia == rates_.end() || ib == rates_.end() || ib->second == 0) return;
      std::printf("  %-48s %-32s %.3f\n", a.c_str(), ("/ " + b).c_str(), ia->second / ib->second);
    };
    std::printf(
        "\nRatios (seq/s, this run; preset=%s layers=%ld hidden=%ld batch=%ld seq=%ld tasks=%ld m=%ld, %d threads):\n",
        g_cfg.preset.c_str(), static_cast<long>(g_cfg.layers), static_cast<long>(g_cfg.hidden),
        static_cast<long>(g_cfg.batch), static_cast<long>(g_cfg.seq), static_cast<long>(g_cfg.tasks),
        static_cast<long>(g_cfg.bottleneck), at::get_num_threads());
    for (const char* dt : {"0", "1"}) {
      const std::string s = absl::StrCat("/", dt);
      ratio("BM_MixedSegments" + s, "BM_OneTask" + s);
      ratio("BM_MixedGatherBmm" + s, "BM_OneTask" + s);
      ratio("BM_MixedSlabSegments" + s, "BM_OneTask" + s);
      ratio("BM_MixedSlabGather" + s, "BM_OneTask" + s);
      ratio("BM_OneTask" + s, "BM_PlainEncoder" + s);
    }
    for (const char* b : {"BM_PlainEncoder", "BM_OneTask", "BM_MixedSegments", "BM_MixedGatherBmm"}) {
      ratio(absl::StrCat(b, "/1"), absl::StrCat(b, "/0"));
    }
    std::printf("(/0 = fp32, /1 = bf16)\n");
    ratio("BM_Tokenize/1", "BM_Tokenize/0");
    std::printf("(BM_Tokenize: /0 = ids only, /1 = with offsets)\n");
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace
}  // namespace adapterd::model

BENCHMARK(adapterd::model::BM_PlainEncoder)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_StackWithGatherTensors)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_OneTask)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_MixedSegments)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_MixedGatherBmm)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_MixedSlabSegments)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_MixedSlabGather)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_SlabStore)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(adapterd::model::BM_Tokenize)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(adapterd::model::BM_DtypeCalibration)->Iterations(3)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  using adapterd::model::g_cfg;
  adapterd::KeepLargeBuffersOnTheHeap();
  // Our flags first; the rest go to Google Benchmark.
  std::vector<char*> rest =
      adapterd::bench::ParseOwnFlags(argc, argv,
                                     {{"--preset", [](const char* v) { g_cfg.preset = v; }},
                                      {"--batch", [](const char* v) { g_cfg.batch = std::atol(v); }},
                                      {"--seq", [](const char* v) { g_cfg.seq = std::atol(v); }},
                                      {"--tasks", [](const char* v) { g_cfg.tasks = std::atol(v); }},
                                      {"--bottleneck", [](const char* v) { g_cfg.bottleneck = std::atol(v); }},
                                      {"--threads", [](const char* v) { g_cfg.threads = std::atoi(v); }},
                                      {"--layers", [](const char* v) { g_cfg.layers = std::atol(v); }},
                                      {"--hidden", [](const char* v) { g_cfg.hidden = std::atol(v); }},
                                      {"--heads", [](const char* v) { g_cfg.heads = std::atol(v); }},
                                      {"--intermediate", [](const char* v) { g_cfg.intermediate = std::atol(v); }},
                                      {"--vocab", [](const char* v) { g_cfg.vocab = std::atol(v); }}});
  adapterd::model::SetComputeThreads(g_cfg.threads);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  adapterd::model::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
