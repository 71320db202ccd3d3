// What each task kind reads from an example and the rules it enforces
// (kind_rules.h), and ValidateDataset per kind: every bad dataset is
// INVALID_ARGUMENT naming the example and the rule it breaks.
#include "server/training/kind_examples.h"
#include "server/training/kind_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "absl/strings/str_cat.h"

#include "common/testing/status_matchers.h"
#include "server/model/tokenizer.h"
#include "server/training/dataset_validator.h"

namespace adapterd::training {
namespace {

using ::adapterd::testing::StatusIs;
using model::TaskKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

Example Qa(std::string question, std::string context, std::vector<AnswerSpan> answers) {
  Example e{std::move(question), std::move(context), ""};
  e.answers = std::move(answers);
  return e;
}

Example Tokens(std::vector<std::string> tokens, std::vector<std::string> tags) {
  Example e;
  e.tokens = std::move(tokens);
  e.tags = std::move(tags);
  return e;
}

Example Entities(std::string text, std::vector<EntitySpan> entities) {
  Example e{std::move(text), "", ""};
  e.entities = std::move(entities);
  return e;
}

TEST(KindExamples, ExtractiveQaAnswersMustBeAtTheirOffsetsInCodePoints) {
  // "é" and "中" are one code point each (2 and 3 bytes).
  const std::string context = "Café 中 opens at nine.";
  EXPECT_OK(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", context, {{"nine", 16}})));
  EXPECT_OK(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("Where?", context, {{"Café", 0}, {"中", 5}})));
  EXPECT_OK(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("Why?", context, {})));  // unanswerable
  EXPECT_THAT(
      CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", context, {{"nine", 15}})),
      StatusIs(kInvalid, HasSubstr("answers[0] 'nine' is not at answer_start 15 of the context (found ' nin')")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", context, {{"nine.", 18}})),
              StatusIs(kInvalid, HasSubstr("answers[0] 'nine.' is not at answer_start 18")));
  // The ends of answer_start's range are refused, never wrapped (UBSan
  // checks the arithmetic in the sanitizer run).
  for (int32_t start : {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max() - 3}) {
    EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", context, {{"nine", start}})),
                StatusIs(kInvalid, HasSubstr(absl::StrCat("is not at answer_start ", start))));
  }
  EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, Qa(" \t", context, {})),
              StatusIs(kInvalid, HasSubstr("the question (text) is blank")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", " \xe3\x80\x80\n", {})),
              StatusIs(kInvalid, HasSubstr("the context (text_pair) is blank")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, Qa("When?", "", {})),
              StatusIs(kInvalid, HasSubstr("context (text_pair) is blank")));
  Example labelled = Qa("When?", context, {});
  labelled.label = "x";
  EXPECT_THAT(CheckExampleForKind(TaskKind::kExtractiveQa, labelled),
              StatusIs(kInvalid, HasSubstr("a question, a context and answers")));
}

TEST(KindExamples, TagsMustBeIob2) {
  EXPECT_OK(CheckExampleForKind(TaskKind::kTokenClassification,
                                Tokens({"Ada", "Lovelace", "met", "Babbage"}, {"B-PER", "I-PER", "O", "B-PER"})));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Tokens({"Ada", "Lovelace"}, {"I-PER", "I-PER"})),
              StatusIs(kInvalid, HasSubstr("tags[0] 'I-PER' does not continue an entity of type PER")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Tokens({"Ada", "Paris"}, {"B-PER", "I-LOC"})),
              StatusIs(kInvalid, HasSubstr("tags[1] 'I-LOC' does not continue an entity of type LOC")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Tokens({"Ada"}, {"PER"})),
              StatusIs(kInvalid, HasSubstr("tags[0] 'PER' is not a BIO tag")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Tokens({"Ada"}, {"B-"})),
              StatusIs(kInvalid, HasSubstr("is not a BIO tag")));
}

