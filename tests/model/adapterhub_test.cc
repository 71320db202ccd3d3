// ParseAdapterHubConfig: the adapter_config.json files AdapterHub's
// `adapters` library writes for its two bottleneck presets map onto
// adapterd's placements, and every option adapterd cannot compute exactly
// is refused naming its field.
#include "server/model/adapterhub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "server/model/torch_archive.h"

namespace adapterd::model {
namespace {

using ::adapterd::testing::StatusIs;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

// What `save_adapter` writes for a preset: BnConfig.to_dict() (every field,
// defaults included) inside the file's metadata. `pfeiffer` selects
// SeqBnConfig, else DoubleSeqBnConfig (adapters 1.x).
json Saved(bool pfeiffer) {
  json config = {
      {"architecture", "bottleneck"},
      {"mh_adapter", !pfeiffer},
      {"output_adapter", true},
      {"reduction_factor", 16},
      {"non_linearity", pfeiffer ? "relu" : "swish"},
      {"original_ln_before", pfeiffer},
      {"original_ln_after", true},
      {"ln_before", false},
      {"ln_after", false},
      {"init_weights", "bert"},
      {"init_weights_seed", nullptr},
      {"is_parallel", false},
      {"scaling", 1.0},
      {"use_gating", false},
      {"residual_before_ln", true},
      {"adapter_residual_before_ln", false},
      {"inv_adapter", nullptr},
      {"inv_adapter_reduction_factor", nullptr},
      {"cross_adapter", false},
      {"leave_out", json::array()},
      {"dropout", 0.0},
      {"phm_layer", false},
      {"phm_dim", 4},
      {"factorized_phm_W", true},
      {"shared_W_phm", false},
      {"shared_phm_rule", true},
      {"factorized_phm_rule", false},
      {"phm_c_init", "normal"},
      {"phm_init_range", 0.0001},
      {"learn_phm", true},
      {"hypercomplex_nonlinearity", "glorot-uniform"},
      {"phm_rank", 1},
      {"phm_bias", true},
      {"stochastic_depth", 0.0},
  };
  return {{"config", config},
          {"hidden_size", 768},
          {"model_class", "BertAdapterModel"},
          {"model_name", "bert-base-uncased"},
          {"model_type", "bert"},
          {"name", "sst-2"},
          {"version", "adapters.1.1.0"}};
}

TEST(AdapterHubConfig, TheTwoPresetsMapOntoTheTwoPlacements) {
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig houlsby, ParseAdapterHubConfig(Saved(false).dump()));
  EXPECT_EQ(houlsby.placement, AdapterPlacement::kHoulsby);
  EXPECT_EQ(houlsby.activation, Activation::kSilu);
  EXPECT_EQ(houlsby.bottleneck_size, 48);  // 768 // 16
  EXPECT_EQ(houlsby.hidden_size, 768);
  EXPECT_EQ(houlsby.name, "sst-2");
  EXPECT_EQ(houlsby.model_name, "bert-base-uncased");
  EXPECT_TRUE(houlsby.leave_out.empty());
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig pfeiffer, ParseAdapterHubConfig(Saved(true).dump()));
  EXPECT_EQ(pfeiffer.placement, AdapterPlacement::kPfeiffer);
  EXPECT_EQ(pfeiffer.activation, Activation::kRelu);
  EXPECT_EQ(AdapterPlacementName(pfeiffer.placement), "pfeiffer");
}

