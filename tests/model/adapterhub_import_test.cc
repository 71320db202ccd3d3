// ImportAdapterHub: AdapterHub adapter directories written by an independent
// plain-PyTorch reference (testdata/adapterhub/make_reference.py: the golden
// tiny BERT with Houlsby adapters placed as the `adapters` library places
// them, and its heads) import as tasks whose logits are the reference's to
// 1e-5, for every activation, the five task kinds, both weights files and
// three dtypes; what adapterd does not compute yet is UNIMPLEMENTED, and a
// malformed directory INVALID_ARGUMENT naming the file.
#include "server/model/adapterhub_import.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "server/model/bert_encoder.h"
#include "server/model/model_loader.h"
#include "server/model/safetensors.h"
#include "server/model/tensor_io.h"
#include "tests/model/model_test_util.h"

namespace adapterd::model {
namespace {

using ::adapterd::model::testing::GoldenDir;
using ::adapterd::model::testing::JsonToFloatTensor;
using ::adapterd::model::testing::MaxAbsDiff;
using ::adapterd::model::testing::ReadGoldenInput;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TestData() {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/model/testdata";
}

AdapterHubFiles ReadDir(const std::string& dir) { return testing::ReadDirectoryFiles(dir); }

class AdapterHubImportTest : public ::testing::Test {
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

  static absl::StatusOr<ImportedAdapterHub> Import(const AdapterHubFiles& files) {
    return ImportAdapterHub(files, model_->config, model_->encoder->weights());
  }
  static std::string Reference(const std::string& c) { return TestData() + "/adapterhub/reference/" + c; }

  static LoadedModel* model_;
  static EncoderInput* input_;
};
LoadedModel* AdapterHubImportTest::model_ = nullptr;
EncoderInput* AdapterHubImportTest::input_ = nullptr;

struct Case {
  std::string name;
  TaskKind kind;
  Activation activation;
  int64_t bottleneck;
  std::vector<std::string> labels;
};

TEST_F(AdapterHubImportTest, EveryReferenceCaseGivesTheReferencesLogits) {
  const std::vector<Case> cases = {
      {"swish_classification", TaskKind::kSequenceClassification, Activation::kSilu, 4, {"neg", "neu", "pos"}},
      {"relu_regression", TaskKind::kRegression, Activation::kRelu, 2, {}},
      {"tanh_multilabel", TaskKind::kMultiLabelClassification, Activation::kTanh, 4, {"a", "b", "c", "d"}},
      {"gelu_tagging", TaskKind::kTokenClassification, Activation::kGelu, 8, {"O", "B-PER", "I-PER", "B-LOC", "I-LOC"}},
      // No "version" in its config: the older library's "gelu" is the tanh form.
      {"gelu_new_qa", TaskKind::kExtractiveQa, Activation::kGeluNew, 4, {}},
  };
  const at::Tensor mask = input_->attention_mask.to(at::kBool);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(ImportedAdapterHub imported, Import(ReadDir(Reference(c.name) + "/adapter")));
    const AdapterSet& set = *imported.set;
    EXPECT_EQ(set.config().kind, c.kind);
    EXPECT_EQ(set.config().activation, c.activation);
    EXPECT_EQ(set.config().bottleneck_size, c.bottleneck);
    EXPECT_EQ(set.config().labels, c.labels);
    EXPECT_EQ(set.dtype(), at::kFloat);

    ASSERT_OK_AND_ASSIGN(std::string expected_json, ReadFileToString(Reference(c.name) + "/expected.json"));
    const at::Tensor expected = JsonToFloatTensor(nlohmann::json::parse(expected_json)["logits"]);
    ASSERT_OK_AND_ASSIGN(EncoderOutput out, model_->encoder->Forward(*input_, set));
    // The head alone on the plain encoder: what an adapter applied nowhere
    // (or applied wrongly) would come close to.
    ASSERT_OK_AND_ASSIGN(EncoderOutput plain, model_->encoder->Forward(*input_));
    if (ReadsTokens(c.kind)) {
      ASSERT_TRUE(out.token_logits.defined());
      ASSERT_EQ(out.token_logits.sizes(), expected.sizes());
      // Real tokens only: a token head's padding positions are not outputs.
      EXPECT_LT(MaxAbsDiff(out.token_logits.index({mask}), expected.index({mask})), 1e-5);
      const at::Tensor head_only = at::linear(plain.last_hidden_state, set.head_weight(), set.head_bias());
      EXPECT_GT(MaxAbsDiff(head_only.index({mask}), expected.index({mask})), 1e-2) << "the adapters change nothing";
    } else {
      ASSERT_TRUE(out.logits.defined());
      ASSERT_EQ(out.logits.sizes(), expected.sizes());
      EXPECT_LT(MaxAbsDiff(out.logits, expected), 1e-5);
      const at::Tensor head_only = at::linear(plain.pooled, set.head_weight(), set.head_bias());
      EXPECT_GT(MaxAbsDiff(head_only, expected), 1e-2) << "the adapters change nothing";
    }
  }
}

TEST_F(AdapterHubImportTest, LeaveOutLayersGetIdentityAdaptersAndTheEncodersLayerNorms) {
  // relu_regression leaves layer 1 out; tanh_multilabel's head has no bias
  // (bias false), which becomes a zero bias.
  ASSERT_OK_AND_ASSIGN(ImportedAdapterHub regression, Import(ReadDir(Reference("relu_regression") + "/adapter")));
  const AdapterLayer& left_out = regression.set->layers()[1];
  for (const at::Tensor& t :
       {left_out.attention_adapter.down_weight, left_out.attention_adapter.up_weight,
        left_out.attention_adapter.up_bias, left_out.ffn_adapter.up_weight, left_out.ffn_adapter.up_bias}) {
    EXPECT_EQ(t.abs().max().item<float>(), 0.0f);
  }
  EXPECT_GT(regression.set->layers()[0].ffn_adapter.up_weight.abs().max().item<float>(), 0.0f);
  const EncoderWeights& enc = model_->encoder->weights();
  EXPECT_TRUE(at::equal(regression.set->layers()[1].output_layer_norm.weight, enc.layers[1].output_ln_weight));
  EXPECT_TRUE(at::equal(regression.set->embedding_layer_norm().bias, enc.emb_ln_bias));
  EXPECT_THAT(regression.adapter.leave_out, ElementsAre(1));

  ASSERT_OK_AND_ASSIGN(ImportedAdapterHub multilabel, Import(ReadDir(Reference("tanh_multilabel") + "/adapter")));
  EXPECT_FALSE(multilabel.head.bias);
  EXPECT_EQ(multilabel.set->head_bias().abs().max().item<float>(), 0.0f);
}

TEST_F(AdapterHubImportTest, WhatAdapterdDoesNotComputeYetIsUnimplemented) {
  // The Pfeiffer placement (tests/model/testdata/adapterhub/pfeiffer).
  EXPECT_THAT(Import(ReadDir(TestData() + "/adapterhub/pfeiffer")),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("pfeiffer placement")));
  // A pf-* style head of two layers, on h[CLS] (the houlsby fixture).
  AdapterHubFiles two_layers = ReadDir(TestData() + "/adapterhub/houlsby");
  EXPECT_THAT(Import(two_layers), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("2 layers")));
  // One layer on h[CLS] where the encoder has a pooler.
  AdapterHubFiles on_cls = ReadDir(Reference("swish_classification") + "/adapter");
  nlohmann::json head = nlohmann::json::parse(on_cls["head_config.json"]);
  head["config"]["use_pooler"] = false;
  on_cls["head_config.json"] = head.dump();
  EXPECT_THAT(Import(on_cls), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("h[CLS]")));
}

