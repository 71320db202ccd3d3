// adapterd-peer: the adapterd side of the peer benchmark against ONNX Runtime
// (bench/peers/run.sh, docs/PERFORMANCE.md "Peer comparison: ONNX Runtime").
//
//   adapterd-peer make-adapter --model_dir D --out F [--bottleneck 64] [--labels 4] [--seed 1]
//       A task's adapter file for the model in D, with every tensor perturbed
//       (up-projections and head included) so that the adapters matter.
//   adapterd-peer logits --model_dir D --adapter F --ids FILE
//       FILE: JSON list of token-id lists (padded with id 0, mask 0, to the
//       longest). Prints the fp32 forward's logits as JSON.
//   adapterd-peer bench --model_dir D --adapter F [--batch 32] [--seq 128]
//                       [--dtype fp32|bf16] [--threads 2] [--seconds 20]
//                       [--matmul onednn|aten]
//       Times Forward(input, task) on random ids; prints one JSON line with
//       seq/s and the per-call latency p50.
//
// Not a test and not part of the server: a benchmark tool.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/malloc_tuning.h"
#include "nlohmann/json.hpp"
#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_encoder.h"
#include "server/model/cpu_kernels.h"
#include "server/model/model_loader.h"
#include "server/model/tensor_io.h"

namespace adapterd::model {
namespace {

[[noreturn]] void Fail(const std::string& msg) {
  std::fprintf(stderr, "adapterd-peer: %s\n", msg.c_str());
  std::exit(1);
}

void Check(const absl::Status& s) {
  if (!s.ok()) Fail(s.ToString());
}

// "--name value" and "--name=value" pairs after the subcommand.
std::map<std::string, std::string> ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (!a.starts_with("--")) Fail("unexpected argument: " + a);
    a = a.substr(2);
    if (auto eq = a.find('='); eq != std::string::npos) {
      flags[a.substr(0, eq)] = a.substr(eq + 1);
    } else {
      if (i + 1 >= argc) Fail("flag --" + a + " needs a value");
      flags[a] = argv[++i];
    }
  }
  return flags;
}

std::string Flag(const std::map<std::string, std::string>& f, const std::string& name, const char* def = nullptr) {
  auto it = f.find(name);
  if (it != f.end()) return it->second;
  if (def == nullptr) Fail("missing --" + name);
  return def;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LoadedModel Load(const std::string& dir, c10::ScalarType dtype) {
  LoadOptions opts;
  opts.dtype = dtype;
  opts.max_seq_len = 512;
  auto model = LoadBertModel(dir, opts);
  Check(model.status());
  return *std::move(model);
}

std::unique_ptr<AdapterSet> LoadAdapter(const LoadedModel& model, const std::string& path) {
  const std::string bytes = ReadFile(path);
  auto set = DeserializeAdapterSet(bytes, model.config, model.fingerprint, at::kCPU);
  Check(set.status());
  if (model.encoder->dtype() == at::kFloat) return *std::move(set);
  auto cast = (*set)->Clone(at::kCPU, model.encoder->dtype());
  Check(cast.status());
  return *std::move(cast);
}

int MakeAdapter(const std::map<std::string, std::string>& f) {
  LoadedModel model = Load(Flag(f, "model_dir"), at::kFloat);
  AdapterConfig ac;
  ac.bottleneck_size = std::stol(Flag(f, "bottleneck", "64"));
  const long labels = std::stol(Flag(f, "labels", "4"));
  for (long i = 0; i < labels; ++i) ac.labels.push_back(absl::StrCat("label", i));
  ac.init_std = 0.05;
  const auto seed = static_cast<uint64_t>(std::stoull(Flag(f, "seed", "1")));
  auto set = AdapterSet::CreateInitialized(model.config, model.encoder->weights(), ac, seed, at::kCPU);
  Check(set.status());
  // As a trained set: every tensor moved off its initial value (the zero
  // up-projection biases, the LayerNorm affines, the head), seeded.
  at::manual_seed(seed);
  {
    c10::InferenceMode guard;
    for (at::Tensor& t : (*set)->Parameters()) t.add_(at::randn_like(t) * 0.02);
  }
  auto bytes = SerializeAdapterSet(**set, model.fingerprint);
  Check(bytes.status());
  const std::string out = Flag(f, "out");
  std::ofstream o(out, std::ios::binary);
  o.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  if (!o) Fail("cannot write " + out);
  std::printf("wrote %s (%zu bytes, m=%ld, %ld labels, %ld parameters)\n", out.c_str(), bytes->size(),
              static_cast<long>(ac.bottleneck_size), labels, static_cast<long>((*set)->NumParameters()));
  return 0;
}

int Logits(const std::map<std::string, std::string>& f) {
  SetComputeThreads(std::stoi(Flag(f, "threads", "2")));
  LoadedModel model = Load(Flag(f, "model_dir"), at::kFloat);
  auto set = LoadAdapter(model, Flag(f, "adapter"));
  const auto rows = nlohmann::json::parse(ReadFile(Flag(f, "ids"))).get<std::vector<std::vector<int64_t>>>();
  if (rows.empty()) Fail("--ids holds no rows");
  size_t len = 0;
  for (const auto& r : rows) len = std::max(len, r.size());
  const auto b = static_cast<int64_t>(rows.size());
  at::Tensor ids = at::zeros({b, static_cast<int64_t>(len)}, at::kLong);
  at::Tensor mask = at::zeros_like(ids);
  auto ia = ids.accessor<int64_t, 2>();
  auto ma = mask.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t j = 0; j < rows[i].size(); ++j) {
      ia[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = rows[i][j];
      ma[static_cast<int64_t>(i)][static_cast<int64_t>(j)] = 1;
    }
  }
  c10::InferenceMode guard;
  auto out = model.encoder->Forward({ids, at::zeros_like(ids), mask}, *set);
  Check(out.status());
  at::Tensor logits = out->logits.to(at::kDouble).contiguous();
  std::string s = "[";
  for (int64_t i = 0; i < logits.size(0); ++i) {
    s += i == 0 ? "[" : ",[";
    for (int64_t j = 0; j < logits.size(1); ++j) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%s%.9g", j == 0 ? "" : ",", logits[i][j].item<double>());
      s += buf;
    }
    s += "]";
  }
  s += "]";
  std::printf("%s\n", s.c_str());
  return 0;
}

