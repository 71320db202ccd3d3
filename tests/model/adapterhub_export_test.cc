// ExportAdapterHub: an adapterd task as the directory the `adapters` library's
// load_adapter reads. The independent plain-PyTorch reference
// (testdata/adapterhub/make_reference.py --read) loads each export as the
// library would (exact key set, the configs' fields, Python's
// `int(d // reduction_factor)`) and must compute adapterd's logits;
// ImportAdapterHub(ExportAdapterHub(set)) must give the set back bit for bit;
// trained LayerNorms are refused unless their loss is accepted.
#include "server/model/adapterhub_export.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/subprocess.h"
#include "common/testing/temp_dir.h"
#include "server/model/adapterhub.h"
#include "server/model/adapterhub_import.h"
#include "server/model/bert_encoder.h"
#include "server/model/model_loader.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::model::testing::BitEqual;
using ::adapterd::model::testing::GoldenDir;
using ::adapterd::model::testing::JsonToFloatTensor;
using ::adapterd::model::testing::MakeAdapterConfig;
using ::adapterd::model::testing::MakeTrainedLikeSet;
using ::adapterd::model::testing::MaxAbsDiff;
using ::adapterd::model::testing::ReadGoldenInput;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string AdapterHubData() {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/model/testdata/adapterhub";
}

AdapterHubFiles ReadDir(const std::string& dir) { return testing::ReadDirectoryFiles(dir); }

// Every tensor of two sets, equal bit for bit.
void ExpectSameTensors(const AdapterSet& a, const AdapterSet& b) {
  ASSERT_EQ(a.layers().size(), b.layers().size());
  EXPECT_TRUE(BitEqual(a.embedding_layer_norm().weight, b.embedding_layer_norm().weight));
  EXPECT_TRUE(BitEqual(a.embedding_layer_norm().bias, b.embedding_layer_norm().bias));
  for (size_t i = 0; i < a.layers().size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "layer " << i);
    const AdapterLayer& x = a.layers()[i];
    const AdapterLayer& y = b.layers()[i];
    for (const auto& [p, q] :
         {std::pair{&x.attention_adapter, &y.attention_adapter}, std::pair{&x.ffn_adapter, &y.ffn_adapter}}) {
      EXPECT_TRUE(BitEqual(p->down_weight, q->down_weight));
      EXPECT_TRUE(BitEqual(p->down_bias, q->down_bias));
      EXPECT_TRUE(BitEqual(p->up_weight, q->up_weight));
      EXPECT_TRUE(BitEqual(p->up_bias, q->up_bias));
    }
    for (const auto& [p, q] : {std::pair{&x.attention_layer_norm, &y.attention_layer_norm},
                               std::pair{&x.output_layer_norm, &y.output_layer_norm}}) {
      EXPECT_TRUE(BitEqual(p->weight, q->weight));
      EXPECT_TRUE(BitEqual(p->bias, q->bias));
    }
  }
  EXPECT_TRUE(BitEqual(a.head_weight(), b.head_weight()));
  EXPECT_TRUE(BitEqual(a.head_bias(), b.head_bias()));
}

class AdapterHubExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<LoadedModel> loaded = LoadBertModel(GoldenDir() + "/model", {});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    model_ = new LoadedModel(*std::move(loaded));
    absl::StatusOr<EncoderInput> input = ReadGoldenInput();
    ASSERT_TRUE(input.ok()) << input.status();
    input_ = new EncoderInput(*std::move(input));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete input_;
  }
  static const EncoderWeights& Encoder() { return model_->encoder->weights(); }

  static absl::StatusOr<AdapterHubFiles> Export(const AdapterSet& set, bool accept_layer_norm_loss = false,
                                                const std::string& name = "task") {
    return ExportAdapterHub(
        set, model_->config, Encoder(),
        {.name = name, .model_name = "adapterd-golden-tiny-bert", .accept_layer_norm_loss = accept_layer_norm_loss});
  }
  static absl::StatusOr<ImportedAdapterHub> Import(const AdapterHubFiles& files) {
    return ImportAdapterHub(files, model_->config, Encoder());
  }

  // The reference's logits for each of `exports`, written as directories
  // (one make_reference.py --read for all: PyTorch's start-up is most of a
  // run). Undefined tensors when it fails.
  static std::vector<at::Tensor> ReferenceLogits(const std::vector<AdapterHubFiles>& exports) {
    const adapterd::testing::TempDir dir;
    std::vector<std::string> command = {"/usr/bin/python3", AdapterHubData() + "/make_reference.py", "--read"};
    for (size_t i = 0; i < exports.size(); ++i) {
      const std::string sub = dir.path() + "/" + std::to_string(i);
      std::filesystem::create_directory(sub);
      for (const auto& [name, bytes] : exports[i]) EXPECT_OK(WriteFileAtomically(sub + "/" + name, bytes));
      command.push_back(sub);
    }
    std::vector<at::Tensor> out(exports.size());
    absl::StatusOr<adapterd::testing::RunResult> r = adapterd::testing::RunProgram(command);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return out;
    EXPECT_EQ(r->exit_code, 0) << r->err;
    std::istringstream lines(r->out);
    std::string line;
    for (size_t i = 0; i < out.size() && std::getline(lines, line); ++i) {
      out[i] = JsonToFloatTensor(nlohmann::json::parse(line)["logits"]);
    }
    return out;
  }
  static at::Tensor ReferenceLogits(const AdapterHubFiles& files) {
    return ReferenceLogits(std::vector<AdapterHubFiles>{files})[0];
  }

  // The set with the encoder's LayerNorms: what the library's regime trains.
  static std::shared_ptr<AdapterSet> WithEncoderLayerNorms(const AdapterSet& set) {
    const EncoderWeights& e = Encoder();
    auto copy = [](const at::Tensor& w, const at::Tensor& b) {
      return LayerNormAffine{w.to(at::kFloat).clone(), b.to(at::kFloat).clone()};
    };
    std::vector<AdapterLayer> layers = set.layers();
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i].attention_layer_norm = copy(e.layers[i].attn_ln_weight, e.layers[i].attn_ln_bias);
      layers[i].output_layer_norm = copy(e.layers[i].output_ln_weight, e.layers[i].output_ln_bias);
    }
    absl::StatusOr<std::unique_ptr<AdapterSet>> out =
        AdapterSet::FromParts(model_->config, set.config(), copy(e.emb_ln_weight, e.emb_ln_bias), std::move(layers),
                              set.head_weight().clone(), set.head_bias().clone());
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? std::shared_ptr<AdapterSet>(*std::move(out)) : nullptr;
  }

  // adapterd's own logits for `set` on the golden inputs: pooled [B, K], or
  // token [B, L, K] with padding positions zeroed (the reference's are not
  // outputs there).
  static at::Tensor AdapterdLogits(const AdapterSet& set) {
    absl::StatusOr<EncoderOutput> out = model_->encoder->Forward(*input_, set);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    return ReadsTokens(set.config().kind) ? out->token_logits : out->logits;
  }
  static double Diff(const AdapterSet& set, const at::Tensor& a, const at::Tensor& b) {
    if (!a.defined() || !b.defined() || a.sizes() != b.sizes()) return 1e9;
    if (!ReadsTokens(set.config().kind)) return MaxAbsDiff(a, b);
    const at::Tensor mask = input_->attention_mask.to(at::kBool);
    return MaxAbsDiff(a.index({mask}), b.index({mask}));
  }

  static LoadedModel* model_;
  static EncoderInput* input_;
};
LoadedModel* AdapterHubExportTest::model_ = nullptr;
EncoderInput* AdapterHubExportTest::input_ = nullptr;

TEST_F(AdapterHubExportTest, EveryImportedReferenceCaseExportsBackExactly) {
  const std::vector<std::string> cases = {"swish_classification", "relu_regression", "tanh_multilabel", "gelu_tagging",
                                          "gelu_new_qa"};
  std::vector<std::shared_ptr<AdapterSet>> sets;
  std::vector<AdapterHubFiles> exports;
  for (const std::string& c : cases) {
    SCOPED_TRACE(c);
    const std::string dir = AdapterHubData() + "/reference/" + c;
    ASSERT_OK_AND_ASSIGN(ImportedAdapterHub imported, Import(ReadDir(dir + "/adapter")));
    ASSERT_OK_AND_ASSIGN(AdapterHubFiles files, Export(*imported.set));
    std::vector<std::string> names;
    for (const auto& [name, unused] : files) names.push_back(name);
    EXPECT_THAT(
        names, ElementsAre("adapter_config.json", "head_config.json", "pytorch_adapter.bin", "pytorch_model_head.bin"));
    const nlohmann::json config = nlohmann::json::parse(files["adapter_config.json"]);
    EXPECT_EQ(config["version"], kAdapterHubExportVersion);
    EXPECT_EQ(config["config"]["reduction_factor"], 32 / imported.set->config().bottleneck_size);

    // import(export(x)) is x, bit for bit, and says what x says.
    ASSERT_OK_AND_ASSIGN(ImportedAdapterHub back, Import(files));
    ExpectSameTensors(*imported.set, *back.set);
    EXPECT_EQ(back.set->config().kind, imported.set->config().kind);
    EXPECT_EQ(back.set->config().activation, imported.set->config().activation);
    EXPECT_EQ(back.set->config().labels, imported.set->config().labels);
    EXPECT_EQ(back.adapter.leave_out, std::vector<int64_t>{});
    sets.push_back(std::move(imported.set));
    exports.push_back(std::move(files));
  }
  // The reference reads each export as the library would and computes the
  // logits it computed for the original directory.
  const std::vector<at::Tensor> logits = ReferenceLogits(exports);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i]);
    const std::string dir = AdapterHubData() + "/reference/" + cases[i];
    ASSERT_OK_AND_ASSIGN(std::string expected_json, ReadFileToString(dir + "/expected.json"));
    const at::Tensor expected = JsonToFloatTensor(nlohmann::json::parse(expected_json)["logits"]);
    EXPECT_LT(Diff(*sets[i], logits[i], expected), 1e-5);
  }
}

