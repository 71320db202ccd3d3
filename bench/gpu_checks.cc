// adapterd-gpu-checks: the GPU issue's correctness checks and encoder-level
// speed measurements, on one device, in one process (docs/PERFORMANCE.md,
// "GPU"; scripts/gpu/build-and-measure.sh runs it).
//
//   adapterd-gpu-checks --model_dir M --out DIR [--device cuda] [--tasks 1000] [--batch 1000]
//
//   C1  fp32 on the device vs fp32 on the CPU, same weights and inputs:
//       largest |difference| of the hidden states (real tokens only), the
//       pooled outputs and the logits, for the plain encoder, one task, and a
//       batch mixing 4 tasks (segments and gathered strategies). Target 1e-4.
//   C2  bf16 vs fp32 on the device: argmax agreement over --c2_inputs random
//       texts and the largest probability difference, for a task that is
//       either trained on the device with training::Train (--c2_task trained:
//       which of two marker words a text holds; needs a pretrained encoder)
//       or calibrated (the default: a head through the mean of the encoder's
//       own pooled features, the conservative case; see TaskForC2), or
//       (--c2_task dataset --c2_dataset examples/NAME) trained on NAME_train.csv
//       and compared on every text of NAME_test.csv. Target >= 99.5%.
//   C3  files only: DIR/c3/ holds a task's adapter file, inputs and this
//       device's fp32 logits and pooled outputs; scripts/gpu/c3_reference.py
//       recomputes them with transformers' BertModel plus the same adapters.
//   G1/G2  encoder throughput at --dtype (bf16), --batch rows of --seq
//       tokens: the bare encoder, one task, and --tasks tasks mixed in every
//       batch (segments and gathered strategies); sequences/s, TFLOP/s, and
//       the ratios mixed/single and mixed/bare, all from this one run.
//   G4  batch-1 latency of a 16-word text (tokenize, forward, softmax, copy
//       to the host), p50 and p99, bf16 and fp32; and (a CUDA LibTorch 2.x)
//       the same with the forward captured once in a CUDA graph and
//       replayed: what the launch overhead costs (g4_graph.*).
//   --profile (LibTorch 2.x on CUDA): one forward each of the bare encoder,
//       one task and the gathered mixed batch under the Kineto profiler:
//       kernel time by kind (matrix products, attention, LayerNorm, GELU,
//       gathers, copies, other elementwise) and the costliest kernels.
//   --reduced_residual_stream: the reduced-dtype encoder (C2, G1, G4) keeps
//       its residual stream in that dtype (BertEncoder::Options).
//
// Every figure is printed as "RESULT <key> <value>" and written to
// DIR/gpu_checks.json. The exit status is 0 when every step ran (targets
// missed included: they are measurements), 1 when a step failed.
//
// On a CPU-only LibTorch it runs with --device cpu (a smoke run on a tiny
// model: C1 then compares the CPU with itself, and the strategies with each
// other).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#ifdef ADAPTERD_KINETO_PROFILER
#include <torch/csrc/autograd/profiler_kineto.h>
#endif
#ifdef ADAPTERD_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/bench_main.h"
#include "common/dataset_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/adapter_slab.h"
#include "server/model/bert_encoder.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"
#include "server/training/trainer.h"