int Bench(const std::map<std::string, std::string>& f) {
  const int threads = SetComputeThreads(std::stoi(Flag(f, "threads", "2")));
  const std::string dt = Flag(f, "dtype", "fp32");
  if (dt != "fp32" && dt != "bf16") Fail("--dtype must be fp32 or bf16");
  const c10::ScalarType dtype = dt == "bf16" ? at::kBFloat16 : at::kFloat;
  const std::string matmul = Flag(f, "matmul", BuiltWithOneDnn() ? "onednn" : "aten");
  if (matmul != "onednn" && matmul != "aten") Fail("--matmul must be onednn or aten");
  SetMatmulBackend(matmul == "onednn" ? MatmulBackend::kOneDnn : MatmulBackend::kATen);
  OneBlasThreadUnderOneDnn();  // as adapterd does
  LoadedModel model = Load(Flag(f, "model_dir"), dtype);
  auto set = LoadAdapter(model, Flag(f, "adapter"));
  const int64_t batch = std::stol(Flag(f, "batch", "32"));
  const int64_t seq = std::stol(Flag(f, "seq", "128"));
  const double seconds = std::stod(Flag(f, "seconds", "20"));
  const int64_t vocab = model.config.vocab_size;
  at::manual_seed(0);
  at::Tensor ids = at::randint(std::min<int64_t>(1000, vocab / 2), vocab, {batch, seq}, at::kLong);
  EncoderInput input{ids, at::zeros_like(ids), at::ones_like(ids)};
  c10::InferenceMode guard;
  auto once = [&] {
    auto out = model.encoder->Forward(input, *set);
    Check(out.status());
    return out->logits.sum().item<double>();
  };
  double sink = 0;
  for (int i = 0; i < 2; ++i) sink += once();  // warm-up
  std::vector<double> ms;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double elapsed = 0;
  while (ms.size() < 3 || elapsed < seconds) {
    const auto t0 = Clock::now();
    sink += once();
    const auto t1 = Clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    elapsed = std::chrono::duration<double>(t1 - start).count();
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double total = 0;
  for (double m : ms) total += m;
  const double p50 = sorted[sorted.size() / 2];
  const double seq_per_s = static_cast<double>(batch) * static_cast<double>(ms.size()) / (total / 1000.0);
  std::printf(
      "{\"engine\":\"adapterd\",\"matmul\":\"%s\",\"dtype\":\"%s\",\"batch\":%ld,\"seq\":%ld,\"threads\":%d,\"calls\":%"
      "zu,"
      "\"seq_per_s\":%.4f,\"p50_ms\":%.3f,\"min_ms\":%.3f,\"checksum\":%.6g}\n",
      matmul.c_str(), dt.c_str(), static_cast<long>(batch), static_cast<long>(seq), threads, ms.size(), seq_per_s, p50,
      sorted.front(), sink);
  return 0;
}

}  // namespace
}  // namespace adapterd::model

int main(int argc, char** argv) {
  using namespace adapterd::model;
  adapterd::KeepLargeBuffersOnTheHeap();
  if (argc < 2) {
    std::fprintf(stderr, "usage: adapterd-peer make-adapter|logits|bench --flag value ...\n");
    return 2;
  }
  const std::string cmd = argv[1];
  const auto flags = ParseFlags(argc, argv);
  if (cmd == "make-adapter") return MakeAdapter(flags);
  if (cmd == "logits") return Logits(flags);
  if (cmd == "bench") return Bench(flags);
  std::fprintf(stderr, "adapterd-peer: unknown subcommand %s\n", cmd.c_str());
  return 2;
}
