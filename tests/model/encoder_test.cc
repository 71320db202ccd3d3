// Encoder and loader: golden outputs against an independent reference,
// checkpoint naming variants, error paths, and the compute-thread setup
// (tensor_io.h SetComputeThreads).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"
#include "server/model/bert_encoder.h"
#include "server/model/checkpoint_writer.h"
#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;
using namespace ::adapterd::model::testing;  // NOLINT

TEST(BertEncoderGolden, MatchesIndependentReferenceTo1e5) {
  ASSERT_OK_AND_ASSIGN(LoadedModel model, LoadBertModel(GoldenDir() + "/model", {}));
  ASSERT_OK_AND_ASSIGN(EncoderInput input, ReadGoldenInput());
  ASSERT_OK_AND_ASSIGN(EncoderOutput out, model.encoder->Forward(input));
  ASSERT_OK_AND_ASSIGN(SafetensorsFile expected, SafetensorsFile::Open(GoldenDir() + "/expected.safetensors"));
  ASSERT_NE(expected.Find("last_hidden_state"), nullptr);
  ASSERT_NE(expected.Find("pooler_output"), nullptr);
  ASSERT_OK_AND_ASSIGN(at::Tensor hidden,
                       ViewToTensor(*expected.Find("last_hidden_state"), expected.holder(), at::kCPU, at::kFloat));
  ASSERT_OK_AND_ASSIGN(at::Tensor pooled,
                       ViewToTensor(*expected.Find("pooler_output"), expected.holder(), at::kCPU, at::kFloat));
  ASSERT_EQ(out.last_hidden_state.sizes(), hidden.sizes());
  ASSERT_EQ(out.pooled.sizes(), pooled.sizes());
  // Padding positions are compared too: HF computes them the same way.
  EXPECT_LT(MaxAbsDiff(out.last_hidden_state, hidden), 1e-5);
  EXPECT_LT(MaxAbsDiff(out.pooled, pooled), 1e-5);
  // The fixture is not degenerate: outputs vary across rows and positions.
  EXPECT_GT(hidden.std().item<double>(), 0.1);
}