namespace adapterd::bench {
namespace {

using Clock = std::chrono::steady_clock;
using model::AdapterSet;
using model::AdapterSlab;
using model::AdapterStack;
using model::BertEncoder;
using model::EncoderInput;
using model::EncoderOutput;

struct Flags {
  std::string model_dir;
  std::string out;
  std::string device = "cuda";
  std::string dtype = "bf16";
  int tasks = 1000;
  int batch = 1000;
  int seq = 128;
  int bottleneck = 64;
  int iters = 5;
  int c2_inputs = 10000;
  int c2_train_examples = 3000;
  int c2_epochs = 2;
  std::string c2_task = "calibrated";  // or trained, dataset
  std::string c2_dataset;              // dataset: the files' prefix (examples/wordnet_supersenses)
  int latency_runs = 300;
  bool profile = false;
  bool reduced_residual_stream = false;
  std::string only;  // comma-separated subset of c1,c2,g1,g4 (empty: all)
};

nlohmann::json g_results = nlohmann::json::object();
bool g_failed = false;

void Result(const std::string& key, double value) {
  std::printf("RESULT %s %.6g\n", key.c_str(), value);
  std::fflush(stdout);
  g_results[key] = value;
}

void Fail(const std::string& step, const absl::Status& s) {
  std::printf("FAILED %s: %s\n", step.c_str(), s.ToString().c_str());
  std::fflush(stdout);
  g_results["failed"][step] = s.ToString();
  g_failed = true;
}

// Waits for the device's queued work: a copy to the host is ordered after it.
void Sync(c10::Device d) {
  if (!d.is_cpu()) (void)at::zeros({1}, at::TensorOptions().device(d)).cpu();
}

// Median seconds of `iters` calls of fn after `warmup` calls; fn returns
// false on error (then 0 is returned).
template <typename Fn>
double MedianSeconds(int warmup, int iters, c10::Device device, Fn&& fn) {
  for (int i = 0; i < warmup; ++i) {
    if (!fn()) return 0;
  }
  Sync(device);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    if (!fn()) return 0;
    Sync(device);
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  return Percentile(t, 0.5);
}

// Floating-point operations of one sequence of `s` tokens through the
// encoder (matrix products and attention; adapters when m > 0).
double FlopsPerSequence(const model::BertConfig& c, int64_t s, int64_t m) {
  const double d = static_cast<double>(c.hidden_size), ff = static_cast<double>(c.intermediate_size);
  const double per_layer = 2.0 * s * d * (3 * d + d + 2 * ff) + 4.0 * s * s * d + (m > 0 ? 2 * 4.0 * s * d * m : 0);
  return per_layer * static_cast<double>(c.num_hidden_layers);
}

// A task's random parameters made on `device` in `dtype` directly (1,000
// BERT-large sets are 12.6 GB in bf16: drawing them on the CPU and copying
// would take minutes). Adapters ~ N(0, 0.02), LayerNorm gains 1 + N(0, 0.1),
// biases N(0, 0.1): far from identity, so a wrong slot shows.
absl::StatusOr<std::shared_ptr<const AdapterSet>> RandomSetOn(const model::BertConfig& config, int64_t m, int labels,
                                                              c10::Device device, c10::ScalarType dtype) {
  return model::GuardTorch("random adapter set", [&]() -> absl::StatusOr<std::shared_ptr<const AdapterSet>> {
    const auto o = at::TensorOptions().device(device).dtype(dtype);
    const int64_t d = config.hidden_size;
    auto normal = [&](at::IntArrayRef shape, double std) { return at::randn(shape, o).mul_(std); };
    auto ln = [&] { return model::LayerNormAffine{normal({d}, 0.1).add_(1.0), normal({d}, 0.1)}; };
    auto adapter = [&] {
      return model::BottleneckAdapter{normal({m, d}, 0.02), normal({m}, 0.1), normal({d, m}, 0.02), normal({d}, 0.1)};
    };
    std::vector<model::AdapterLayer> layers;
    for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers.push_back({adapter(), ln(), adapter(), ln()});
    model::AdapterConfig ac;
    ac.bottleneck_size = m;
    for (int i = 0; i < labels; ++i) ac.labels.push_back(absl::StrCat("label", i));
    ASSIGN_OR_RETURN(
        std::unique_ptr<AdapterSet> set,
        AdapterSet::FromParts(config, ac, ln(), std::move(layers), normal({labels, d}, 0.05), normal({labels}, 0.1)));
    return std::shared_ptr<const AdapterSet>(std::move(set));
  });
}

// Random rows: [CLS] w... [SEP] with lengths `lengths` padded to the longest.
EncoderInput RandomInput(const model::BertTokenizer& tok, const std::vector<int64_t>& lengths, bool pair_types,
                         std::mt19937_64& rng) {
  const int64_t first_word = 5;  // after the specials
  std::vector<std::vector<int64_t>> ids(lengths.size()), types(lengths.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    const int64_t n = lengths[r];
    for (int64_t i = 0; i < n; ++i) {
      ids[r].push_back(i == 0       ? tok.cls_id()
                       : i == n - 1 ? tok.sep_id()
                                    : first_word + static_cast<int64_t>(
                                                       rng() % static_cast<uint64_t>(tok.vocab_size() - first_word)));
      types[r].push_back(pair_types && i >= n / 2 ? 1 : 0);
    }
  }
  return model::ToEncoderInput(model::PadRows(
      lengths.size(), tok.pad_id(), [&](size_t r) -> const std::vector<int64_t>& { return ids[r]; },
      [&](size_t r) -> const std::vector<int64_t>& { return types[r]; }));
}

// Largest |a - b| (in fp64 on the CPU); `mask` [B, L] limits [B, L, d]
// tensors to real tokens.
double MaxDiff(const at::Tensor& a, const at::Tensor& b, const at::Tensor& mask = {}) {
  at::Tensor d = (a.to(at::kCPU, at::kDouble) - b.to(at::kCPU, at::kDouble)).abs();
  if (mask.defined()) d = d * mask.to(at::kCPU, at::kDouble).unsqueeze(-1);
  return d.max().item<double>();
}

struct Models {
  model::LoadedModel cpu32, dev32, dev_serving;
};

// ------------------------------------------------------------------ C1 ---
void CheckC1(const Flags& f, Models& m, c10::Device device) {
  std::printf("\n== C1: fp32 on %s vs fp32 on the CPU\n", device.str().c_str());
  const model::BertConfig& config = m.cpu32.config;
  std::vector<std::shared_ptr<const AdapterSet>> cpu_sets, dev_sets;
  for (int i = 0; i < 4; ++i) {
    model::AdapterConfig ac;
    ac.bottleneck_size = f.bottleneck;
    ac.init_std = 0.05;  // far enough from identity that the adapters matter
    for (int k = 0; k < 2 + i; ++k) ac.labels.push_back(absl::StrCat("l", k));
    auto set = AdapterSet::CreateInitialized(config, m.cpu32.encoder->weights(), ac, 100 + i, c10::kCPU);
    if (!set.ok()) return Fail("c1 adapters", set.status());
    auto moved = (*set)->Clone(device, at::kFloat);
    if (!moved.ok()) return Fail("c1 adapters", moved.status());
    cpu_sets.push_back(std::move(*set));
    dev_sets.push_back(std::move(*moved));
  }
  auto cpu_stack = AdapterStack::Create(cpu_sets, config, c10::kCPU, at::kFloat, true);
  auto dev_stack = AdapterStack::Create(dev_sets, config, device, at::kFloat, true);
  if (!cpu_stack.ok() || !dev_stack.ok())
    return Fail("c1 stacks", cpu_stack.ok() ? dev_stack.status() : cpu_stack.status());

  std::mt19937_64 rng(5);
  const std::vector<int64_t> lengths = {static_cast<int64_t>(f.seq), 100, 77, 64, 33, 17, 9,
                                        static_cast<int64_t>(f.seq)};
  std::vector<int64_t> clipped;
  for (int64_t l : lengths)
    clipped.push_back(std::min<int64_t>(std::max<int64_t>(l, 3), config.max_position_embeddings));
  const EncoderInput input = RandomInput(*m.cpu32.tokenizer, clipped, true, rng);
  const std::vector<int64_t> slots = {2, 0, 3, 1, 1, 3, 0, 2};

  c10::InferenceMode guard;
  double worst = 0;
  auto compare = [&](const std::string& name, const absl::StatusOr<EncoderOutput>& cpu,
                     const absl::StatusOr<EncoderOutput>& dev) {
    if (!cpu.ok()) return Fail(absl::StrCat("c1 ", name, " cpu"), cpu.status());
    if (!dev.ok()) return Fail(absl::StrCat("c1 ", name, " ", device.str()), dev.status());
    const double hidden = MaxDiff(dev->last_hidden_state, cpu->last_hidden_state, input.attention_mask);
    const double pooled = MaxDiff(dev->pooled, cpu->pooled);
    const double logits = cpu->logits.defined() ? MaxDiff(dev->logits.masked_fill(dev->logits.isinf(), 0),
                                                          cpu->logits.masked_fill(cpu->logits.isinf(), 0))
                                                : 0.0;
    const double scale = cpu->last_hidden_state.abs().max().item<double>();
    std::printf("  %-22s max|diff| hidden %.3g (values up to %.3g), pooled %.3g, logits %.3g\n", name.c_str(), hidden,
                scale, pooled, logits);
    Result(absl::StrCat("c1.", name, ".hidden_max_abs_diff"), hidden);
    Result(absl::StrCat("c1.", name, ".pooled_max_abs_diff"), pooled);
    Result(absl::StrCat("c1.", name, ".logits_max_abs_diff"), logits);
    worst = std::max({worst, hidden, pooled, logits});
  };
  compare("plain", m.cpu32.encoder->Forward(input), m.dev32.encoder->Forward(input));
  compare("one_task", m.cpu32.encoder->Forward(input, *cpu_sets[1]), m.dev32.encoder->Forward(input, *dev_sets[1]));
  model::ForwardOptions seg{.strategy = model::MixedStrategy::kSegments};
  model::ForwardOptions gat{.strategy = model::MixedStrategy::kGatherBmm};
  const auto cpu_mixed = m.cpu32.encoder->Forward(input, **cpu_stack, slots, seg);
  compare("mixed_segments", cpu_mixed, m.dev32.encoder->Forward(input, **dev_stack, slots, seg));
  compare("mixed_gathered", cpu_mixed, m.dev32.encoder->Forward(input, **dev_stack, slots, gat));
  Result("c1.worst_max_abs_diff", worst);
  std::printf("  C1 %s: worst %.3g (target <= 1e-4)\n", worst <= 1e-4 ? "PASS" : "MISS", worst);

  // C3's files: task 1 on every row, fp32 on the device.
  const std::filesystem::path c3 = std::filesystem::path(f.out) / "c3";
  std::filesystem::create_directories(c3);
  auto bytes = model::SerializeAdapterSet(*cpu_sets[1], m.cpu32.fingerprint);
  auto dev = m.dev32.encoder->Forward(input, *dev_sets[1]);
  if (!bytes.ok() || !dev.ok()) return Fail("c3 files", bytes.ok() ? dev.status() : bytes.status());
  std::ofstream(c3 / "adapter.safetensors", std::ios::binary) << *bytes;
  auto rows = [](const at::Tensor& t) {
    at::Tensor c = t.to(at::kCPU, at::kDouble).contiguous();
    std::vector<std::vector<double>> out(static_cast<size_t>(c.size(0)));
    for (int64_t r = 0; r < c.size(0); ++r) {
      const double* p = c[r].data_ptr<double>();
      out[static_cast<size_t>(r)].assign(p, p + c.size(1));
    }
    return out;
  };
  nlohmann::json j;
  j["input_ids"] = rows(input.input_ids);
  j["token_type_ids"] = rows(input.token_type_ids);
  j["attention_mask"] = rows(input.attention_mask);
  j["logits"] = rows(dev->logits);
  j["pooled"] = rows(dev->pooled);
  j["device"] = device.str();
  std::ofstream(c3 / "adapterd_fp32.json") << j.dump();
  std::printf("  C3 files written to %s\n", c3.string().c_str());
}

// ------------------------------------------------------------------ C2 ---
// Texts of random words, each holding exactly one of two marker words; the
// label is the marker's.
struct MarkerTask {
  std::vector<std::string> words;
  std::string markers[2];
  std::vector<std::string> labels = {"first", "second"};

