// Training throughput: adapter training vs the same loop with the encoder
// unfrozen (full fine-tuning, a baseline mode for this benchmark only), and
// the bytes stored per task against a fully fine-tuned copy. Not a test.
//
//   build/bench/training_bench [--preset=base] [--batch=32] [--seq=128] [--steps=2]
//                              [--bottleneck=64] [--threads=N] [--blas_threads=N] [--device=cpu]
//                              [--tf32=0]
//
// --tf32=1 lets CUDA's fp32 products run on TF32 tensor cores (LibTorch's
// allow_tf32 for cuBLAS; off by default, as in LibTorch).
//
// --blas_threads sizes OpenBLAS's pool alone (default: --threads). adapterd
// runs with 1 (its products are in oneDNN), full fine-tuning is fastest with
// --threads: compare each at its own setting (docs/PERFORMANCE.md).
//
// Each mode runs Train() over `steps` optimiser steps of `batch` examples of
// exactly `seq` tokens; examples/s comes from the trainer's own epoch report
// (training loop only, validation excluded).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "common/malloc_tuning.h"
#include "server/model/adapter_format.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/tensor_io.h"
#include "server/training/trainer.h"
#include "tools/make_model/english_vocab.h"

namespace adapterd::training {
namespace {

struct BenchConfig {
  std::string preset = "base";
  int batch = 32;
  int seq = 128;
  int steps = 2;
  int64_t bottleneck = 64;
  int threads = 0;
  int blas_threads = -1;       // -1: as threads
  std::string device = "cpu";  // cpu, cuda or cuda:N
  bool tf32 = false;           // CUDA fp32 products on TF32 tensor cores
};
BenchConfig g_cfg;
std::map<std::string, double> g_rates;

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "training_bench: %s\n", s.ToString().c_str());
    std::exit(1);
  }
}

// Texts of seq-2 single-piece English words, so every row is exactly `seq`
// tokens with [CLS] and [SEP].
TrainingData MakeData(const model::BertTokenizer& tok) {
  std::vector<std::string> words;
  for (const std::string& t : tok.tokens()) {
    if (t.size() > 3 && t[0] != '[' && t[0] != '#') words.push_back(t);
  }
  std::mt19937_64 rng(1);
  TrainingData d;
  d.labels = {"a", "b"};
  auto text = [&] {
    std::string s;
    for (int i = 0; i < g_cfg.seq - 2; ++i) absl::StrAppend(&s, i ? " " : "", words[rng() % words.size()]);
    return s;
  };
  for (int i = 0; i < g_cfg.batch * g_cfg.steps; ++i) d.train.push_back({text(), "", d.labels[i % 2]});
  for (int i = 0; i < 2; ++i) d.validation.push_back({text(), "", d.labels[i % 2]});
  return d;
}

// `dtype`: the frozen encoder's (adapters train in fp32 on a bf16 encoder:
// mixed precision, trainer.h).
void RunMode(benchmark::State& state, TrainableParts parts, c10::ScalarType dtype) {
  auto config = model::BertConfig::Preset(g_cfg.preset, static_cast<int64_t>(tools::DefaultEnglishVocab().size()));
  Check(config.status());
  auto weights = model::RandomEncoderWeights(*config, 1);
  Check(weights.status());
  model::BertEncoder::Options opts;
  opts.fingerprint = "bench";
  auto device = model::ParseDevice(g_cfg.device);
  Check(device.status());
  opts.device = *device;
  opts.trainable = parts == TrainableParts::kFullFineTune;
  opts.dtype = dtype;
  auto encoder = model::BertEncoder::Create(*config, *std::move(weights), opts);
  Check(encoder.status());
  auto tok = model::BertTokenizer::FromTokens(tools::DefaultEnglishVocab(), {});
  Check(tok.status());
  TrainingData data = MakeData(**tok);
  Hyperparameters hp;
  hp.epochs = 1;
  hp.batch_size = g_cfg.batch;
  hp.max_seq_len = g_cfg.seq;
  hp.bottleneck_size = g_cfg.bottleneck;
  hp.trainable = parts;
  double rate = 0;
  for (auto _ : state) {
    auto result = Train(**encoder, **tok, data, hp);
    Check(result.status());
    rate = result->history.back().examples_per_second;
    state.SetIterationTime(static_cast<double>(data.train.size()) / rate);
  }
  state.counters["examples/s"] = rate;
  g_rates[parts == TrainableParts::kFullFineTune ? "full" : dtype == at::kFloat ? "adapters" : "adapters_bf16"] = rate;
}