// HuggingFace's older pytorch_model.bin (torch.save) of the golden model,
// written by Debian's PyTorch (testdata/torch_archive/make_fixtures.py):
// the same weights, fingerprint and outputs as its model.safetensors.
TEST(ModelLoader, APytorchModelBinLoadsAsItsSafetensorsTwin) {
  const ::adapterd::testing::TempDir tmp("torch_bin");
  const std::filesystem::path dir = tmp.path();
  const std::filesystem::path golden = GoldenDir() + "/model";
  const std::string bin = GoldenDir() + "/../torch_archive/golden_pytorch_model.bin";
  for (const char* f : {"config.json", "vocab.txt"}) std::filesystem::copy_file(golden / f, dir / f);
  std::filesystem::copy_file(bin, dir / "pytorch_model.bin");

  ASSERT_OK_AND_ASSIGN(LoadedModel from_bin, LoadBertModel(dir.string(), {}));
  ASSERT_OK_AND_ASSIGN(LoadedModel from_safetensors, LoadBertModel(golden.string(), {}));
  EXPECT_EQ(from_bin.weights_fingerprint, from_safetensors.weights_fingerprint);
  EXPECT_EQ(from_bin.fingerprint, from_safetensors.fingerprint);
  ASSERT_OK_AND_ASSIGN(EncoderInput input, ReadGoldenInput());
  ASSERT_OK_AND_ASSIGN(EncoderOutput a, from_bin.encoder->Forward(input));
  ASSERT_OK_AND_ASSIGN(EncoderOutput b, from_safetensors.encoder->Forward(input));
  EXPECT_TRUE(BitEqual(a.last_hidden_state, b.last_hidden_state));
  EXPECT_TRUE(BitEqual(a.pooled, b.pooled));

  // model.safetensors wins where both exist: a broken .bin beside it is
  // never read.
  const ::adapterd::testing::TempDir both("torch_bin_both");
  for (const char* f : {"config.json", "vocab.txt", "model.safetensors"}) {
    std::filesystem::copy_file(golden / f, std::filesystem::path(both.path()) / f);
  }
  ASSERT_OK(WriteFileAtomically(both.path() + "/pytorch_model.bin", "not a zip"));
  EXPECT_OK(LoadBertModel(both.path(), {}).status());

  // A hostile pickle is refused by name, the file named, nothing run.
  std::filesystem::copy_file(GoldenDir() + "/../torch_archive/evil.bin", dir / "evil.bin");
  std::filesystem::rename(dir / "evil.bin", dir / "pytorch_model.bin");
  EXPECT_THAT(LoadBertModel(dir.string(), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("refused global 'posix.system'")));
  EXPECT_THAT(LoadBertModel(dir.string(), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pytorch_model.bin")));
  // Neither file: NOT_FOUND names the safetensors one.
  std::filesystem::remove(dir / "pytorch_model.bin");
  EXPECT_THAT(LoadBertModel(dir.string(), {}).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("model.safetensors")));
}

TEST(ModelLoader, BothNamingVariantsGiveIdenticalOutputs) {
  BertConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(config, 7));
  std::vector<std::string> vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"};
  const ::adapterd::testing::TempDir tmp("naming");
  const std::string dir = tmp.path();
  HfWriteOptions plain;
  HfWriteOptions legacy;
  legacy.bert_prefix = true;
  legacy.legacy_layer_norm_names = true;
  ASSERT_OK(WriteHfCheckpoint(dir + "/plain", config, w, vocab, plain));
  ASSERT_OK(WriteHfCheckpoint(dir + "/legacy", config, w, vocab, legacy));
  // The legacy file really uses the other spelling.
  ASSERT_OK_AND_ASSIGN(SafetensorsFile f, SafetensorsFile::Open(dir + "/legacy/model.safetensors"));
  EXPECT_NE(f.Find("bert.embeddings.LayerNorm.gamma"), nullptr);
  EXPECT_EQ(f.Find("embeddings.LayerNorm.weight"), nullptr);

  ASSERT_OK_AND_ASSIGN(LoadedModel a, LoadBertModel(dir + "/plain", {}));
  ASSERT_OK_AND_ASSIGN(LoadedModel b, LoadBertModel(dir + "/legacy", {}));
  EncoderInput input = MakeInput({{2, 5, 6, 7, 3}, {2, 9, 3}});
  ASSERT_OK_AND_ASSIGN(EncoderOutput oa, a.encoder->Forward(input));
  ASSERT_OK_AND_ASSIGN(EncoderOutput ob, b.encoder->Forward(input));
  EXPECT_TRUE(BitEqual(oa.last_hidden_state, ob.last_hidden_state));
  EXPECT_TRUE(BitEqual(oa.pooled, ob.pooled));
  // Same weights, same fingerprints, whatever the spelling; the weights
  // fingerprint equals the in-memory computation.
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  EXPECT_EQ(a.weights_fingerprint, b.weights_fingerprint);
  ASSERT_OK_AND_ASSIGN(std::string fp, ComputeEncoderFingerprint(config, w));
  EXPECT_EQ(a.weights_fingerprint, fp);
}

// Rewrites a checkpoint's model.safetensors through `edit`.
void EditCheckpoint(const std::string& dir, const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  ASSERT_OK_AND_ASSIGN(SafetensorsFile f, SafetensorsFile::Open(dir + "/model.safetensors"));
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, view] : f.tensors()) {
    ASSERT_OK_AND_ASSIGN(tensors[name], ViewToTensor(view, f.holder(), at::kCPU, at::kFloat));
  }
  edit(tensors);
  SafetensorsWriter w;
  for (auto& [name, t] : tensors) ASSERT_OK(AddTensor(w, name, t, DType::kF32));
  ASSERT_OK(w.WriteFile(dir + "/model.safetensors"));
}

class ModelLoaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = TinyConfig();
    auto w = RandomEncoderWeights(config_, 3);
    ASSERT_TRUE(w.ok());
    ASSERT_OK(WriteHfCheckpoint(dir_, config_, *w, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}));
  }
  ::adapterd::testing::TempDir tmp_{"loader"};
  std::string dir_ = tmp_.path();
  BertConfig config_;
};

TEST_F(ModelLoaderErrors, MissingTensorIsNamed) {
  EditCheckpoint(dir_, [](auto& t) { t.erase("encoder.layer.1.attention.self.key.bias"); });
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("missing tensor 'encoder.layer.1.attention.self.key.bias'")));
}