  explicit MarkerTask(const model::BertTokenizer& tok) {
    for (const std::string& t : tok.tokens()) {
      if (t.size() > 3 && t[0] != '[' && t[0] != '#') words.push_back(t);
    }
    markers[0] = words[words.size() / 3];
    markers[1] = words[2 * words.size() / 3];
  }
  std::pair<std::string, int> Draw(std::mt19937_64& rng) const {
    const int n = 4 + static_cast<int>(rng() % 40);
    const int label = static_cast<int>(rng() % 2);
    const int at = static_cast<int>(rng() % static_cast<uint64_t>(n));
    std::vector<std::string> text;
    for (int i = 0; i < n; ++i) {
      std::string w = i == at ? markers[label] : words[rng() % words.size()];
      if (i != at && (w == markers[0] || w == markers[1])) w = words[0];
      text.push_back(std::move(w));
    }
    return {absl::StrJoin(text, " "), label};
  }
};

// The task C2 compares on, fp32 on the device. "trained": training::Train
// on the marker rule (a real served task; needs an encoder that carries
// token information, e.g. a pretrained one). "calibrated": the encoder's own
// pooled features decide: the head is a random direction w through the
// features' mean (two logits, +-s w.(p - mean), s making the margins' spread
// that of a confident classifier), so the boundary runs through the densest
// part of the data: the conservative case, for random-weight encoders on
// which nothing can be trained.
// C2's inputs: texts and their true label's index.
struct LabelledTexts {
  std::vector<std::string> labels;
  std::vector<std::pair<std::string, int64_t>> texts;
};

// A dataset file's examples as training::Examples (texts only: C2 encodes
// single texts).
absl::StatusOr<std::vector<training::Example>> ReadExamples(const std::string& path) {
  ASSIGN_OR_RETURN(std::vector<v1::Example> rows, adapterd::ReadDatasetFile(path));
  std::vector<training::Example> out;
  for (const v1::Example& r : rows) {
    if (!r.text_pair().empty()) return absl::InvalidArgumentError(path + ": C2 takes single texts, not pairs");
    out.push_back({r.text(), "", r.label()});
  }
  return out;
}

// --c2_task dataset: PREFIX_train.csv and PREFIX_validation.csv to train on,
// PREFIX_test.csv to compare on.
absl::StatusOr<std::pair<training::TrainingData, LabelledTexts>> ReadC2Dataset(const std::string& prefix) {
  training::TrainingData data;
  ASSIGN_OR_RETURN(data.train, ReadExamples(prefix + "_train.csv"));
  ASSIGN_OR_RETURN(data.validation, ReadExamples(prefix + "_validation.csv"));
  ASSIGN_OR_RETURN(std::vector<training::Example> test, ReadExamples(prefix + "_test.csv"));
  std::set<std::string> labels;
  for (const training::Example& e : data.train) labels.insert(e.label);
  data.labels.assign(labels.begin(), labels.end());
  LabelledTexts inputs;
  inputs.labels = data.labels;
  for (const training::Example& e : test) {
    auto it = std::find(data.labels.begin(), data.labels.end(), e.label);
    if (it == data.labels.end()) return absl::InvalidArgumentError(prefix + "_test.csv: a label training never saw");
    inputs.texts.emplace_back(e.text, it - data.labels.begin());
  }
  return std::pair{std::move(data), std::move(inputs)};
}

// training::Train on the device's fp32 encoder, with C2's hyperparameters.
absl::StatusOr<std::unique_ptr<AdapterSet>> TrainForC2(const Flags& f, Models& m, c10::Device device,
                                                       const training::TrainingData& data) {
  training::Hyperparameters hp;
  hp.epochs = f.c2_epochs;
  hp.learning_rate = 1e-3;
  hp.bottleneck_size = f.bottleneck;
  hp.max_seq_len = f.seq;
  const auto t0 = Clock::now();
  ASSIGN_OR_RETURN(training::TrainingResult trained, training::Train(*m.dev32.encoder, *m.dev32.tokenizer, data, hp));
  std::printf("  trained %lld steps in %.1f s; validation accuracy %.4f\n", static_cast<long long>(trained.steps),
              std::chrono::duration<double>(Clock::now() - t0).count(), trained.best_epoch.validation.accuracy);
  Result("c2.train_validation_accuracy", trained.best_epoch.validation.accuracy);
  Result("c2.train_examples_per_second", trained.history.back().examples_per_second);
  return trained.best->Clone(device, at::kFloat);
}

absl::StatusOr<std::unique_ptr<AdapterSet>> TaskForC2(const Flags& f, Models& m, c10::Device device,
                                                      const MarkerTask& task, std::mt19937_64& rng) {
  const model::BertConfig& config = m.dev32.config;
  if (f.c2_task == "trained") {
    training::TrainingData data;
    data.labels = task.labels;
    for (int i = 0; i < f.c2_train_examples; ++i) {
      auto [text, label] = task.Draw(rng);
      data.train.push_back({text, "", task.labels[static_cast<size_t>(label)]});
    }
    return TrainForC2(f, m, device, data);
  }
  model::AdapterConfig ac;
  ac.bottleneck_size = f.bottleneck;
  ac.labels = task.labels;
  ASSIGN_OR_RETURN(std::unique_ptr<AdapterSet> init,
                   AdapterSet::CreateInitialized(config, m.dev32.encoder->weights(), ac, 23, device));
  return model::GuardTorch("calibrate C2's head", [&]() -> absl::StatusOr<std::unique_ptr<AdapterSet>> {
    c10::InferenceMode guard;
    std::vector<at::Tensor> pooled;
    for (int b = 0; b < 4; ++b) {
      std::vector<std::string> texts;
      for (int i = 0; i < 250; ++i) texts.push_back(task.Draw(rng).first);
      model::EncodedBatch e = m.dev32.tokenizer->EncodeBatch(texts);
      ASSIGN_OR_RETURN(EncoderOutput out, m.dev32.encoder->Forward(model::ToEncoderInput(e), *init));
      pooled.push_back(out.pooled.to(at::kDouble));
    }
    const at::Tensor p = at::cat(pooled);
    const at::Tensor mean = p.mean(0);
    at::Tensor w = at::randn({config.hidden_size}, at::TensorOptions().dtype(at::kDouble).device(device));
    w = w / w.norm();
    const double spread = (p - mean).matmul(w).std().item<double>();
    const at::Tensor sw = w * (3.0 / std::max(spread, 1e-12));  // margins' std: 6 logits
    const at::Tensor b = -(sw * mean).sum();
    const at::Tensor head_w = at::stack({sw, -sw}).to(at::kFloat);
    const at::Tensor head_b = at::stack({b, -b}).to(at::kFloat);
    std::printf("  calibrated head: spread of w.(p - mean) %.4g over 1,000 texts\n", spread);
    Result("c2.calibration_feature_spread", spread);
    return AdapterSet::FromParts(config, ac, init->embedding_layer_norm(), init->layers(), head_w, head_b);
  });
}

void CheckC2(const Flags& f, Models& m, c10::Device device) {
  const MarkerTask task(*m.dev32.tokenizer);
  std::mt19937_64 rng(11);
  // The inputs compared: the dataset's test texts, or --c2_inputs drawn from the marker rule.
  LabelledTexts inputs;
  absl::StatusOr<std::unique_ptr<AdapterSet>> fp32_set = absl::UnknownError("no task");
  if (f.c2_task == "dataset") {
    auto dataset = ReadC2Dataset(f.c2_dataset);
    if (!dataset.ok()) return Fail("c2 dataset", dataset.status());
    inputs = std::move(dataset->second);
    fp32_set = TrainForC2(f, m, device, dataset->first);
  } else {
    inputs.labels = task.labels;
    fp32_set = TaskForC2(f, m, device, task, rng);
    for (int i = 0; i < f.c2_inputs; ++i) inputs.texts.push_back(task.Draw(rng));
  }
  std::printf("\n== C2: %s vs fp32 on %s, %zu texts, a %s task %s\n", f.dtype.c_str(), device.str().c_str(),
              inputs.texts.size(), f.c2_task.c_str(), f.c2_dataset.c_str());
  if (!fp32_set.ok()) return Fail("c2 task", fp32_set.status());
  auto low_set = (*fp32_set)->Clone(device, m.dev_serving.encoder->dtype());
  if (!low_set.ok()) return Fail("c2 sets", low_set.status());

  c10::InferenceMode guard;
  int64_t agree = 0, correct32 = 0, correct_low = 0, total = 0;
  double max_prob_diff = 0;
  const size_t chunk = 250;
  for (size_t done = 0; done < inputs.texts.size(); done += chunk) {
    std::vector<std::string> texts;
    std::vector<int64_t> truth;
    for (size_t i = done; i < std::min(done + chunk, inputs.texts.size()); ++i) {
      texts.push_back(inputs.texts[i].first);
      truth.push_back(inputs.texts[i].second);
    }
    model::EncodedBatch e = m.dev32.tokenizer->EncodeBatch(texts);
    const EncoderInput input = model::ToEncoderInput(e);
    auto a = m.dev32.encoder->Forward(input, **fp32_set);
    auto b = m.dev_serving.encoder->Forward(input, **low_set);
    if (!a.ok() || !b.ok()) return Fail("c2 forward", a.ok() ? b.status() : a.status());
    at::Tensor pa = at::softmax(a->logits.to(at::kFloat), -1).cpu();
    at::Tensor pb = at::softmax(b->logits.to(at::kFloat), -1).cpu();
    at::Tensor la = pa.argmax(-1), lb = pb.argmax(-1);
    at::Tensor t = at::tensor(truth, at::kLong);
    agree += la.eq(lb).sum().item<int64_t>();
    correct32 += la.eq(t).sum().item<int64_t>();
    correct_low += lb.eq(t).sum().item<int64_t>();
    max_prob_diff = std::max(max_prob_diff, (pa - pb).abs().max().item<double>());
    total += static_cast<int64_t>(texts.size());
  }
  const double agreement = static_cast<double>(agree) / static_cast<double>(total);
  Result("c2.argmax_agreement", agreement);
  Result("c2.agreeing_inputs", static_cast<double>(agree));
  Result("c2.inputs", static_cast<double>(total));
  Result("c2.max_probability_difference", max_prob_diff);
  if (f.c2_task != "calibrated") {
    Result("c2.fp32_accuracy", static_cast<double>(correct32) / static_cast<double>(total));
    Result(absl::StrCat("c2.", f.dtype, "_accuracy"), static_cast<double>(correct_low) / static_cast<double>(total));
  }
  std::printf("  C2 %s: %lld/%lld agree (%.4f%%, target >= 99.5%%), largest probability difference %.4g\n",
              agreement >= 0.995 ? "PASS" : "MISS", static_cast<long long>(agree), static_cast<long long>(total),
              100 * agreement, max_prob_diff);
}

// ------------------------------------------------------------- profile ---
// Kernel time of one call of `fn` on the device, by kind and by kernel,
// printed and recorded as profile.<name>.* results.
void ProfileKernels(const std::string& name, c10::Device device, const std::function<bool()>& fn) {
#ifdef ADAPTERD_KINETO_PROFILER
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
  const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
  Sync(device);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  const bool ok = fn();
  Sync(device);
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  if (!ok) return Fail(absl::StrCat("profile ", name), absl::InternalError("forward failed"));
  // Kinds by kernel name (cuBLAS/CUTLASS products, cuDNN/flash attention, ...).
  auto kind_of = [](const std::string& k) -> std::string {
    auto has = [&](const char* s) { return absl::StrContains(k, s); };
    if (has("gemm") || has("cutlass") || has("xmma") || has("gemv") || has("cublas") || has("Kernel2") ||
        has("nvjet")) {
      return "matrix";
    }
    if (has("flash") || has("fmha") || has("attention") || has("cudnn") || has("sdpa") || has("softmax")) {
      return "attention";
    }
    if (has("layer_norm") || has("LayerNorm")) return "layer_norm";
    if (has("gelu") || has("Gelu")) return "gelu";
    if (has("index") || has("gather") || has("Index")) return "gather";
    if (has("copy") || has("Memcpy") || has("Memset") || has("cat")) return "copy";
    return "other_elementwise";
  };
  std::map<std::string, std::pair<double, int>> by_kernel, by_kind;
  double total_ms = 0;
  int launches = 0;
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::CUDA) continue;
    const double ms = static_cast<double>(e.durationNs()) / 1e6;
    auto& k = by_kernel[e.name()];
    k.first += ms;
    ++k.second;
    auto& c = by_kind[kind_of(e.name())];
    c.first += ms;
    ++c.second;
    total_ms += ms;
    ++launches;
  }
  std::printf("  profile %s: %.2f ms of kernel time in %d kernels\n", name.c_str(), total_ms, launches);
  Result(absl::StrCat("profile.", name, ".kernel_ms"), total_ms);
  Result(absl::StrCat("profile.", name, ".kernels"), launches);
  for (const auto& [kind, v] : by_kind) {
    std::printf("    %-18s %8.2f ms  %5.1f%%  %5d kernels\n", kind.c_str(), v.first, 100 * v.first / total_ms,
                v.second);
    Result(absl::StrCat("profile.", name, ".ms.", kind), v.first);
  }
  std::vector<std::pair<double, std::string>> top;
  for (const auto& [k, v] : by_kernel) top.emplace_back(v.first, k);
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < std::min<size_t>(12, top.size()); ++i) {
    std::printf("    %8.2f ms x%-4d %.110s\n", top[i].first, by_kernel[top[i].second].second, top[i].second.c_str());
  }