void BM_AdapterTraining(benchmark::State& state) { RunMode(state, TrainableParts::kAdapters, at::kFloat); }
void BM_AdapterTrainingBf16(benchmark::State& state) { RunMode(state, TrainableParts::kAdapters, at::kBFloat16); }
void BM_FullFineTuning(benchmark::State& state) { RunMode(state, TrainableParts::kFullFineTune, at::kFloat); }

void PrintStorage() {
  auto config = model::BertConfig::Preset(g_cfg.preset, static_cast<int64_t>(tools::DefaultEnglishVocab().size()));
  Check(config.status());
  auto weights = model::RandomEncoderWeights(*config, 1);
  Check(weights.status());
  auto encoder_bytes = model::SerializeEncoderWeights(*weights);
  Check(encoder_bytes.status());
  model::AdapterConfig ac;
  ac.bottleneck_size = g_cfg.bottleneck;
  ac.labels = {"a", "b"};
  auto set = model::AdapterSet::CreateInitialized(*config, *weights, ac, 1, at::kCPU);
  Check(set.status());
  auto f32 = model::SerializeAdapterSet(**set, "bench");
  auto bf16 = model::SerializeAdapterSet(**set, "bench", {}, model::DType::kBF16);
  Check(f32.status());
  Check(bf16.status());
  std::printf(
      "\nStored per task (preset=%s, m=%ld): adapter set %.2f MB fp32 (%.2f MB bf16), %ld parameters;\n"
      "fully fine-tuned copy %.1f MB fp32: %.1fx larger (%.2f%% of it).\n",
      g_cfg.preset.c_str(), static_cast<long>(g_cfg.bottleneck), f32->size() / 1e6, bf16->size() / 1e6,
      static_cast<long>((*set)->NumParameters()), encoder_bytes->size() / 1e6,
      static_cast<double>(encoder_bytes->size()) / static_cast<double>(f32->size()),
      100.0 * static_cast<double>(f32->size()) / static_cast<double>(encoder_bytes->size()));
}

}  // namespace
}  // namespace adapterd::training

BENCHMARK(adapterd::training::BM_AdapterTraining)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(adapterd::training::BM_AdapterTrainingBf16)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(adapterd::training::BM_FullFineTuning)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);

int main(int argc, char** argv) {
  using adapterd::training::g_cfg;
  adapterd::KeepLargeBuffersOnTheHeap();
  std::vector<char*> rest =
      adapterd::bench::ParseOwnFlags(argc, argv,
                                     {{"--preset", [](const char* v) { g_cfg.preset = v; }},
                                      {"--batch", [](const char* v) { g_cfg.batch = std::atoi(v); }},
                                      {"--seq", [](const char* v) { g_cfg.seq = std::atoi(v); }},
                                      {"--steps", [](const char* v) { g_cfg.steps = std::atoi(v); }},
                                      {"--bottleneck", [](const char* v) { g_cfg.bottleneck = std::atol(v); }},
                                      {"--threads", [](const char* v) { g_cfg.threads = std::atoi(v); }},
                                      {"--blas_threads", [](const char* v) { g_cfg.blas_threads = std::atoi(v); }},
                                      {"--device", [](const char* v) { g_cfg.device = v; }},
                                      {"--tf32", [](const char* v) { g_cfg.tf32 = std::atoi(v) != 0; }}});
  at::globalContext().setAllowTF32CuBLAS(g_cfg.tf32);
  adapterd::model::SetComputeThreads(g_cfg.threads);
  if (g_cfg.blas_threads >= 0) adapterd::model::SetBlasThreads(g_cfg.blas_threads);
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  auto& r = adapterd::training::g_rates;
  if (r.count("adapters") && r.count("full") && r["full"] > 0) {
    std::printf(
        "\nRatio (this run, preset=%s batch=%d seq=%d, device %s%s, %d threads): adapter training / full "
        "fine-tuning = %.3f (%.2f vs %.2f examples/s)\n",
        g_cfg.preset.c_str(), g_cfg.batch, g_cfg.seq, g_cfg.device.c_str(), g_cfg.tf32 ? " tf32" : "",
        at::get_num_threads(), r["adapters"] / r["full"], r["adapters"], r["full"]);
  }
  if (r.count("adapters") && r.count("adapters_bf16") && r["adapters"] > 0) {
    std::printf(
        "Ratio (this run): adapter training on a bf16 encoder / on an fp32 encoder = %.3f (%.2f vs %.2f "
        "examples/s)\n",
        r["adapters_bf16"] / r["adapters"], r["adapters_bf16"], r["adapters"]);
  }
  adapterd::training::PrintStorage();
  benchmark::Shutdown();
  return 0;
}