TEST_F(ModelLoaderErrors, MisShapedTensorIsNamedWithBothShapes) {
  EditCheckpoint(dir_, [](auto& t) { t["encoder.layer.0.intermediate.dense.weight"] = at::zeros({63, 32}); });
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                AllOf(HasSubstr("'encoder.layer.0.intermediate.dense.weight'"),
                                                      HasSubstr("[63,32]"), HasSubstr("[64,32]"))));
}

TEST_F(ModelLoaderErrors, ClsHeadsAndBuffersAreIgnored) {
  EditCheckpoint(dir_, [](auto& t) {
    t["cls.predictions.transform.dense.weight"] = at::zeros({3, 3});
    t["embeddings.position_ids"] = at::zeros({1, 64});
  });
  EXPECT_OK(LoadBertModel(dir_, {}));
}

TEST_F(ModelLoaderErrors, AmbiguousDuplicateSpellingIsRejected) {
  EditCheckpoint(dir_, [](auto& t) { t["bert.pooler.dense.bias"] = t["pooler.dense.bias"].clone(); });
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pooler.dense.bias")));
}

TEST_F(ModelLoaderErrors, MissingPoolerFallsBackToClsHiddenState) {
  EditCheckpoint(dir_, [](auto& t) {
    t.erase("pooler.dense.weight");
    t.erase("pooler.dense.bias");
  });
  ASSERT_OK_AND_ASSIGN(LoadedModel m, LoadBertModel(dir_, {}));
  EXPECT_FALSE(m.encoder->weights().has_pooler());
  ASSERT_OK_AND_ASSIGN(EncoderOutput out, m.encoder->Forward(MakeInput({{2, 7, 3}})));
  EXPECT_TRUE(BitEqual(out.pooled, out.last_hidden_state.select(1, 0)));
}

// A config whose num_hidden_layers (1000000) implies far more tensors than
// the checkpoint holds is refused by comparing the counts first, without
// building the list of the 16 million tensors it implies.
TEST_F(ModelLoaderErrors, AConfigDescribingMoreLayersThanTheCheckpointHoldsIsRefusedAtOnce) {
  BertConfig huge = config_;
  huge.num_hidden_layers = 1000000;
  ASSERT_OK(WriteFileAtomically(dir_ + "/config.json", huge.ToJson()));
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                AllOf(HasSubstr("1000000 layers"), HasSubstr("enough for at most 2"))));
  // One layer too many is named the same way.
  huge.num_hidden_layers = config_.num_hidden_layers + 1;
  ASSERT_OK(WriteFileAtomically(dir_ + "/config.json", huge.ToJson()));
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 layers")));
}

TEST_F(ModelLoaderErrors, MissingFilesAndBadConfigAreClear) {
  EXPECT_THAT(LoadBertModel(dir_ + "/nope", {}), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  std::filesystem::remove(dir_ + "/vocab.txt");
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kNotFound, HasSubstr("vocab.txt")));
  ASSERT_OK(WriteFileAtomically(dir_ + "/config.json", "{\"hidden_size\": 30, \"num_attention_heads\": 4}"));
  EXPECT_THAT(LoadBertModel(dir_, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("config.json"), HasSubstr("multiple"))));
  ASSERT_OK(WriteFileAtomically(dir_ + "/config.json", "{not json"));
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed")));
}

TEST_F(ModelLoaderErrors, CorruptSafetensorsIsAnErrorNotACrash) {
  ASSERT_OK(WriteFileAtomically(dir_ + "/model.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00{", 9)));
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model.safetensors")));
}

TEST_F(ModelLoaderErrors, ATensorTheConfigDoesNotDescribeIsRefused) {
  EditCheckpoint(dir_, [](auto& t) {
    t["encoder.layer.0.attention.self.extra.weight"] = at::zeros({32});
    t["embeddings.token_type_ids"] = at::zeros({1, 64});  // an HF buffer: fine
  });
  EXPECT_THAT(LoadBertModel(dir_, {}), StatusIs(absl::StatusCode::kInvalidArgument,
                                                AllOf(HasSubstr("'encoder.layer.0.attention.self.extra.weight'"),
                                                      HasSubstr("not part of the BERT encoder"))));
}