#else
  (void)device;
  (void)fn;
  std::printf("  profile %s: needs LibTorch 2.x (Kineto); skipped\n", name.c_str());
#endif
}

// ------------------------------------------------------------- G1 / G2 ---
void MeasureThroughput(const Flags& f, Models& m, c10::Device device) {
  const BertEncoder& enc = *m.dev_serving.encoder;
  const model::BertConfig& config = m.dev_serving.config;
  const c10::ScalarType dtype = enc.dtype();
  std::printf("\n== G1/G2: throughput, %s, batch %d x %d tokens, %d tasks mixed in every batch\n", f.dtype.c_str(),
              f.batch, f.seq, f.tasks);
  std::vector<std::shared_ptr<const AdapterSet>> sets;
  const auto t0 = Clock::now();
  for (int i = 0; i < f.tasks; ++i) {
    auto s = RandomSetOn(config, f.bottleneck, 2 + i % 3, device, dtype);
    if (!s.ok()) return Fail("g1 adapter sets", s.status());
    sets.push_back(std::move(*s));
  }
  auto stack = AdapterStack::Create(sets, config, device, dtype, /*build_gather_tensors=*/true);
  if (!stack.ok()) return Fail("g1 stack", stack.status());
  Sync(device);
  std::printf("  %d adapter sets (%.1f MB each) and their gathered stack made on the device in %.1f s\n", f.tasks,
              static_cast<double>(sets[0]->ByteSize()) / 1e6, std::chrono::duration<double>(Clock::now() - t0).count());

  std::mt19937_64 rng(3);
  const EncoderInput host_input =
      RandomInput(*m.dev_serving.tokenizer, std::vector<int64_t>(static_cast<size_t>(f.batch), f.seq), false, rng);
  // On the device already, as a serving batch is once copied.
  const EncoderInput input{host_input.input_ids.to(device), host_input.token_type_ids.to(device),
                           host_input.attention_mask.to(device)};
  std::vector<int64_t> mixed(static_cast<size_t>(f.batch)), single(static_cast<size_t>(f.batch), 0);
  for (int r = 0; r < f.batch; ++r) mixed[static_cast<size_t>(r)] = r % f.tasks;
  std::shuffle(mixed.begin(), mixed.end(), rng);

  c10::InferenceMode guard;
  absl::Status error;
  auto run = [&](auto&& forward) {
    return [&, forward]() {
      absl::StatusOr<EncoderOutput> out = forward();
      if (!out.ok()) error = out.status();
      return out.ok();
    };
  };
  const double flops0 = FlopsPerSequence(config, f.seq, 0), flops_m = FlopsPerSequence(config, f.seq, f.bottleneck);
  std::map<std::string, double> rate;
  auto measure = [&](const std::string& name, int iters, auto&& forward, double flops) {
    error = absl::OkStatus();
    const double s = MedianSeconds(2, iters, device, run(forward));
    if (!error.ok() || s <= 0) return Fail(absl::StrCat("g1 ", name), error);
    rate[name] = f.batch / s;
    std::printf("  %-26s %8.1f ms/batch  %9.1f seq/s  %6.1f TFLOP/s\n", name.c_str(), 1e3 * s, f.batch / s,
                f.batch * flops / s / 1e12);
    Result(absl::StrCat("g1.", name, ".seq_per_s"), f.batch / s);
    Result(absl::StrCat("g1.", name, ".tflops"), f.batch * flops / s / 1e12);
  };
  model::ForwardOptions seg{.strategy = model::MixedStrategy::kSegments};
  model::ForwardOptions gat{.strategy = model::MixedStrategy::kGatherBmm};
  measure(
      "bare_encoder", f.iters, [&] { return enc.Forward(input); }, flops0);
  measure(
      "one_task", f.iters, [&] { return enc.Forward(input, *sets[0]); }, flops_m);
  measure(
      "one_task_stack_gathered", f.iters, [&] { return enc.Forward(input, **stack, single, gat); }, flops_m);
  measure(
      "mixed_gathered", f.iters, [&] { return enc.Forward(input, **stack, mixed, gat); }, flops_m);
  measure(
      "mixed_segments", std::max(2, f.iters / 2), [&] { return enc.Forward(input, **stack, mixed, seg); }, flops_m);
  // What the serving engine pays per batch: the batch's stack, then the
  // forward. From the tasks' own tensors every batch copies every task's
  // adapters (without a slab); from the resident slab
  // (AdapterSlab, what the device tier holds on CUDA) only the heads.
  auto slab =
      AdapterSlab::Create(config, {.capacity = f.tasks, .bottleneck = f.bottleneck, .device = device, .dtype = dtype});
  if (!slab.ok()) return Fail("g1 slab", slab.status());
  std::vector<std::shared_ptr<const AdapterSet>> slab_sets;
  for (const auto& set : sets) {
    auto stored = (*slab)->Store(*set);
    if (!stored.ok()) return Fail("g1 slab store", stored.status());
    slab_sets.push_back(*std::move(stored));
  }
  auto per_batch = [&](const std::vector<std::shared_ptr<const AdapterSet>>& from) {
    return [&, from_ptr = &from]() -> absl::StatusOr<EncoderOutput> {
      auto batch_stack = AdapterStack::Create(*from_ptr, config, device, dtype, /*build_gather_tensors=*/true);
      if (!batch_stack.ok()) return batch_stack.status();
      return enc.Forward(input, **batch_stack, mixed, gat);
    };
  };
  measure("mixed_stack_per_batch", std::max(2, f.iters / 2), per_batch(sets), flops_m);
  measure("mixed_slab_per_batch", f.iters, per_batch(slab_sets), flops_m);
  if (f.profile) {
    ProfileKernels("bare_encoder", device, run([&] { return enc.Forward(input); }));
    ProfileKernels("one_task", device, run([&] { return enc.Forward(input, *sets[0]); }));
    ProfileKernels("mixed_gathered", device, run([&] { return enc.Forward(input, **stack, mixed, gat); }));
  }
  if (rate.count("one_task") && rate.count("bare_encoder")) {
    double best_mixed = 0;
    for (const char* k : {"mixed_gathered", "mixed_segments"}) {
      if (rate.count(k)) best_mixed = std::max(best_mixed, rate[k]);
    }
    Result("g1.best_mixed_seq_per_s", best_mixed);
    Result("g2.mixed_over_single", best_mixed / rate["one_task"]);
    Result("g2.mixed_over_bare", best_mixed / rate["bare_encoder"]);
    std::printf("  G1 %s: %.0f seq/s with %d tasks in every batch (target >= 6,000)\n",
                best_mixed >= 6000 ? "PASS" : "MISS", best_mixed, f.tasks);
    std::printf("  G2: mixed/single %.3f (target >= 0.95), mixed/bare %.3f (target >= 0.90)\n",
                best_mixed / rate["one_task"], best_mixed / rate["bare_encoder"]);
    if (rate.count("mixed_slab_per_batch") && rate.count("mixed_stack_per_batch")) {
      Result("g2.engine_slab_over_single", rate["mixed_slab_per_batch"] / rate["one_task"]);
      std::printf(
          "  G2 as the engine runs it (stack per batch): from the slab %.3f of one task, from own tensors %.3f\n",
          rate["mixed_slab_per_batch"] / rate["one_task"], rate["mixed_stack_per_batch"] / rate["one_task"]);
    }
  }
}