TEST_F(AdapterHubExportTest, AdapterdTrainedTasksOfEveryKindExportToTheirOwnLogits) {
  std::vector<AdapterConfig> configs;
  configs.push_back(MakeAdapterConfig(3));
  AdapterConfig multi = MakeAdapterConfig(4);
  multi.kind = TaskKind::kMultiLabelClassification;
  configs.push_back(multi);
  AdapterConfig tags;
  tags.bottleneck_size = 8;
  tags.kind = TaskKind::kTokenClassification;
  tags.labels = {"O", "B-ORG", "I-ORG"};
  tags.activation = Activation::kGeluNew;
  configs.push_back(tags);
  AdapterConfig qa;
  qa.bottleneck_size = 8;
  qa.kind = TaskKind::kExtractiveQa;
  qa.activation = Activation::kRelu;
  configs.push_back(qa);
  // A bottleneck that does not divide d = 32: 32 / 5 = 6.4, and Python's
  // 32 // 6.4 is 4.0, so the export must write a factor just under 6.4.
  AdapterConfig odd = MakeAdapterConfig(2, 5);
  odd.activation = Activation::kTanh;
  configs.push_back(odd);
  // Wider than the model (adapterd's default m = 64 on d = 32): a factor of
  // 0.5, which the library computes as well.
  configs.push_back(MakeAdapterConfig(2, 64));
  uint64_t seed = 7;
  std::vector<std::shared_ptr<AdapterSet>> sets;
  std::vector<AdapterHubFiles> exports;
  for (const AdapterConfig& c : configs) {
    SCOPED_TRACE(::testing::Message() << TaskKindName(c.kind) << " m=" << c.bottleneck_size);
    const std::shared_ptr<AdapterSet> set = WithEncoderLayerNorms(*MakeTrainedLikeSet(*model_->encoder, c, ++seed));
    ASSERT_NE(set, nullptr);
    ASSERT_OK_AND_ASSIGN(AdapterHubFiles files, Export(*set));
    const double rf = nlohmann::json::parse(files["adapter_config.json"])["config"]["reduction_factor"].get<double>();
    EXPECT_EQ(AdapterHubBottleneckSize(32, rf), c.bottleneck_size) << rf;
    ASSERT_OK_AND_ASSIGN(ImportedAdapterHub back, Import(files));
    ExpectSameTensors(*set, *back.set);
    EXPECT_EQ(back.set->config().bottleneck_size, c.bottleneck_size);
    sets.push_back(set);
    exports.push_back(std::move(files));
  }
  const std::vector<at::Tensor> logits = ReferenceLogits(exports);
  for (size_t i = 0; i < sets.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << TaskKindName(sets[i]->config().kind));
    EXPECT_LT(Diff(*sets[i], logits[i], AdapterdLogits(*sets[i])), 1e-5);
  }
}