TEST(KindExamples, EntitiesMustLieInsideTheTextApart) {
  const std::string text = "Zoë met Ada in Zürich";  // 21 code points
  EXPECT_OK(CheckExampleForKind(TaskKind::kTokenClassification,
                                Entities(text, {{15, 21, "LOC"}, {0, 3, "PER"}, {8, 11, "PER"}})));
  EXPECT_OK(CheckExampleForKind(TaskKind::kTokenClassification, Entities(text, {})));  // no entities: fine
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Entities(text, {{15, 22, "LOC"}})),
              StatusIs(kInvalid, HasSubstr("entities[0] ends at 22, past the text's 21 code points")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, Entities(text, {{8, 11, "PER"}, {4, 9, "X"}})),
              StatusIs(kInvalid, HasSubstr("entities[1] and entities[0] overlap")));
  Example both = Entities(text, {{0, 3, "PER"}});
  both.tokens = {"x"};
  both.tags = {"O"};
  EXPECT_THAT(CheckExampleForKind(TaskKind::kTokenClassification, both),
              StatusIs(kInvalid, HasSubstr("tokens and entities are both set")));
}

TEST(KindExamples, RegressionTargetsAreFiniteNumbers) {
  ASSERT_OK_AND_ASSIGN(double v, RegressionTargetOf({"t", "", "3.25"}));
  EXPECT_EQ(v, 3.25);
  ASSERT_OK_AND_ASSIGN(v, RegressionTargetOf({"t", "", "-1e3"}));
  EXPECT_EQ(v, -1000.0);
  ASSERT_OK_AND_ASSIGN(v, RegressionTargetOf({"t", "", ".5"}));
  EXPECT_EQ(v, 0.5);
  ASSERT_OK_AND_ASSIGN(v, RegressionTargetOf({"t", "", "+2."}));
  EXPECT_EQ(v, 2.0);
  EXPECT_THAT(RegressionTargetOf({"t", "", "nan"}), StatusIs(kInvalid, HasSubstr("label 'nan' is not a decimal")));
  EXPECT_THAT(RegressionTargetOf({"t", "", "inf"}), StatusIs(kInvalid, HasSubstr("is not a decimal number")));
  EXPECT_THAT(RegressionTargetOf({"t", "", "1e999"}), StatusIs(kInvalid));
  EXPECT_THAT(RegressionTargetOf({"t", "", "high"}), StatusIs(kInvalid, HasSubstr("label 'high' is not a decimal")));
  // What SimpleAtod alone would take and the API does not: hexadecimal, spaces around,
  // a lone sign or point, a bare exponent.
  for (const char* bad : {"0x10", " 3", "3 ", "-", ".", "1e", "e5", "1,5", "3.2.1"}) {
    EXPECT_THAT(RegressionTargetOf({"t", "", bad}), StatusIs(kInvalid, HasSubstr("is not a decimal number"))) << bad;
  }
  // Finite but so large that the targets' mean and variance would overflow:
  // refused at the range's edge, at N and past it.
  ASSERT_OK(RegressionTargetOf({"t", "", "1e15"}).status());
  ASSERT_OK(RegressionTargetOf({"t", "", "-1e15"}).status());
  EXPECT_THAT(RegressionTargetOf({"t", "", "1.0000001e15"}), StatusIs(kInvalid, HasSubstr("outside [-1e15, 1e15]")));
  EXPECT_THAT(RegressionTargetOf({"t", "", "1e308"}), StatusIs(kInvalid, HasSubstr("outside")));
  EXPECT_THAT(CheckExampleForKind(TaskKind::kRegression, {"t", "", ""}),
              StatusIs(kInvalid, HasSubstr("label is missing")));
}

TEST(KindExamples, MultiLabelReadsLabelsOrOneLabel) {
  Example e{"t", "", ""};
  e.labels = {"b", "a"};
  EXPECT_THAT(MultiLabelsOf(e), ElementsAre("b", "a"));
  EXPECT_THAT(MultiLabelsOf({"t", "", "a"}), ElementsAre("a"));
  EXPECT_OK(CheckExampleForKind(TaskKind::kMultiLabelClassification, {"t", "", ""}));  // no labels at all
  e.labels = {"a", "b", "a"};
  EXPECT_THAT(CheckExampleForKind(TaskKind::kMultiLabelClassification, e),
              StatusIs(kInvalid, HasSubstr("labels lists 'a' twice")));
}

