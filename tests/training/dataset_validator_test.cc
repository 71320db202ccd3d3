// Every rejection rule of ValidateDataset with its code and message, and the
// warnings.
#include "server/training/dataset_validator.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"

namespace adapterd::training {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<model::BertTokenizer> Tokenizer() {
  auto tok = model::BertTokenizer::FromTokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "the", "was"}, {});
  EXPECT_TRUE(tok.ok());
  return *std::move(tok);
}

std::vector<Example> Balanced(int n) {
  std::vector<Example> out;
  for (int i = 0; i < n; ++i) {
    out.push_back({absl::StrCat(i % 2 ? "good film " : "bad film ", i), "", i % 2 ? "pos" : "neg"});
  }
  return out;
}

TEST(DatasetValidator, AcceptsACleanDatasetAndSortsLabels) {
  auto tok = Tokenizer();
  ASSERT_OK_AND_ASSIGN(DatasetReport r, ValidateDataset(Balanced(20), {}, *tok, {.max_seq_len = 128}, {}));
  EXPECT_EQ(r.labels, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(r.label_counts.at("pos"), 10);
  EXPECT_EQ(r.num_train, 20);
  EXPECT_TRUE(r.warnings.empty());
}

TEST(DatasetValidator, EachRejectionRuleNamesTheExample) {
  auto tok = Tokenizer();
  struct Case {
    std::string what;
    std::function<void(std::vector<Example>&, std::vector<Example>&, DatasetLimits&)> edit;
    std::string message;
  };
  std::vector<Case> cases = {
      {"empty text", [](auto& t, auto&, auto&) { t[3].text = ""; }, "train example 3: text is empty"},
      {"invalid utf-8 text", [](auto& t, auto&, auto&) { t[4].text = "bad \xff byte"; },
       "train example 4: text is not valid UTF-8"},
      {"invalid utf-8 pair", [](auto& t, auto&, auto&) { t[5].text_pair = "\xc3"; },
       "train example 5: text_pair is not valid UTF-8"},
      {"missing label", [](auto& t, auto&, auto&) { t[6].label = ""; }, "train example 6: label is missing"},
      {"long label", [](auto& t, auto&, auto&) { t[7].label = std::string(200, 'x'); },
       "train example 7: label has 200 bytes; the limit is 128"},
      {"one label",
       [](auto& t, auto& v, auto&) {
         for (auto& e : t) e.label = "pos";
         for (auto& e : v) e.label = "pos";
       },
       "at least 2 distinct labels; found 1 ('pos')"},
      {"too few", [](auto& t, auto&, auto&) { t.resize(5); }, "5 training examples; at least 8"},
      {"too many", [](auto&, auto&, auto& l) { l.max_examples = 10; }, "the limit is 10"},
      {"too big", [](auto&, auto&, auto& l) { l.max_bytes = 100; }, "bytes of text; the limit is 100"},
      {"validation empty text", [](auto&, auto& v, auto&) { v[1].text = ""; }, "validation example 1: text is empty"},
      {"validation unknown label", [](auto&, auto& v, auto&) { v[2].label = "meh"; },
       "validation example 2: label 'meh' does not occur in the training data"},
  };
  for (const Case& c : cases) {
    std::vector<Example> train = Balanced(20), validation = Balanced(4);
    DatasetLimits limits;
    c.edit(train, validation, limits);
    EXPECT_THAT(ValidateDataset(train, validation, *tok, {.max_seq_len = 128}, limits),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.what;
  }
}

TEST(DatasetValidator, RetrainingRejectsConflictingLabelsAndKeepsTheTaskOrder) {
  auto tok = Tokenizer();
  const std::vector<std::string> existing = {"pos", "neg", "neutral"};
  ASSERT_OK_AND_ASSIGN(DatasetReport r, ValidateDataset(Balanced(20), {}, *tok, {.max_seq_len = 128}, {}, &existing));
  EXPECT_EQ(r.labels, existing);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("neutral"));
  std::vector<Example> train = Balanced(20);
  train[9].label = "angry";
  EXPECT_THAT(ValidateDataset(train, {}, *tok, {.max_seq_len = 128}, {}, &existing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("train example 9: label 'angry' conflicts with the task's labels")));
}

TEST(DatasetValidator, WarnsAboutTruncationImbalanceAndDuplicates) {
  auto tok = Tokenizer();
  std::vector<Example> train = Balanced(20);
  train[0].text = "the film was good the film was good the film was good";  // 12 pieces
  for (int i = 0; i < 30; ++i) train.push_back({absl::StrCat("more ", i), "", "pos"});
  std::vector<Example> validation = {train[1], {"fresh", "", "neg"}};
  ASSERT_OK_AND_ASSIGN(DatasetReport r,
                       ValidateDataset(train, validation, *tok, {.max_seq_len = 8}, {.imbalance_warning_ratio = 3}));
  EXPECT_EQ(r.truncated_examples, 1);
  EXPECT_EQ(r.train_validation_duplicates, 1);
  ASSERT_EQ(r.warnings.size(), 3u);
  EXPECT_THAT(r.warnings[0], HasSubstr("truncated"));
  EXPECT_THAT(r.warnings[1], HasSubstr("imbalanced"));
  EXPECT_THAT(r.warnings[2], HasSubstr("also appear in the training data"));
}

}  // namespace
}  // namespace adapterd::training