TEST_F(ModelLoaderErrors, ACheckpointWithMoreLayersThanTheConfigIsRefused) {
  // The checkpoint has 2 layers; config.json claims 1 (the extra layer used
  // to be ignored silently).
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(dir_ + "/config.json"));
  nlohmann::json config = nlohmann::json::parse(text);
  config["num_hidden_layers"] = 1;
  ASSERT_OK(WriteFileAtomically(dir_ + "/config.json", config.dump()));
  EXPECT_THAT(LoadBertModel(dir_, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("belongs to layer 1, but config.json's num_hidden_layers is 1")));
}

TEST_F(ModelLoaderErrors, NonFiniteWeightsAreRefusedNamingTheTensor) {
  // The same element each time, so the second edit replaces the first.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    EditCheckpoint(dir_, [bad](auto& t) { t["encoder.layer.1.output.dense.weight"][3][5] = bad; });
    EXPECT_THAT(LoadBertModel(dir_, {}),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("'encoder.layer.1.output.dense.weight'"), HasSubstr("NaN or infinite"))));
  }
}

TEST_F(ModelLoaderErrors, ErrorsNameTheWeightsFileOnce) {
  const std::string weights = dir_ + "/model.safetensors";
  std::filesystem::resize_file(weights, 20);
  absl::StatusOr<LoadedModel> m = LoadBertModel(dir_, {});
  ASSERT_FALSE(m.ok());
  const std::string message(m.status().message());
  EXPECT_EQ(message.find(weights), message.rfind(weights)) << message;
  EXPECT_NE(message.find(weights), std::string::npos) << message;
}