// ------------------------------------------------------------------ G4 ---
// Milliseconds of f.latency_runs calls of `request` after 30 untimed ones;
// empty when a call returns false (it has reported why).
template <typename Fn>
std::vector<double> TimeRequests(const Flags& f, Fn&& request) {
  std::vector<double> ms;
  for (int i = 0; i < 30 + f.latency_runs; ++i) {
    const auto a = Clock::now();
    if (!request()) return {};
    if (i >= 30) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
  }
  return ms;
}

// Records `ms`'s p50 and p99 as <prefix>.<name>.p50_ms and .p99_ms.
void RecordLatency(const std::string& prefix, const std::string& name, std::vector<double> ms) {
  Result(absl::StrCat(prefix, ".", name, ".p50_ms"), Percentile(ms, 0.5));
  Result(absl::StrCat(prefix, ".", name, ".p99_ms"), Percentile(ms, 0.99));
}

// G4's request with the forward captured in a CUDA graph: the token ids are
// copied into the graph's static input, the graph replays every kernel
// with one launch, and the probabilities are copied back. The forward is
// told its ids are checked (they are, by the tokenizer's vocabulary), so it
// does not wait for the device inside the capture.
void MeasureGraphLatency(const Flags& f, model::LoadedModel& lm, const AdapterSet& set, const std::string& sentence,
                         c10::Device device, const std::string& name) {
#ifdef ADAPTERD_CUDA_GRAPHS
  if (!device.is_cuda()) return;
  const model::Encoding e = lm.tokenizer->Encode(sentence);
  const int64_t tokens = static_cast<int64_t>(e.input_ids.size());
  const std::vector<int64_t> host_ids(e.input_ids.begin(), e.input_ids.end());
  const auto on_device = at::TensorOptions().device(device).dtype(at::kLong);
  const EncoderInput input{at::zeros({1, tokens}, on_device), at::zeros({1, tokens}, on_device),
                           at::ones({1, tokens}, on_device)};
  const model::ForwardOptions trusted{.inputs_checked = true};
  try {
    c10::InferenceMode guard;
    input.input_ids.copy_(at::tensor(host_ids, at::kLong).view({1, tokens}));
    at::cuda::CUDAGraph graph;
    at::Tensor logits;
    {
      // Captures run on a side stream, after warm-up forwards on it (cuBLAS
      // and cuDNN pick their plans outside the capture).
      c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
      c10::cuda::CUDAStreamGuard on_side(side);
      for (int i = 0; i < 3; ++i) {
        auto out = lm.encoder->Forward(input, set, trusted);
        if (!out.ok()) return Fail("g4 graph warm-up", out.status());
      }
      side.synchronize();
      graph.capture_begin();
      auto out = lm.encoder->Forward(input, set, trusted);
      if (out.ok()) logits = at::softmax(out->logits.to(at::kFloat), -1);
      graph.capture_end();
      if (!out.ok()) return Fail("g4 graph capture", out.status());
    }
    std::vector<double> ms = TimeRequests(f, [&] {
      model::Encoding enc = lm.tokenizer->Encode(sentence);
      std::vector<int64_t> ids(enc.input_ids.begin(), enc.input_ids.end());
      input.input_ids.copy_(at::tensor(ids, at::kLong).view({1, tokens}));
      graph.replay();
      at::Tensor p = logits.cpu();
      return true;
    });
    RecordLatency("g4_graph", name, ms);
    std::printf("  %s, forward replayed from a CUDA graph: p50 %.3f ms, p99 %.3f ms\n", name.c_str(),
                Percentile(ms, 0.5), Percentile(ms, 0.99));
  } catch (const std::exception& ex) {
    Fail("g4 graph", absl::InternalError(ex.what()));
  }
#else
  (void)f, (void)lm, (void)set, (void)sentence, (void)device, (void)name;
#endif
}