TEST_F(AdapterHubExportTest, PythonsFloorDivisionDecidesTheBottleneck) {
  EXPECT_EQ(AdapterHubBottleneckSize(32, 6.4), 4);  // 32 / 6.4 rounds to 5.0; 32 // 6.4 is 4.0
  EXPECT_EQ(AdapterHubBottleneckSize(768, 16), 48);
  EXPECT_EQ(AdapterHubBottleneckSize(1024, 1024.0 / 3), 3);
  for (int64_t d : {32, 768, 1024}) {
    for (int64_t m = 1; m <= 96; ++m) {  // m > d too: adapterd's default m = 64 on a d = 32 model
      EXPECT_EQ(AdapterHubBottleneckSize(d, AdapterHubReductionFactor(d, m)), m) << d << " " << m;
    }
  }
  // The import reads a factor as the library does.
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig parsed, ParseAdapterHubConfig(R"({
    "config": {"architecture": "bottleneck", "mh_adapter": true, "output_adapter": true,
               "original_ln_before": false, "original_ln_after": true, "non_linearity": "relu",
               "reduction_factor": 6.4},
    "hidden_size": 32, "model_type": "bert", "name": "t", "version": "adapters.1.2.0"})"));
  EXPECT_EQ(parsed.bottleneck_size, 4);
}

TEST_F(AdapterHubExportTest, ARegressionHeadCarriesItsTargetScale) {
  AdapterConfig c;
  c.bottleneck_size = 8;
  c.kind = TaskKind::kRegression;
  c.target = {.mean = 3.5, .stddev = 2.25};
  const std::shared_ptr<AdapterSet> set = WithEncoderLayerNorms(*MakeTrainedLikeSet(*model_->encoder, c, 21));
  ASSERT_NE(set, nullptr);
  ASSERT_OK_AND_ASSIGN(AdapterHubFiles files, Export(*set));
  // adapterd predicts raw * stddev + mean; the library's regression head
  // predicts its Linear's output, so the export folds the scale in.
  const at::Tensor predicted = AdapterdLogits(*set) * 2.25 + 3.5;
  EXPECT_LT(Diff(*set, ReferenceLogits(files), predicted), 1e-5);
  ASSERT_OK_AND_ASSIGN(ImportedAdapterHub back, Import(files));
  ASSERT_OK_AND_ASSIGN(EncoderOutput out, model_->encoder->Forward(*input_, *back.set));
  EXPECT_EQ(back.set->config().target.mean, 0);
  EXPECT_EQ(back.set->config().target.stddev, 1);
  EXPECT_LT(MaxAbsDiff(out.logits, predicted), 1e-5);
}

TEST_F(AdapterHubExportTest, TrainedLayerNormsAreRefusedUnlessTheirLossIsAccepted) {
  // MakeTrainedLikeSet perturbs every parameter, the LayerNorms included: the
  // paper's regime, adapterd's default.
  const std::shared_ptr<AdapterSet> trained = MakeTrainedLikeSet(*model_->encoder, 2, 31);
  EXPECT_THAT(Export(*trained), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("the embeddings'")));
  // Only one LayerNorm trained: named.
  const std::shared_ptr<AdapterSet> frozen = WithEncoderLayerNorms(*trained);
  ASSERT_NE(frozen, nullptr);
  std::vector<AdapterLayer> layers = frozen->layers();
  layers[1].output_layer_norm.weight = layers[1].output_layer_norm.weight + 0.01;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<AdapterSet> one,
                       AdapterSet::FromParts(model_->config, frozen->config(), frozen->embedding_layer_norm(),
                                             std::move(layers), frozen->head_weight(), frozen->head_bias()));
  EXPECT_THAT(Export(*one), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("layer 1's FFN output")));

  // Accepted: exported without them, and imported back with the encoder's.
  ASSERT_OK_AND_ASSIGN(AdapterHubFiles files, Export(*trained, /*accept_layer_norm_loss=*/true));
  ASSERT_OK_AND_ASSIGN(ImportedAdapterHub back, Import(files));
  ExpectSameTensors(*frozen, *back.set);
  EXPECT_GT(MaxAbsDiff(AdapterdLogits(*trained), AdapterdLogits(*back.set)), 1e-4) << "the LayerNorms mattered";
}

TEST_F(AdapterHubExportTest, ANameTheKeysCannotCarryIsRefused) {
  const std::shared_ptr<AdapterSet> set = WithEncoderLayerNorms(*MakeTrainedLikeSet(*model_->encoder, 2, 41));
  ASSERT_NE(set, nullptr);
  for (const char* bad : {"", "a.b", "white space", "ünï"}) {
    EXPECT_THAT(Export(*set, false, bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("name"))) << bad;
  }
  ASSERT_OK_AND_ASSIGN(AdapterHubFiles files, Export(*set, false, "sst-2_v1"));
  EXPECT_THAT(files["head_config.json"], HasSubstr("\"sst-2_v1\""));
  ASSERT_OK_AND_ASSIGN(ImportedAdapterHub back, Import(files));
  EXPECT_EQ(back.adapter.name, "sst-2_v1");
}

}  // namespace
}  // namespace adapterd::model