TEST_F(ModelLoaderErrors, TheFingerprintCoversTheVocabularyAndLowerCasing) {
  ASSERT_OK_AND_ASSIGN(LoadedModel base, LoadBertModel(dir_, {}));
  EXPECT_EQ(base.encoder->fingerprint(), base.fingerprint);
  EXPECT_EQ(base.encoder->weights_fingerprint(), base.weights_fingerprint);
  ASSERT_OK_AND_ASSIGN(std::string fp, ComputeEncoderFingerprint(base.config, base.encoder->weights()));
  EXPECT_EQ(base.weights_fingerprint, fp);
  EXPECT_EQ(base.fingerprint, ComputeModelFingerprint(fp, *base.tokenizer));
  // Deterministic: loading again gives the same fingerprint.
  ASSERT_OK_AND_ASSIGN(LoadedModel again, LoadBertModel(dir_, {}));
  EXPECT_EQ(again.fingerprint, base.fingerprint);

  // Same weights, a token renamed: another model.
  ASSERT_OK(WriteFileAtomically(dir_ + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n"));
  ASSERT_OK_AND_ASSIGN(LoadedModel a, LoadBertModel(dir_, {}));
  ASSERT_OK(WriteFileAtomically(dir_ + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhallo\n"));
  ASSERT_OK_AND_ASSIGN(LoadedModel b, LoadBertModel(dir_, {}));
  ASSERT_OK(WriteFileAtomically(dir_ + "/tokenizer_config.json", "{\"do_lower_case\": false}"));
  ASSERT_OK_AND_ASSIGN(LoadedModel b_cased, LoadBertModel(dir_, {}));
  for (const LoadedModel* m : {&a, &b, &b_cased}) EXPECT_EQ(m->weights_fingerprint, base.weights_fingerprint);
  EXPECT_NE(a.fingerprint, base.fingerprint);
  EXPECT_NE(a.fingerprint, b.fingerprint);
  EXPECT_NE(b.fingerprint, b_cased.fingerprint);
}

TEST_F(ModelLoaderErrors, TokenizerConfigControlsLowerCasing) {
  ASSERT_OK(WriteFileAtomically(dir_ + "/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nHello\n"));
  ASSERT_OK(WriteFileAtomically(dir_ + "/tokenizer_config.json", "{\"do_lower_case\": false}"));
  ASSERT_OK_AND_ASSIGN(LoadedModel cased, LoadBertModel(dir_, {}));
  EXPECT_EQ(cased.tokenizer->TokenizeToIds("Hello"), std::vector<int32_t>{6});
  ASSERT_OK(WriteFileAtomically(dir_ + "/tokenizer_config.json", "{\"do_lower_case\": true}"));
  ASSERT_OK_AND_ASSIGN(LoadedModel uncased, LoadBertModel(dir_, {}));
  EXPECT_EQ(uncased.tokenizer->TokenizeToIds("Hello"), std::vector<int32_t>{5});
}

TEST(ModelLoader, LoadsToBf16WithCloseOutputs) {
  const ::adapterd::testing::TempDir tmp("bf16");
  const std::string dir = tmp.path();
  BertConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(config, 5));
  ASSERT_OK(WriteHfCheckpoint(dir, config, w, {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}));
  LoadOptions bf16;
  bf16.dtype = at::kBFloat16;
  ASSERT_OK_AND_ASSIGN(LoadedModel a, LoadBertModel(dir, {}));
  ASSERT_OK_AND_ASSIGN(LoadedModel b, LoadBertModel(dir, bf16));
  EXPECT_EQ(b.encoder->weights().word_embeddings.scalar_type(), at::kBFloat16);
  EXPECT_EQ(a.fingerprint, b.fingerprint);  // same checkpoint bytes
  EncoderInput input = MakeInput({{2, 5, 6, 7, 3}});
  ASSERT_OK_AND_ASSIGN(EncoderOutput oa, a.encoder->Forward(input));
  ASSERT_OK_AND_ASSIGN(EncoderOutput ob, b.encoder->Forward(input));
  EXPECT_LT(MaxAbsDiff(oa.last_hidden_state, ob.last_hidden_state), 0.15);
}

TEST(BertEncoder, EncoderWeightsAreFrozen) {
  auto enc = MakeEncoder(TinyConfig());
  for (const auto& [name, t] : enc->weights().Named()) EXPECT_FALSE(t.requires_grad()) << name;
}

TEST(BertEncoder, RejectsMalformedInputs) {
  auto enc = MakeEncoder(TinyConfig());
  EXPECT_THAT(enc->Forward(EncoderInput{}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input_ids")));
  EXPECT_THAT(enc->Forward(MakeInput({{2, 50, 3}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input_ids must be in [0, 50)")));
  EXPECT_THAT(enc->Forward(MakeInput({{2, 5, 3}}, /*pad_to=*/65)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_position_embeddings")));
  EncoderInput bad_types = MakeInput({{2, 5, 3}});
  bad_types.token_type_ids.fill_(2);
  EXPECT_THAT(enc->Forward(bad_types), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("token_type_ids")));
  EncoderInput bad_mask = MakeInput({{2, 5, 3}});
  bad_mask.attention_mask = at::ones({1, 2}, at::kLong);
  EXPECT_THAT(enc->Forward(bad_mask), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shape")));
}

// inputs_checked only skips the range check: valid inputs give the same
// outputs bit for bit, and a negative id (which at::embedding refuses on a
// CPU) is still an error, not a crash.
TEST(BertEncoder, InputsCheckedSkipsOnlyTheRangeCheck) {
  auto enc = MakeEncoder(TinyConfig());
  const EncoderInput input = MakeInput({{2, 5, 6, 3}, {2, 7, 3}});
  ASSERT_OK_AND_ASSIGN(EncoderOutput checked, enc->Forward(input));
  ASSERT_OK_AND_ASSIGN(EncoderOutput trusted, enc->Forward(input, {.inputs_checked = true}));
  EXPECT_TRUE(BitEqual(checked.last_hidden_state, trusted.last_hidden_state));
  EXPECT_TRUE(BitEqual(checked.pooled, trusted.pooled));
  EncoderInput bad = MakeInput({{2, 5, 3}});
  bad.input_ids[0][1] = -1;
  EXPECT_THAT(enc->Forward(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input_ids must be in")));
  EXPECT_FALSE(enc->Forward(bad, {.inputs_checked = true}).ok());
}

TEST(BertEncoder, CreateRejectsWeightsThatDoNotFitTheConfig) {
  BertConfig config = TinyConfig();
  ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(config, 1));
  w.layers[1].output_weight = at::zeros({32, 63});
  EXPECT_THAT(BertEncoder::Create(config, w, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("encoder.layer.1.output.dense.weight")));
}

// The canonical order is what the fingerprint hashes (EncoderFingerprinter):
// a change to it would orphan every stored adapter. Pinned here for one
// layer, with the tensor table (encoder_weights.h) behind every list.
TEST(EncoderTensorTable, NamedListsTheHfTensorsInTheFingerprintsOrder) {
  BertConfig config = TinyConfig();
  config.num_hidden_layers = 1;
  ASSERT_OK_AND_ASSIGN(EncoderWeights w, RandomEncoderWeights(config, 1));
  std::vector<std::string> names;
  for (const auto& [name, t] : w.Named()) names.push_back(name);
  const std::string l = "encoder.layer.0.";
  EXPECT_THAT(names,
              ::testing::ElementsAre(
                  "embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                  "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
                  l + "attention.self.query.weight", l + "attention.self.query.bias", l + "attention.self.key.weight",
                  l + "attention.self.key.bias", l + "attention.self.value.weight", l + "attention.self.value.bias",
                  l + "attention.output.dense.weight", l + "attention.output.dense.bias",
                  l + "attention.output.LayerNorm.weight", l + "attention.output.LayerNorm.bias",
                  l + "intermediate.dense.weight", l + "intermediate.dense.bias", l + "output.dense.weight",
                  l + "output.dense.bias", l + "output.LayerNorm.weight", l + "output.LayerNorm.bias",
                  "pooler.dense.weight", "pooler.dense.bias"));
  // Q, K and V are views of the fused projection, in that order.
  const at::Tensor& qkv = w.layers[0].qkv_weight;
  const int64_t d = config.hidden_size;
  EXPECT_TRUE(at::equal(w.Named()[7].second, qkv.narrow(0, d, d)));  // key.weight
  // Tensors() holds the fused tensors once each: 5 + 12 + 2.
  EXPECT_EQ(w.Tensors().size(), 19u);
  // Every spec's shape is what RandomEncoderWeights made and Create accepts.
  ForEachEncoderTensor(1, true, [&](const EncoderTensorSpec& spec, int64_t layer) {
    EXPECT_EQ(TensorOf(w, spec, layer).sizes(), at::IntArrayRef(spec.Shape(config))) << spec.name;
  });
  EXPECT_OK(BertEncoder::Create(config, w, {}).status());
}

// --threads N means N compute threads in all: LibTorch's pool and, where
// LibTorch's BLAS is OpenBLAS (Debian's), OpenBLAS's own pool too.
// CheckFinite sums first (one reduction); the sum of finite values can still
// overflow, and then it must look at the elements rather than refuse.
TEST(TensorIo, CheckFiniteIsExactWhenTheSumOverflows) {
  for (at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
    const double big = type == at::kHalf ? 60000.0 : 3e38;
    at::Tensor finite = at::full({64}, big, at::TensorOptions().dtype(type));
    EXPECT_OK(CheckFinite(finite, "big")) << type;
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
      at::Tensor t = finite.clone();
      t[17] = bad;
      EXPECT_THAT(CheckFinite(t, "t"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t holds NaN"))) << type;
      at::Tensor small = at::zeros({8}, at::TensorOptions().dtype(type));
      small[3] = bad;
      EXPECT_THAT(CheckFinite(small, "s"), StatusIs(absl::StatusCode::kInvalidArgument)) << type;
    }
  }
  EXPECT_OK(CheckFinite(at::full({4}, 7, at::kLong), "integers"));
}

TEST(ComputeThreads, SizesLibTorchAndOpenBlasPools) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  const bool openblas_loaded = text.str().find("openblas") != std::string::npos;
  const int before = at::get_num_threads();
  for (int n : {1, 2, 1}) {
    EXPECT_EQ(SetComputeThreads(n), n);
    EXPECT_EQ(at::get_num_threads(), n);
    if (openblas_loaded) {
      EXPECT_EQ(BlasThreads(), n);
    } else {
      EXPECT_EQ(BlasThreads(), -1);
    }
  }
  SetComputeThreads(before);
}

TEST(BertConfig, ParsesHfJsonAndRoundTrips) {
  ASSERT_OK_AND_ASSIGN(BertConfig c, BertConfig::Preset("base", 30522));
  ASSERT_OK_AND_ASSIGN(BertConfig back, BertConfig::FromJson(c.ToJson()));
  EXPECT_EQ(c, back);
  EXPECT_THAT(BertConfig::FromJson("{\"hidden_act\": \"relu\"}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden_act")));
  EXPECT_THAT(BertConfig::FromJson("{\"model_type\": \"gpt2\"}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpt2")));
  EXPECT_THAT(BertConfig::FromJson("{\"hidden_size\": \"big\"}"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hidden_size")));
  EXPECT_THAT(BertConfig::Preset("huge", 10), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("huge")));
}

}  // namespace
}  // namespace adapterd::model