TEST_F(AdapterHubImportTest, AMalformedDirectoryIsRefusedNamingTheFile) {
  const AdapterHubFiles good = ReadDir(Reference("relu_regression") + "/adapter");
  {
    AdapterHubFiles f = good;
    f.erase("head_config.json");
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no head_config.json")));
  }
  {
    AdapterHubFiles f = good;
    f.erase("adapter.safetensors");
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("neither adapter.safetensors nor pytorch_adapter.bin")));
  }
  {
    AdapterHubFiles f = good;
    f["pytorch_adapter.bin"] = f["adapter.safetensors"];
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ambiguous")));
  }
  {
    AdapterHubFiles f = good;
    f["README.md"] = "hello";
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("README.md")));
  }
  {
    AdapterHubFiles f = good;
    f["adapter.safetensors"].resize(40);
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("adapter.safetensors: ")));
  }
  {
    // Trained for a wider model.
    AdapterHubFiles f = good;
    nlohmann::json config = nlohmann::json::parse(f["adapter_config.json"]);
    config["hidden_size"] = 64;
    f["adapter_config.json"] = config.dump();
    EXPECT_THAT(Import(f), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("adapter_config.json: hidden_size 64 does not match")));
  }
  {
    // A NaN in a weight.
    AdapterHubFiles f = good;
    ASSERT_OK_AND_ASSIGN(SafetensorsFile file, SafetensorsFile::FromString(f["adapter.safetensors"]));
    SafetensorsWriter writer;
    for (const auto& [name, view] : file.tensors()) {
      std::string bytes(reinterpret_cast<const char*>(view.data.data()), view.data.size());
      if (name == "bert.encoder.layer.0.output.adapters.task.adapter_up.bias") {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        std::memcpy(bytes.data(), &nan, sizeof nan);
      }
      ASSERT_OK(writer.Add(name, view.dtype, view.shape, std::as_bytes(std::span(bytes))));
    }
    f["adapter.safetensors"] = writer.Serialize();
    EXPECT_THAT(Import(f),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("layer 0 FFN adapter_up bias holds NaN")));
  }
}

}  // namespace
}  // namespace adapterd::model