void MeasureLatency(const Flags& f, Models& m, c10::Device device) {
  std::printf("\n== G4: batch-1 latency, a 16-word text\n");
  const MarkerTask words(*m.dev_serving.tokenizer);
  std::mt19937_64 rng(17);
  std::vector<std::string> text;
  for (int i = 0; i < 16; ++i) text.push_back(words.words[rng() % words.words.size()]);
  const std::string sentence = absl::StrJoin(text, " ");
  for (model::LoadedModel* lm : {&m.dev_serving, &m.dev32}) {
    const BertEncoder& enc = *lm->encoder;
    auto set = RandomSetOn(lm->config, f.bottleneck, 2, device, enc.dtype());
    if (!set.ok()) return Fail("g4 set", set.status());
    c10::InferenceMode guard;
    int64_t tokens = 0;
    std::vector<double> ms = TimeRequests(f, [&] {
      model::Encoding e = lm->tokenizer->Encode(sentence);
      tokens = static_cast<int64_t>(e.input_ids.size());
      std::vector<int64_t> ids(e.input_ids.begin(), e.input_ids.end()),
          types(e.token_type_ids.begin(), e.token_type_ids.end());
      EncoderInput input{at::tensor(ids, at::kLong).view({1, tokens}), at::tensor(types, at::kLong).view({1, tokens}),
                         at::ones({1, tokens}, at::kLong)};
      auto out = enc.Forward(input, **set);
      if (!out.ok()) {
        Fail("g4 forward", out.status());
        return false;
      }
      at::Tensor p = at::softmax(out->logits.to(at::kFloat), -1).cpu();
      return true;
    });
    if (ms.empty()) return;
    const std::string name = enc.dtype() == at::kFloat ? "fp32" : f.dtype;
    MeasureGraphLatency(f, *lm, **set, sentence, device, name);
    RecordLatency("g4", name, ms);
    std::printf("  %s: %lld tokens, p50 %.3f ms, p99 %.3f ms (target p50 <= 2.5 ms)\n", name.c_str(),
                static_cast<long long>(tokens), Percentile(ms, 0.5), Percentile(ms, 0.99));
  }
}