TEST(KindExamples, LabelNamesAreWhatTheKindCounts) {
  EXPECT_THAT(LabelNamesOf(TaskKind::kSequenceClassification, {"t", "", "pos"}), ElementsAre("pos"));
  EXPECT_THAT(LabelNamesOf(TaskKind::kRegression, {"t", "", "1.5"}), ElementsAre());
  EXPECT_THAT(
      LabelNamesOf(TaskKind::kTokenClassification, Tokens({"a", "b", "c", "d"}, {"B-PER", "I-PER", "B-LOC", "B-PER"})),
      ElementsAre("LOC", "PER"));
  EXPECT_THAT(LabelNamesOf(TaskKind::kTokenClassification, Entities("Ada in Rome", {{7, 11, "LOC"}})),
              ElementsAre("LOC"));
}

TEST(KindExamples, EntitiesTagTheWordsTheyOverlap) {
  auto tok = model::BertTokenizer::FromTokens(
      {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ada", "met", "zoe", "in", "zurich", "##ich", "zur", "."}, {});
  ASSERT_OK(tok.status());
  // "Zoë" and "Zürich" keep their spans through accent stripping.
  ASSERT_OK_AND_ASSIGN(TaggedWords tagged,
                       TagWords(Entities("Zoë met Ada in Zürich.", {{0, 3, "PER"}, {15, 21, "LOC"}}), **tok));
  EXPECT_THAT(tagged.tags, ElementsAre("B-PER", "O", "O", "O", "B-LOC", "O"));
  EXPECT_EQ(tagged.pieces.word_spans[4], (model::Span{15, 21}));
  // A multi-word entity: B- then I-.
  ASSERT_OK_AND_ASSIGN(tagged, TagWords(Entities("met Zoë Ada in", {{4, 11, "PER"}}), **tok));
  EXPECT_THAT(tagged.tags, ElementsAre("O", "B-PER", "I-PER", "O"));
  // Over only a space: no word.
  EXPECT_THAT(TagWords(Entities("Ada  met", {{3, 5, "X"}}), **tok),
              StatusIs(kInvalid, HasSubstr("entities[0] covers no word of the text")));
  // Pre-split tokens keep their tags; the text is them joined by spaces.
  ASSERT_OK_AND_ASSIGN(tagged, TagWords(Tokens({"Zoë", "met", "Zürich."}, {"B-PER", "O", "B-LOC"}), **tok));
  EXPECT_EQ(tagged.text, "Zoë met Zürich.");
  EXPECT_THAT(tagged.tags, ElementsAre("B-PER", "O", "B-LOC"));
  EXPECT_EQ(tagged.pieces.word_spans[2], (model::Span{8, 15}));
  EXPECT_EQ(tagged.pieces.word_of_piece.back(), 2);  // "." stays in its word
}

// ValidateDataset per kind: the rule and the example are named.
class KindDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = model::BertTokenizer::FromTokens(
        {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ada", "met", "rome", "in", "who", "?", "where"}, {});
    ASSERT_OK(tok.status());
    tok_ = *std::move(tok);
  }
  absl::StatusOr<DatasetReport> Validate(TaskKind kind, const std::vector<Example>& train,
                                         const std::vector<Example>& validation = {}) {
    return ValidateDataset(train, validation, *tok_, {.max_seq_len = 16, .kind = kind, .max_question_len = 3},
                           {.min_examples = 2});
  }
  std::unique_ptr<model::BertTokenizer> tok_;
};

TEST_F(KindDatasetTest, TokenClassificationLabelsAreTheBioTagsOfTheEntityTypes) {
  ASSERT_OK_AND_ASSIGN(DatasetReport r, Validate(TaskKind::kTokenClassification,
                                                 {Entities("Ada met Ada in Rome", {{0, 3, "PER"}, {15, 19, "LOC"}}),
                                                  Tokens({"Ada", "met"}, {"B-PER", "O"}), Entities("met in", {})}));
  EXPECT_THAT(r.labels, ElementsAre("O", "B-LOC", "I-LOC", "B-PER", "I-PER"));
  EXPECT_EQ(r.label_counts["PER"], 2);
  EXPECT_THAT(Validate(TaskKind::kTokenClassification, {Entities("Ada met", {}), Entities("in Rome", {})}),
              StatusIs(kInvalid, HasSubstr("no entities")));
  EXPECT_THAT(Validate(TaskKind::kTokenClassification,
                       {Entities("Ada met", {{0, 3, "PER"}}), Tokens({"Ada", "met"}, {"O", "I-PER"})}),
              StatusIs(kInvalid, HasSubstr("train example 1: tags[1] 'I-PER' does not continue")));
  EXPECT_THAT(Validate(TaskKind::kTokenClassification,
                       {Entities("Ada met", {{0, 3, "PER"}}), Entities("Ada  met", {{3, 5, "PER"}})}),
              StatusIs(kInvalid, HasSubstr("train example 1: entities[0] covers no word")));
  // Retraining: the existing tags bound the entity types.
  const std::vector<std::string> existing = {"O", "B-PER", "I-PER"};
  EXPECT_THAT(
      ValidateDataset({Entities("Ada in Rome", {{7, 11, "LOC"}}), Entities("Ada", {{0, 3, "PER"}})}, {}, *tok_,
                      {.max_seq_len = 16, .kind = TaskKind::kTokenClassification}, {.min_examples = 2}, &existing),
      StatusIs(kInvalid, HasSubstr("train example 0: entity type 'LOC' conflicts with the task's tags")));
}

TEST_F(KindDatasetTest, ExtractiveQaNamesTheExampleAndCountsCutQuestions) {
  ASSERT_OK_AND_ASSIGN(DatasetReport r,
                       Validate(TaskKind::kExtractiveQa,
                                {Qa("who met ada ?", "Ada met Rome", {{"Rome", 8}}), Qa("where", "Ada met Rome", {})}));
  EXPECT_TRUE(r.labels.empty());
  EXPECT_EQ(r.cut_questions, 1);  // 4 tokens; max_question_len 3
  EXPECT_THAT(r.warnings, ::testing::Contains(HasSubstr("1 of 2 questions are longer than max_question_len 3")));
  EXPECT_THAT(Validate(TaskKind::kExtractiveQa,
                       {Qa("who", "Ada met Rome", {{"Rome", 8}}), Qa("who", "Ada met Rome", {{"Rome", 7}})}),
              StatusIs(kInvalid, HasSubstr("train example 1: answers[0] 'Rome' is not at answer_start 7")));
  EXPECT_THAT(Validate(TaskKind::kExtractiveQa, {Qa("who", "Ada met Rome", {}), Qa("", "Ada", {})}),
              StatusIs(kInvalid, HasSubstr("train example 1: text is empty")));
  EXPECT_THAT(Validate(TaskKind::kExtractiveQa, {Qa("who", "Ada met Rome", {})}, {Qa("who", "   ", {})}),
              StatusIs(kInvalid, HasSubstr("validation example 0: the context (text_pair) is blank")));
}

TEST_F(KindDatasetTest, RegressionAndMultiLabelRules) {
  ASSERT_OK_AND_ASSIGN(DatasetReport r, Validate(TaskKind::kRegression, {{"ada", "", "1"}, {"rome", "", "2.5"}}));
  EXPECT_TRUE(r.labels.empty());
  EXPECT_THAT(Validate(TaskKind::kRegression, {{"ada", "", "1"}, {"rome", "", "NaN"}}),
              StatusIs(kInvalid, HasSubstr("train example 1: label 'NaN' is not a decimal number")));
  Example ab{"ada", "", ""}, b{"rome", "", ""}, c{"met", "", ""};
  ab.labels = {"a", "b"};
  b.labels = {"b"};
  c.labels = {"c"};
  ASSERT_OK_AND_ASSIGN(r, Validate(TaskKind::kMultiLabelClassification, {ab, b}));
  EXPECT_THAT(r.labels, ElementsAre("a", "b"));
  EXPECT_EQ(r.label_counts["b"], 2);
  EXPECT_THAT(Validate(TaskKind::kMultiLabelClassification, {ab, b}, {c}),
              StatusIs(kInvalid, HasSubstr("validation example 0: label 'c' does not occur in the training data")));
}

}  // namespace
}  // namespace adapterd::training
