// Fuzzes the AdapterHub import (server/model/adapterhub_import.h):
// ImportAdapterHub over a directory's files, what `tasks import --format
// adapterhub` runs on a caller's bytes once the zip is opened: the two JSON
// configs (adapterhub.h's mapping and refusals), the safetensors weights
// files, the tensors found by the library's names and the AdapterSet built
// from them. Links LibTorch.
//
// Input: the directory's files, each as [u8 name length][name][u32 LE size]
// [bytes], until the input ends (a truncated last entry is dropped). Entries
// named *.bin are dropped too: the torch.save reader's pickle has its own
// harness (torch_pickle), and its zip container is libzip's. The encoder is
// the golden tiny BERT's shape (hidden 32, 2 layers, a pooler) with random
// weights.
//
// Invariants: an import either fails with INVALID_ARGUMENT or UNIMPLEMENTED,
// or gives a set whose config is valid, with the encoder's layer count, the
// config's bottleneck in every adapter, a head of the kind's output count,
// only finite values, the encoder's own LayerNorm affines, and that
// serialises in adapterd's format and reads back bit-identical.
//
// Seeds: ADAPTERD_FUZZ_WRITE_SEEDS=DIR adapterhub_import_fuzzer writes one
// input per directory of tests/model/testdata/adapterhub/reference (its
// torch.save files converted to safetensors) into DIR and exits; the seeds
// are in tests/fuzz/corpus/adapterhub_import.
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "common/file_util.h"
#include "server/model/adapter_format.h"
#include "server/model/adapterhub_import.h"
#include "server/model/bert_config.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"
#include "server/model/torch_archive.h"
#include "tests/fuzz/adapter_set_checks.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::model {
namespace {

constexpr std::string_view kFingerprint = "fuzz-model-fingerprint";

const BertConfig& Config() {
  static const BertConfig* const config = [] {
    auto* c = new BertConfig();
    c->vocab_size = 40;
    c->hidden_size = 32;
    c->num_hidden_layers = 2;
    c->num_attention_heads = 4;
    c->intermediate_size = 64;
    c->max_position_embeddings = 24;
    return c;
  }();
  return *config;
}

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "adapterhub_import_fuzzer: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

const EncoderWeights& Encoder() {
  static const EncoderWeights* const weights = [] {
    absl::StatusOr<EncoderWeights> w = RandomEncoderWeights(Config(), /*seed=*/11, /*init_range=*/0.2);
    if (!w.ok()) Die("random weights", w.status());
    return new EncoderWeights(*std::move(w));
  }();
  return *weights;
}

void AppendEntry(std::string& out, const std::string& name, const std::string& bytes) {
  out.push_back(static_cast<char>(name.size()));
  out += name;
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += bytes;
}

// A torch.save file's tensors as a safetensors file.
std::string ToSafetensors(const std::string& path) {
  absl::StatusOr<TorchArchive> archive = TorchArchive::Open(path);
  if (!archive.ok()) Die(path, archive.status());
  SafetensorsWriter writer;
  for (const auto& [name, view] : archive->tensors()) {
    absl::Status s = writer.Add(name, view.dtype, view.shape, view.data);
    if (!s.ok()) Die(name, s);
  }
  return writer.Serialize();
}

void WriteSeeds(const std::string& dir) {
  const std::string root = std::string(ADAPTERD_FUZZ_SOURCE_DIR) + "/tests/model/testdata/adapterhub/reference";
  for (const auto& c : std::filesystem::directory_iterator(root)) {
    std::string input;
    for (const auto& f : std::filesystem::directory_iterator(c.path() / "adapter")) {
      std::string name = f.path().filename().string();
      std::string bytes;
      if (name == "pytorch_adapter.bin" || name == "pytorch_model_head.bin") {
        bytes = ToSafetensors(f.path().string());
        name = name == "pytorch_adapter.bin" ? "adapter.safetensors" : "model_head.safetensors";
      } else {
        absl::StatusOr<std::string> read = ReadFileToString(f.path().string());
        if (!read.ok()) Die(f.path().string(), read.status());
        bytes = *std::move(read);
      }
      AppendEntry(input, name, bytes);
    }
    const std::string path = dir + "/seed_" + c.path().filename().string();
    std::ofstream out(path, std::ios::binary);
    out.write(input.data(), static_cast<std::streamsize>(input.size()));
    if (!out) Die(path, absl::InternalError("write failed"));
  }
}

AdapterHubFiles ParseEntries(std::string_view in) {
  AdapterHubFiles files;
  while (!in.empty()) {
    const size_t name_len = static_cast<uint8_t>(in[0]);
    if (in.size() < 1 + name_len + 4) break;
    std::string name(in.substr(1, name_len));
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(in[1 + name_len + i])) << (8 * i);
    in.remove_prefix(1 + name_len + 4);
    if (in.size() < n) break;
    if (!(name.size() >= 4 && name.substr(name.size() - 4) == ".bin")) files[name] = std::string(in.substr(0, n));
    in.remove_prefix(n);
  }
  return files;
}

void CheckImported(const ImportedAdapterHub& imported) {
  const AdapterSet& set = *imported.set;
  FUZZ_CHECK(set.config().Validate().ok()) << "accepted an invalid AdapterConfig";
  FUZZ_CHECK(static_cast<int64_t>(set.layers().size()) == Config().num_hidden_layers) << "layer count";
  FUZZ_CHECK(set.config().bottleneck_size == imported.adapter.bottleneck_size) << "bottleneck differs";
  FUZZ_CHECK(set.head_weight().size(0) == set.config().num_outputs()) << "head rows != the kind's outputs";
  FUZZ_CHECK(CheckFinite(set).ok()) << "a non-finite set was imported";
  for (size_t i = 0; i < set.layers().size(); ++i) {
    const AdapterLayer& l = set.layers()[i];
    FUZZ_CHECK(l.ffn_adapter.down_weight.size(0) == set.config().bottleneck_size) << "layer " << i << " FFN m";
    FUZZ_CHECK(at::equal(l.output_layer_norm.weight, Encoder().layers[i].output_ln_weight))
        << "layer " << i << " output LayerNorm is not the encoder's";
  }
  fuzz::CheckSerialisesAndReadsBack(set, Config(), kFingerprint, {}, at::kFloat);
}

}  // namespace
}  // namespace adapterd::model

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  adapterd::model::fuzz::InitializeHarness(&adapterd::model::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::model;
  const AdapterHubFiles files = ParseEntries(adapterd::fuzz::AsStringView(data, size));
  absl::StatusOr<ImportedAdapterHub> imported = ImportAdapterHub(files, Config(), Encoder());
  if (!imported.ok()) {
    const absl::StatusCode code = imported.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kUnimplemented)
        << "unexpected error " << imported.status();
    return 0;
  }
  CheckImported(*imported);
  return 0;
}
