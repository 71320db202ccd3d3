// Fuzzes the adapter file reader (server/model/adapter_format.h):
// ReadAdapterInfo and DeserializeAdapterSet, what `tasks import` runs on a
// caller's bytes. Links LibTorch.
//
// Input: byte 0 picks the load options (bits 0-1: the dtype the set loads
// into, fp32 / bf16 / fp16 / fp32; bit 2: skip check_finite); the rest is the
// file. The encoder is a tiny fixed BERT (kConfig) and the expected model
// fingerprint is kFingerprint.
//
// Invariants: a file ReadAdapterInfo accepts has a valid AdapterConfig, a
// readable format version and no reserved key among its extra keys; a set
// DeserializeAdapterSet returns has the requested dtype, the encoder's layer
// count and the file's labels, is finite when check_finite was asked for, and
// serialises (SerializeAdapterSet) to a file that reads back to the same info
// and bit-identical tensors.
//
// Seeds: ADAPTERD_FUZZ_WRITE_SEEDS=DIR adapter_import_fuzzer writes real
// adapter files for kConfig (fp32, bf16, fp16 tensors) with the option byte
// prepended into DIR and exits (scripts/fuzz.sh does not need it: the seeds
// are in tests/fuzz/corpus/adapter_import).
#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "server/model/adapter_format.h"
#include "server/model/adapter_set.h"
#include "server/model/bert_config.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/tensor_io.h"
#include "tests/fuzz/adapter_set_checks.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::model {
namespace {

constexpr std::string_view kFingerprint = "fuzz-model-fingerprint";

BertConfig TinyConfig() {
  BertConfig c;
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 16;
  c.max_position_embeddings = 16;
  return c;
}

const BertConfig& Config() {
  static const BertConfig* const config = new BertConfig(TinyConfig());
  return *config;
}

[[noreturn]] void Die(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "adapter_import_fuzzer: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

// Writes one seed per tensor dtype: the option byte 0, then a real file.
void WriteSeeds(const std::string& dir) {
  absl::StatusOr<EncoderWeights> weights = RandomEncoderWeights(Config(), /*seed=*/7);
  if (!weights.ok()) Die("random weights", weights.status());
  AdapterConfig adapter;
  adapter.bottleneck_size = 2;
  adapter.init_std = 0.25;
  adapter.labels = {"negative", "positive", "neutral"};
  absl::StatusOr<std::unique_ptr<AdapterSet>> set =
      AdapterSet::CreateInitialized(Config(), *weights, adapter, /*seed=*/3, at::kCPU);
  if (!set.ok()) Die("adapter set", set.status());
  const std::map<std::string, std::string> extra = {{"task_id", "fuzz-task"}};
  for (const auto& [name, dtype] :
       {std::pair{"f32", DType::kF32}, std::pair{"bf16", DType::kBF16}, std::pair{"f16", DType::kF16}}) {
    absl::StatusOr<std::string> bytes = SerializeAdapterSet(**set, kFingerprint, extra, dtype);
    if (!bytes.ok()) Die("serialise", bytes.status());
    const std::string path = dir + "/seed_" + name;
    std::ofstream out(path, std::ios::binary);
    out.put('\0');
    out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!out) Die(path, absl::InternalError("write failed"));
  }
}

void CheckInfo(const AdapterFileInfo& info) {
  FUZZ_CHECK(info.config.Validate().ok()) << "accepted an invalid AdapterConfig";
  FUZZ_CHECK(info.format_version >= 1 && info.format_version <= kAdapterFormatVersion)
      << "accepted format_version " << info.format_version;
  for (const std::string_view own : AdapterFormatKeys()) {
    FUZZ_CHECK(!info.extra.contains(std::string(own))) << "own key '" << own << "' among the extra keys";
  }
}

void CheckSet(const AdapterSet& set, const AdapterFileInfo& info, const AdapterLoadOptions& options) {
  FUZZ_CHECK(set.dtype() == options.dtype) << "set loaded as " << set.dtype() << ", asked " << options.dtype;
  FUZZ_CHECK(static_cast<int64_t>(set.layers().size()) == Config().num_hidden_layers) << "layer count";
  FUZZ_CHECK(set.config().labels == info.config.labels) << "labels differ from the file's";
  FUZZ_CHECK(set.config().bottleneck_size == info.config.bottleneck_size) << "bottleneck differs";
  FUZZ_CHECK(set.head_weight().size(0) == set.config().num_outputs()) << "head rows != the kind's outputs";
  FUZZ_CHECK(set.config().kind == info.config.kind) << "kind differs from the file's";
  if (options.check_finite) FUZZ_CHECK(CheckFinite(set).ok()) << "non-finite set passed check_finite";

  // Export and import again: same info (now the current version) and tensors.
  const AdapterFileInfo info2 =
      fuzz::CheckSerialisesAndReadsBack(set, Config(), kFingerprint, info.extra, options.dtype);
  FUZZ_CHECK(info2.format_version == kAdapterFormatVersion && info2.config.labels == info.config.labels &&
             info2.config.kind == info.config.kind && info2.config.qa == info.config.qa &&
             info2.config.target.mean == info.config.target.mean &&
             info2.config.target.stddev == info.config.target.stddev &&
             info2.config.bottleneck_size == info.config.bottleneck_size &&
             info2.config.activation == info.config.activation && info2.extra == info.extra &&
             info2.encoder_fingerprint == kFingerprint)
      << "info changed in an export";
}

}  // namespace
}  // namespace adapterd::model

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  adapterd::model::fuzz::InitializeHarness(&adapterd::model::WriteSeeds);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::model;
  if (size < 1) return 0;
  static constexpr c10::ScalarType kDtypes[4] = {c10::kFloat, c10::kBFloat16, c10::kHalf, c10::kFloat};
  AdapterLoadOptions options;
  options.dtype = kDtypes[data[0] & 3];
  options.check_finite = (data[0] & 4) == 0;
  const std::string_view bytes = adapterd::fuzz::AsStringView(data + 1, size - 1);

  absl::StatusOr<AdapterFileInfo> info = ReadAdapterInfo(bytes);
  if (info.ok()) CheckInfo(*info);
  absl::StatusOr<std::unique_ptr<AdapterSet>> set =
      DeserializeAdapterSet(bytes, Config(), kFingerprint, at::kCPU, options);
  if (!set.ok()) {
    const absl::StatusCode code = set.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kFailedPrecondition)
        << "unexpected error " << set.status();
    return 0;
  }
  FUZZ_CHECK(info.ok()) << "DeserializeAdapterSet accepted a file ReadAdapterInfo rejects: " << info.status();
  CheckSet(**set, *info, options);
  return 0;
}