TEST(AdapterHubConfig, BottleneckAndLeaveOutFollowTheLibrary) {
  json j = Saved(false);
  j["config"]["reduction_factor"] = 5.5;  // int(768 // 5.5) = 139
  j["config"]["leave_out"] = {11, 0, 11};
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig c, ParseAdapterHubConfig(j.dump()));
  EXPECT_EQ(c.bottleneck_size, 139);
  EXPECT_EQ(c.leave_out, (std::vector<int64_t>{0, 11}));
  // A per-layer mapping with one value everywhere is one bottleneck.
  j["config"]["reduction_factor"] = {{"default", 12}, {"3", 12}};
  ASSERT_OK_AND_ASSIGN(c, ParseAdapterHubConfig(j.dump()));
  EXPECT_EQ(c.bottleneck_size, 64);
  j["config"]["reduction_factor"] = {{"default", 16}, {"3", 8}};
  EXPECT_THAT(ParseAdapterHubConfig(j.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.reduction_factor: differs")));
}

TEST(AdapterHubConfig, ActivationsAndTheOldLibrarysRename) {
  struct Case {
    const char* name;
    bool versioned;
    Activation want;
  };
  for (const Case& k : {Case{"swish", true, Activation::kSilu}, Case{"SiLU", true, Activation::kSilu},
                        Case{"relu", true, Activation::kRelu}, Case{"tanh", true, Activation::kTanh},
                        Case{"gelu", true, Activation::kGelu}, Case{"gelu_new", true, Activation::kGeluNew},
                        Case{"gelu_pytorch_tanh", true, Activation::kGeluNew},
                        // Without "version": the library renames gelu -> gelu_new, gelu_orig -> gelu.
                        Case{"gelu", false, Activation::kGeluNew}, Case{"gelu_orig", false, Activation::kGelu}}) {
    json j = Saved(false);
    j["config"]["non_linearity"] = k.name;
    if (!k.versioned) j.erase("version");
    ASSERT_OK_AND_ASSIGN(AdapterHubConfig c, ParseAdapterHubConfig(j.dump()));
    EXPECT_EQ(c.activation, k.want) << k.name << (k.versioned ? "" : " (no version)");
  }
  json j = Saved(false);
  j["config"]["non_linearity"] = "leakyrelu";
  EXPECT_THAT(ParseAdapterHubConfig(j.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.non_linearity: 'leakyrelu'")));
}

TEST(AdapterHubConfig, EveryOptionThatChangesTheForwardIsRefusedByName) {
  struct Case {
    const char* field;
    json value;
  };
  const std::vector<Case> cases = {
      {"ln_before", true},
      {"ln_after", true},
      {"is_parallel", true},
      {"use_gating", true},
      {"phm_layer", true},
      {"cross_adapter", true},
      {"scaling", 2.0},
      {"scaling", "learned"},
      {"residual_before_ln", false},
      {"residual_before_ln", "post_add"},
      {"original_ln_after", false},
      {"architecture", "lora"},
      {"some_new_option", 1},
      {"original_ln_before", true},  // Houlsby's sites with Pfeiffer's LN
  };
  for (const Case& k : cases) {
    json j = Saved(false);
    j["config"][k.field] = k.value;
    EXPECT_THAT(ParseAdapterHubConfig(j.dump()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(std::string("config.") + k.field + ":")))
        << k.field << " = " << k.value.dump();
  }
  json attention_only = Saved(false);
  attention_only["config"]["output_adapter"] = false;
  EXPECT_THAT(ParseAdapterHubConfig(attention_only.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.mh_adapter:")));
  json missing = Saved(false);
  missing["config"].erase("reduction_factor");
  EXPECT_THAT(ParseAdapterHubConfig(missing.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.reduction_factor: is required")));
  json roberta = Saved(false);
  roberta["model_type"] = "roberta";
  EXPECT_THAT(ParseAdapterHubConfig(roberta.dump()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BERT encoders only")));
  EXPECT_THAT(ParseAdapterHubConfig("{not json").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A weights file's tensors as the library names them, for `config` over
// `layers` layers: views of one zero buffer, shapes as the config says.
class AdapterHubWeightsTest : public ::testing::Test {
 public:  // the cases below edit the fixture through lambdas
  AdapterHubConfig Config(bool pfeiffer) {
    json j = Saved(pfeiffer);
    j["hidden_size"] = 32;  // m = 32 // 16 = 2
    auto c = ParseAdapterHubConfig(j.dump());
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }
  void Add(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::kF32) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    tensors_[name] = TensorView{dtype, std::move(shape),
                                std::span<const std::byte>(zeros_.data(), static_cast<size_t>(n) * DTypeSize(dtype))};
  }
  // The four tensors of one site: `site` "attention.output" or "output",
  // `kind` "adapters" or an older library's spelling.
  void AddSite(const std::string& prefix, int layer, const std::string& site, const std::string& kind = "adapters") {
    const std::string base = prefix + "encoder.layer." + std::to_string(layer) + "." + site + "." + kind + ".sst-2.";
    Add(base + "adapter_down.0.weight", {2, 32});
    Add(base + "adapter_down.0.bias", {2});
    Add(base + "adapter_up.weight", {32, 2});
    Add(base + "adapter_up.bias", {32});
  }
  std::vector<std::byte> zeros_ = std::vector<std::byte>(4096);
  std::map<std::string, TensorView, std::less<>> tensors_;
};

TEST_F(AdapterHubWeightsTest, HoulsbyFindsBothSitesInEveryLayer) {
  for (int layer : {0, 1}) {
    AddSite("bert.", layer, "attention.output");
    AddSite("bert.", layer, "output");
  }
  ASSERT_OK_AND_ASSIGN(AdapterHubWeights w, FindAdapterHubWeights(tensors_, Config(false), 2));
  ASSERT_EQ(w.attention.size(), 2u);
  ASSERT_TRUE(w.attention[1].has_value());
  ASSERT_TRUE(w.ffn[0].has_value());
  EXPECT_EQ(w.ffn[0]->up.weight, &tensors_.at("bert.encoder.layer.0.output.adapters.sst-2.adapter_up.weight"));
  EXPECT_EQ(w.attention[1]->down.bias,
            &tensors_.at("bert.encoder.layer.1.attention.output.adapters.sst-2.adapter_down.0.bias"));
}

TEST_F(AdapterHubWeightsTest, PfeifferOldNamesAndLeaveOut) {
  AdapterHubConfig c = Config(true);
  c.leave_out = {1};
  AddSite("", 0, "output", "layer_text_task_adapters");  // adapter-transformers v1, no "bert." prefix
  AddSite("", 2, "output");
  ASSERT_OK_AND_ASSIGN(AdapterHubWeights w, FindAdapterHubWeights(tensors_, c, 3));
  EXPECT_TRUE(w.ffn[0].has_value());
  EXPECT_FALSE(w.ffn[1].has_value());
  EXPECT_TRUE(w.ffn[2].has_value());
  for (const auto& a : w.attention) EXPECT_FALSE(a.has_value());
}

TEST_F(AdapterHubWeightsTest, TheTensorSetMustBeExact) {
  const AdapterHubConfig houlsby = Config(false);
  const std::string down = "bert.encoder.layer.0.output.adapters.sst-2.adapter_down.0.weight";
  struct Case {
    std::function<void(AdapterHubWeightsTest&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[&](AdapterHubWeightsTest& t) { t.tensors_.erase(down); },
       "'bert.encoder.layer.0.output.adapters.sst-2.adapter_down.0.weight' is missing"},
      {[](AdapterHubWeightsTest& t) { t.Add("cls.predictions.bias", {32}); }, "'cls.predictions.bias' is not"},
      {[&](AdapterHubWeightsTest& t) {
         t.Add(down, {3, 32});
       },
       "has shape [3,32]; the config says [2,32]"},
      {[&](AdapterHubWeightsTest& t) {
         t.Add(down, {2, 32}, DType::kI64);
       },
       "has dtype I64"},
      {[](AdapterHubWeightsTest& t) { t.AddSite("bert.", 0, "output", "adapters.other"); },
       "belongs to another adapter"},
      {[](AdapterHubWeightsTest& t) { t.AddSite("bert.", 2, "output"); }, "is for layer 2 of an encoder of 2"},
      {[](AdapterHubWeightsTest& t) { t.AddSite("", 0, "output"); }, "appears twice"},
      {[](AdapterHubWeightsTest& t) {
         t.Add("bert.invertible_adapters.sst-2.F.0.weight", {2, 2});
       },
       "invertible adapter"},
  };
  for (const Case& k : cases) {
    tensors_.clear();
    for (int layer : {0, 1}) {
      AddSite("bert.", layer, "attention.output");
      AddSite("bert.", layer, "output");
    }
    ASSERT_OK(FindAdapterHubWeights(tensors_, houlsby, 2).status());
    k.edit(*this);
    EXPECT_THAT(FindAdapterHubWeights(tensors_, houlsby, 2).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(k.message)));
  }
  // Pfeiffer's placement has no attention adapter; leave_out's layers none.
  tensors_.clear();
  AddSite("bert.", 0, "output");
  AddSite("bert.", 0, "attention.output");
  EXPECT_THAT(FindAdapterHubWeights(tensors_, Config(true), 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Pfeiffer's has none")));
  AdapterHubConfig left = houlsby;
  left.leave_out = {0};
  EXPECT_THAT(FindAdapterHubWeights(tensors_, left, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("leave_out")));
}

TEST(AdapterHubConfig, InvertibleAdaptersAreRecordedNotRefused) {
  json j = Saved(true);
  j["config"]["inv_adapter"] = "nice";
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig c, ParseAdapterHubConfig(j.dump()));
  EXPECT_EQ(c.inv_adapter, "nice");
  j["config"].erase("inv_adapter");
  j["config"]["invertible_adapter"] = {{"block_type", "glow"}, {"reduction_factor", 2}};
  ASSERT_OK_AND_ASSIGN(c, ParseAdapterHubConfig(j.dump()));
  EXPECT_EQ(c.inv_adapter, "glow");
}

std::string FixtureDir(const std::string& name) {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/model/testdata/adapterhub/" + name;
}

// Element j of the generator's tensor k (make_fixtures.py): 0.01 j + k.
void ExpectRamp(const TensorView* v, int k) {
  ASSERT_NE(v, nullptr);
  std::vector<float> got(v->data.size() / sizeof(float));
  std::memcpy(got.data(), v->data.data(), v->data.size());
  for (size_t j = 0; j < got.size(); ++j) {
    EXPECT_FLOAT_EQ(got[j], static_cast<float>(j) * 0.01f + static_cast<float>(k))
        << "tensor " << k << " [" << j << "]";
  }
}

// Directories as the library writes them, torch.save'd by Debian's PyTorch
// (testdata/adapterhub/make_fixtures.py): config parsed, every tensor found
// where the library's names put it, with its values.
TEST(AdapterHubFiles, TheLibrarysDirectoriesParseAndEveryTensorIsFound) {
  ASSERT_OK_AND_ASSIGN(std::string houlsby_json, ReadFileToString(FixtureDir("houlsby/adapter_config.json")));
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig houlsby, ParseAdapterHubConfig(houlsby_json));
  EXPECT_EQ(houlsby.placement, AdapterPlacement::kHoulsby);
  EXPECT_EQ(houlsby.bottleneck_size, 2);
  EXPECT_EQ(houlsby.version, "adapters.1.1.0");
  ASSERT_OK_AND_ASSIGN(TorchArchive file, TorchArchive::Open(FixtureDir("houlsby/pytorch_adapter.bin")));
  ASSERT_OK_AND_ASSIGN(AdapterHubWeights w, FindAdapterHubWeights(file.tensors(), houlsby, 2));
  // Written in order: per layer, the attention site's four, then the FFN's.
  ExpectRamp(w.attention[0]->down.weight, 0);
  ExpectRamp(w.ffn[0]->up.bias, 7);
  ExpectRamp(w.attention[1]->up.weight, 10);
  ExpectRamp(w.ffn[1]->down.bias, 13);
  // An encoder of another depth is refused.
  EXPECT_THAT(FindAdapterHubWeights(file.tensors(), houlsby, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("of an encoder of 1")));

  ASSERT_OK_AND_ASSIGN(std::string pfeiffer_json, ReadFileToString(FixtureDir("pfeiffer/adapter_config.json")));
  ASSERT_OK_AND_ASSIGN(AdapterHubConfig pfeiffer, ParseAdapterHubConfig(pfeiffer_json));
  EXPECT_EQ(pfeiffer.placement, AdapterPlacement::kPfeiffer);
  EXPECT_EQ(pfeiffer.activation, Activation::kRelu);
  EXPECT_TRUE(pfeiffer.version.empty());
  EXPECT_EQ(pfeiffer.leave_out, (std::vector<int64_t>{1}));
  ASSERT_OK_AND_ASSIGN(TorchArchive pf_file, TorchArchive::Open(FixtureDir("pfeiffer/pytorch_adapter.bin")));
  ASSERT_OK_AND_ASSIGN(AdapterHubWeights pw, FindAdapterHubWeights(pf_file.tensors(), pfeiffer, 2));
  EXPECT_FALSE(pw.attention[0].has_value());
  EXPECT_FALSE(pw.ffn[1].has_value());
  ExpectRamp(pw.ffn[0]->down.weight, 0);
  ExpectRamp(pw.ffn[0]->up.bias, 3);
}

json SavedHead(const std::string& type, int64_t num_labels, int64_t layers) {
  json config = {{"head_type", type},   {"num_labels", num_labels}, {"layers", layers}, {"activation_function", "tanh"},
                 {"label2id", nullptr}, {"use_pooler", false},      {"bias", true},     {"dropout_prob", nullptr}};
  return {{"config", config},     {"hidden_size", 32}, {"model_class", "BertAdapterModel"}, {"model_name", "tiny-bert"},
          {"model_type", "bert"}, {"name", "task"},    {"version", "adapters.1.1.0"}};
}

TEST(AdapterHubHead, HeadTypesMapOntoTaskKinds) {
  struct Case {
    std::string type;
    int64_t labels;
    TaskKind kind;
    size_t names;
  };
  for (const Case& k : {Case{"classification", 3, TaskKind::kSequenceClassification, 3},
                        Case{"classification", 1, TaskKind::kRegression, 0},
                        Case{"multilabel_classification", 4, TaskKind::kMultiLabelClassification, 4},
                        Case{"tagging", 5, TaskKind::kTokenClassification, 5},
                        Case{"question_answering", 2, TaskKind::kExtractiveQa, 0}}) {
    ASSERT_OK_AND_ASSIGN(AdapterHubHead h, ParseAdapterHubHead(SavedHead(k.type, k.labels, 1).dump()));
    EXPECT_EQ(h.kind, k.kind) << k.type;
    EXPECT_EQ(h.labels.size(), k.names) << k.type;
    EXPECT_FALSE(h.activation.has_value()) << "one layer: no activation";
  }
  json named = SavedHead("classification", 2, 2);
  named["config"]["label2id"] = {{"positive", 1}, {"negative", 0}};
  named["config"]["use_pooler"] = true;
  ASSERT_OK_AND_ASSIGN(AdapterHubHead h, ParseAdapterHubHead(named.dump()));
  EXPECT_EQ(h.labels, (std::vector<std::string>{"negative", "positive"}));
  EXPECT_EQ(h.activation, Activation::kTanh);
  EXPECT_TRUE(h.use_pooler);
  ASSERT_OK_AND_ASSIGN(h, ParseAdapterHubHead(SavedHead("classification", 2, 1).dump()));
  EXPECT_EQ(h.labels, (std::vector<std::string>{"LABEL_0", "LABEL_1"}));
}

TEST(AdapterHubHead, WhatNoKindComputesIsRefusedByName) {
  struct Case {
    json head;
    std::string message;
  };
  json bad_ids = SavedHead("classification", 2, 1);
  bad_ids["config"]["label2id"] = {{"a", 0}, {"b", 0}};
  json extra = SavedHead("tagging", 3, 1);
  extra["config"]["shift_labels"] = true;
  for (const Case& k : {Case{SavedHead("multiple_choice", 2, 1), "config.head_type: 'multiple_choice'"},
                        Case{SavedHead("classification", 2, 3), "config.layers:"},
                        Case{SavedHead("question_answering", 3, 1), "config.num_labels:"},
                        Case{bad_ids, "config.label2id:"}, Case{extra, "config.shift_labels:"}}) {
    EXPECT_THAT(ParseAdapterHubHead(k.head.dump()).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(k.message)));
  }
}

TEST_F(AdapterHubWeightsTest, HeadWeightsSitAtTheLinearsIndices) {
  ASSERT_OK_AND_ASSIGN(AdapterHubHead two, ParseAdapterHubHead(SavedHead("classification", 3, 2).dump()));
  Add("heads.task.1.weight", {32, 32});
  Add("heads.task.1.bias", {32});
  Add("heads.task.4.weight", {3, 32});
  Add("heads.task.4.bias", {3});
  ASSERT_OK_AND_ASSIGN(AdapterHubHeadWeights w, FindAdapterHubHeadWeights(tensors_, two));
  EXPECT_EQ(w.out.weight, &tensors_.at("heads.task.4.weight"));
  EXPECT_EQ(w.dense.bias, &tensors_.at("heads.task.1.bias"));
  // Without an activation the last Linear is module 3.
  AdapterHubHead plain = two;
  plain.activation.reset();
  EXPECT_THAT(FindAdapterHubHeadWeights(tensors_, plain).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("is not one of the head's"), HasSubstr("heads.task.3.weight"))));
  // A missing bias, a wrong shape.
  tensors_.erase("heads.task.4.bias");
  EXPECT_THAT(FindAdapterHubHeadWeights(tensors_, two).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'heads.task.4.bias' is missing")));
  AdapterHubHead no_bias = two;
  no_bias.bias = false;
  EXPECT_OK(FindAdapterHubHeadWeights(tensors_, no_bias).status());
  Add("heads.task.4.weight", {2, 32});
  EXPECT_THAT(FindAdapterHubHeadWeights(tensors_, no_bias).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has shape [2,32]; the head config says [3,32]")));
}

TEST(AdapterHubFiles, APfStyleHeadParsesAndItsWeightsAreFound) {
  ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(FixtureDir("houlsby/head_config.json")));
  ASSERT_OK_AND_ASSIGN(AdapterHubHead head, ParseAdapterHubHead(text));
  EXPECT_EQ(head.kind, TaskKind::kSequenceClassification);
  EXPECT_EQ(head.labels, (std::vector<std::string>{"neg", "neu", "pos"}));
  EXPECT_EQ(head.layers, 2);
  EXPECT_FALSE(head.use_pooler);
  ASSERT_OK_AND_ASSIGN(TorchArchive file, TorchArchive::Open(FixtureDir("houlsby/pytorch_model_head.bin")));
  ASSERT_OK_AND_ASSIGN(AdapterHubHeadWeights w, FindAdapterHubHeadWeights(file.tensors(), head));
  ExpectRamp(w.dense.weight, 0);
  ExpectRamp(w.out.bias, 3);
}

}  // namespace
}  // namespace adapterd::model