int Main(int argc, char** argv) {
  Flags f;
  CLI::App app{"adapterd-gpu-checks: C1-C3 and encoder-level G1, G2, G4 of the GPU issue on one device"};
  app.add_option("--model_dir", f.model_dir, "HuggingFace BERT directory (adapterd-make-model --preset large)")
      ->required();
  app.add_option("--out", f.out, "Output directory (gpu_checks.json, c3/)")->required();
  app.add_option("--device", f.device, "cuda, cuda:N or cpu (smoke run)")->capture_default_str();
  app.add_option("--dtype", f.dtype, "reduced serving dtype for C2, G1, G4: bf16 or fp16")->capture_default_str();
  app.add_option("--tasks", f.tasks, "tasks mixed in every batch (G1)")->capture_default_str();
  app.add_option("--batch", f.batch, "rows per batch (G1)")->capture_default_str();
  app.add_option("--seq", f.seq, "tokens per row (G1)")->capture_default_str();
  app.add_option("--bottleneck", f.bottleneck, "adapter size m")->capture_default_str();
  app.add_option("--iters", f.iters, "timed batches per case (median)")->capture_default_str();
  app.add_option("--c2_inputs", f.c2_inputs, "random texts compared in C2")->capture_default_str();
  app.add_option("--c2_train_examples", f.c2_train_examples, "training examples of C2's task")->capture_default_str();
  app.add_option("--c2_epochs", f.c2_epochs, "epochs of C2's task")->capture_default_str();
  app.add_option("--c2_task", f.c2_task,
                 "C2's task: calibrated (a head through the features' mean), trained (marker words) or dataset")
      ->capture_default_str()
      ->check(CLI::IsMember({"calibrated", "trained", "dataset"}));
  app.add_option("--c2_dataset", f.c2_dataset,
                 "--c2_task dataset: PREFIX of PREFIX_{train,validation,test}.csv (examples/wordnet_supersenses)");
  app.add_option("--latency_runs", f.latency_runs, "timed batch-1 requests (G4)")->capture_default_str();
  app.add_option("--only", f.only, "comma-separated subset of c1,c2,g1,g4 (default: all)");
  app.add_flag("--profile", f.profile, "kernel-time profile of three G1 forwards (LibTorch 2.x)");
  app.add_flag("--reduced_residual_stream", f.reduced_residual_stream,
               "the reduced-dtype encoder keeps its residual stream in that dtype");
  CLI11_PARSE(app, argc, argv);
  auto want = [&](const char* step) { return f.only.empty() || absl::StrContains(f.only, step); };

  auto device = model::ParseDevice(f.device);
  auto low = model::ParseFloatDType(f.dtype);
  if (!device.ok() || !low.ok()) {
    std::fprintf(stderr, "%s\n", (device.ok() ? low.status() : device.status()).ToString().c_str());
    return 2;
  }
  std::filesystem::create_directories(f.out);
  Models m;
  const auto t0 = Clock::now();
  for (auto [target, dev, dtype] :
       {std::tuple{&m.cpu32, c10::Device(c10::kCPU), at::kFloat}, std::tuple{&m.dev32, *device, at::kFloat},
        std::tuple{&m.dev_serving, *device, *low}}) {
    model::LoadOptions lo;
    lo.device = dev;
    lo.dtype = dtype;
    lo.max_seq_len = f.seq;
    lo.reduced_residual_stream = target == &m.dev_serving && f.reduced_residual_stream;
    auto loaded = model::LoadBertModel(f.model_dir, lo);
    if (!loaded.ok()) {
      std::fprintf(stderr, "loading %s: %s\n", f.model_dir.c_str(), loaded.status().ToString().c_str());
      return 1;
    }
    *target = *std::move(loaded);
  }
  const model::BertConfig& c = m.dev32.config;
  std::printf(
      "model %s: %lld layers, hidden %lld, %lld heads, ff %lld, vocab %lld; %lld parameters; loaded 3x in %.1f s\n",
      f.model_dir.c_str(), static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
      static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.intermediate_size),
      static_cast<long long>(c.vocab_size), static_cast<long long>(m.dev32.encoder->NumParameters()),
      std::chrono::duration<double>(Clock::now() - t0).count());
  g_results["device"] = device->str();
  g_results["dtype"] = f.dtype;
  g_results["reduced_residual_stream"] = f.reduced_residual_stream;
  g_results["layers"] = c.num_hidden_layers;
  g_results["hidden"] = c.hidden_size;
  g_results["seq"] = f.seq;
  g_results["batch"] = f.batch;
  g_results["tasks"] = f.tasks;
  g_results["bottleneck"] = f.bottleneck;
  g_results["flops_per_sequence"] = FlopsPerSequence(c, f.seq, f.bottleneck);

  auto save = [&] {
    std::ofstream((std::filesystem::path(f.out) / "gpu_checks.json").string()) << g_results.dump(2) << "\n";
  };
  // Each step catches its own errors (Fail) so one failure leaves the others' figures.
  if (want("c1")) CheckC1(f, m, *device);
  save();
  if (want("g4")) MeasureLatency(f, m, *device);
  save();
  if (want("g1")) MeasureThroughput(f, m, *device);
  save();
  if (want("c2")) CheckC2(f, m, *device);
  save();
  return g_failed ? 1 : 0;
}

}  // namespace
}  // namespace adapterd::bench

int main(int argc, char** argv) {
  try {
    return adapterd::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "adapterd-gpu-checks: %s\n", e.what());
    return 1;
  }
}
