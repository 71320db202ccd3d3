// Dataset files for `adapterctl datasets upload` / `train`: CSV, JSON Lines
// and SQuAD JSON for every task kind, format detection, and errors that name
// the file and line (or the path inside a SQuAD file).
#include "common/dataset_file.h"
#include "common/json_depth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;
using ::adapterd::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<std::vector<v1::Example>> Csv(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kCsv, "d.csv");
}
absl::StatusOr<std::vector<v1::Example>> Jsonl(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kJsonl, "d.jsonl");
}
absl::StatusOr<std::vector<v1::Example>> Squad(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kSquad, "s.json");
}

// text|text_pair|label of every example, for compact comparisons.
std::vector<std::string> Rows(const std::vector<v1::Example>& examples) {
  std::vector<std::string> rows;
  for (const auto& e : examples) rows.push_back(e.text() + "|" + e.text_pair() + "|" + e.label());
  return rows;
}

// "start-end:label" of every entity.
std::vector<std::string> Entities(const v1::Example& example) {
  std::vector<std::string> out;
  for (const auto& e : example.entities()) out.push_back(absl::StrCat(e.start(), "-", e.end(), ":", e.label()));
  return out;
}

// "answer_start:text" of every answer.
std::vector<std::string> Answers(const v1::Example& example) {
  std::vector<std::string> out;
  for (const auto& a : example.answers()) out.push_back(absl::StrCat(a.answer_start(), ":", a.text()));
  return out;
}

// A hand-written SQuAD 2.0 file as published (one answerable question with a
// repeated answer, as the dev set has; one impossible question with
// plausible answers; a non-ASCII context; members the reader ignores).
constexpr char kSquadV2[] = R"({"version": "v2.0", "data": [
 {"title": "Normans", "paragraphs": [
  {"context": "The Normans gave their name to Normandy, a region in France.",
   "qas": [
    {"question": "In what country is Normandy located?", "id": "q1",
     "answers": [{"text": "France", "answer_start": 53}, {"text": "France", "answer_start": 53}],
     "is_impossible": false},
    {"plausible_answers": [{"text": "The Normans", "answer_start": 0}],
     "question": "Who gave their name to Paris?", "id": "q2", "answers": [], "is_impossible": true}]}]},
 {"title": "Caf\u00e9", "paragraphs": [
  {"context": "Caf\u00e9 au lait is coffee with hot milk.",
   "qas": [{"question": "What is it made with?", "id": "q3",
            "answers": [{"text": "hot milk", "answer_start": 28}], "is_impossible": false}]},
  {"context": "A paragraph without questions.", "qas": []}]}]}
)";

// --- CSV -------------------------------------------------------------------------

TEST(DatasetFile, CsvTextLabelWithHeader) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("text,label\nhello world,greeting\nbye,farewell\n"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("hello world||greeting", "bye||farewell"));
}

TEST(DatasetFile, CsvQuotedCommasDoubledQuotesAndEmbeddedNewlines) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("text,label\n"
                                    "\"with, comma\",b\n"
                                    "\"say \"\"hi\"\"\",a\n"
                                    "\"two\nlines\",b\n"
                                    "\"crlf\r\ninside\",\"quoted, label\"\n"
                                    "\"\"\"\",q\n"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("with, comma||b", "say \"hi\"||a", "two\nlines||b",
                                               "crlf\r\ninside||quoted, label", "\"||q"));
}

TEST(DatasetFile, CsvCrlfBomBlankLinesAndNoFinalNewline) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("\xEF\xBB\xBFtext,label\r\n"
                                    "plain,a\r\n"
                                    "\r\n"
                                    "\n"
                                    "last,b"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("plain||a", "last||b"));
  // A lone CR that ends the file ends the record; it is not part of the label.
  ASSERT_OK_AND_ASSIGN(auto cr, Csv("text,label\r\nx,y\r"));
  EXPECT_THAT(Rows(cr), ::testing::ElementsAre("x||y"));
}

TEST(DatasetFile, CsvTextPairInAnyColumnOrder) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("text,text_pair,label\na,b,entail\n"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("a|b|entail"));
  ASSERT_OK_AND_ASSIGN(auto ex2, Csv("label, text_pair ,text\nyes,second,first\n"));
  EXPECT_THAT(Rows(ex2), ::testing::ElementsAre("first|second|yes"));
}

TEST(DatasetFile, CsvFieldsKeepTheirSpacesAndUtf8) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("text,label\n  caf\xC3\xA9 ,x\n"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("  caf\xC3\xA9 ||x"));
}

TEST(DatasetFile, CsvLabelsColumnSplitsAtBarsAndTrimsSpaces) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("text,labels\n"
                                    "a,\" sports | news \"\n"
                                    "b,\n"
                                    "c,   \n"
                                    "d,solo\n"
                                    "e,x|2|\ty\n"));
  ASSERT_EQ(ex.size(), 5u);
  EXPECT_THAT(ex[0].labels(), ElementsAre("sports", "news"));
  EXPECT_THAT(ex[1].labels(), IsEmpty());  // an empty cell: no labels
  EXPECT_THAT(ex[2].labels(), IsEmpty());
  EXPECT_THAT(ex[3].labels(), ElementsAre("solo"));
  EXPECT_THAT(ex[4].labels(), ElementsAre("x", "2", "y"));
  for (const auto& e : ex) EXPECT_EQ(e.label(), "") << e.text();
  EXPECT_THAT(Rows(ex), ElementsAre("a||", "b||", "c||", "d||", "e||"));

  // With label and text_pair columns too: each column goes to its field.
  ASSERT_OK_AND_ASSIGN(auto both, Csv("labels,text_pair,text,label\na|b,pair,first,3.25\n"));
  EXPECT_THAT(Rows(both), ElementsAre("first|pair|3.25"));
  EXPECT_THAT(both[0].labels(), ElementsAre("a", "b"));
}

// --- JSON Lines ----------------------------------------------------------------------

TEST(DatasetFile, JsonLinesWithAndWithoutTextPair) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("\xEF\xBB\xBF{\"text\":\"a b\",\"label\":\"x\",\"other\":1}\r\n"
                                      "\n"
                                      "   \n"
                                      "{\"text\":\"c\",\"text_pair\":\"d\",\"label\":\"y\"}\n"
                                      "{\"text\":\"e\",\"text_pair\":null,\"label\":\"x\"}\n"
                                      "{\"text\":\"quote \\\" and \\n newline\",\"label\":\"z\"}"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("a b||x", "c|d|y", "e||x", "quote \" and \n newline||z"));
}

TEST(DatasetFile, JsonIntegerLabelsBecomeDecimalStrings) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"text\":\"a\",\"label\":1}\n{\"text\":\"b\",\"label\":-2}\n"));
  EXPECT_THAT(Rows(ex), ::testing::ElementsAre("a||1", "b||-2"));
}

TEST(DatasetFile, JsonNumberLabelsRoundTrip) {
  // Regression targets: non-integer numbers are written so that they read
  // back as the same double.
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"text\":\"a\",\"label\":3.25}\n"
                                      "{\"text\":\"b\",\"label\":-0.1}\n"
                                      "{\"text\":\"c\",\"label\":1e20}\n"
                                      "{\"text\":\"d\",\"label\":2.0}\n"
                                      "{\"text\":\"e\",\"label\":0.30000000000000004}\n"
                                      "{\"text\":\"f\",\"label\":\"4.5\"}\n"));
  EXPECT_THAT(Rows(ex), ElementsAre("a||3.25", "b||-0.1", "c||1e+20", "d||2.0", "e||0.30000000000000004", "f||4.5"));
  const double want[] = {3.25, -0.1, 1e20, 2.0, 0.30000000000000004, 4.5};
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(std::strtod(ex[i].label().c_str(), nullptr), want[i]) << i;
}

TEST(DatasetFile, JsonMultiLabelArrays) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"text\":\"a\",\"labels\":[\"sports\",\"news\"]}\n"
                                      "{\"text\":\"b\",\"labels\":[]}\n"
                                      "{\"text\":\"c\",\"labels\":[1,\"x\",2.5]}\n"
                                      "{\"text\":\"d\",\"labels\":[\"y\"],\"label\":\"z\"}\n"));
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_THAT(ex[0].labels(), ElementsAre("sports", "news"));
  EXPECT_THAT(ex[1].labels(), IsEmpty());  // none is allowed
  EXPECT_THAT(ex[2].labels(), ElementsAre("1", "x", "2.5"));
  EXPECT_THAT(ex[3].labels(), ElementsAre("y"));
  EXPECT_THAT(Rows(ex), ElementsAre("a||", "b||", "c||", "d||z"));
}

TEST(DatasetFile, JsonTokensAndTags) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"tokens\":[\"J\u00f6rg\",\"lives\",\"in\",\"Berlin\"],"
                                      "\"tags\":[\"B-PER\",\"O\",\"O\",\"B-LOC\"],\"id\":\"s1\"}\n"
                                      "{\"text\":\"\",\"tokens\":[\"Hi\"],\"tags\":[\"O\"]}\n"
                                      "{\"text_pair\":null,\"tokens\":[\"x\"],\"tags\":[\"O\"]}\n"));
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_THAT(ex[0].tokens(), ElementsAre("J\xC3\xB6rg", "lives", "in", "Berlin"));
  EXPECT_THAT(ex[0].tags(), ElementsAre("B-PER", "O", "O", "B-LOC"));
  EXPECT_EQ(ex[0].text(), "");
  EXPECT_EQ(ex[0].label(), "");
  EXPECT_THAT(ex[1].tokens(), ElementsAre("Hi"));
  EXPECT_THAT(ex[1].tags(), ElementsAre("O"));
  EXPECT_THAT(ex[2].tags(), ElementsAre("O"));
  EXPECT_THAT(ex[2].entities(), IsEmpty());
}

TEST(DatasetFile, JsonEntitiesOverText) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"text\":\"J\u00f6rg lives in New York\",\"entities\":["
                                      "{\"start\":0,\"end\":4,\"label\":\"PER\"},"
                                      "{\"label\":\"LOC\",\"end\":22,\"start\":14,\"text\":\"New York\"}]}\n"
                                      "{\"text\":\"nothing here\",\"entities\":[]}\n"));
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].text(), "J\xC3\xB6rg lives in New York");
  EXPECT_THAT(Entities(ex[0]), ElementsAre("0-4:PER", "14-22:LOC"));
  // An empty array is a target: a sentence without entities.
  EXPECT_EQ(ex[1].text(), "nothing here");
  EXPECT_THAT(Entities(ex[1]), IsEmpty());
}

TEST(DatasetFile, JsonQuestionsContextsAndAnswers) {
  ASSERT_OK_AND_ASSIGN(
      auto ex,
      Jsonl("{\"id\":\"1\",\"question\":\"Where?\",\"context\":\"In Paris, France.\","
            "\"answers\":[{\"text\":\"Paris\",\"answer_start\":3},{\"text\":\"Paris, France\",\"answer_start\":3}]}\n"
            "{\"question\":\"Who?\",\"context\":\"Nobody knows.\",\"answers\":[]}\n"
            "{\"question\":\"When?\",\"context\":\"Later.\",\"is_impossible\":true,\"answers\":[],"
            "\"plausible_answers\":[{\"text\":\"Later\",\"answer_start\":0}]}\n"
            "{\"question\":\"How?\",\"context\":\"Slowly.\",\"is_impossible\":true}\n"
            "{\"text\":\"What?\",\"text_pair\":\"This.\",\"answers\":[{\"text\":\"This\",\"answer_start\":0}]}\n"));
  ASSERT_EQ(ex.size(), 5u);
  EXPECT_THAT(Rows(ex), ElementsAre("Where?|In Paris, France.|", "Who?|Nobody knows.|", "When?|Later.|",
                                    "How?|Slowly.|", "What?|This.|"));
  EXPECT_THAT(Answers(ex[0]), ElementsAre("3:Paris", "3:Paris, France"));
  EXPECT_THAT(Answers(ex[1]), IsEmpty());  // unanswerable
  EXPECT_THAT(Answers(ex[2]), IsEmpty());  // plausible_answers are not answers
  EXPECT_THAT(Answers(ex[3]), IsEmpty());
  EXPECT_THAT(Answers(ex[4]), ElementsAre("0:This"));
}

// --- Errors --------------------------------------------------------------------------

struct ErrorCase {
  const char* what;
  absl::StatusOr<std::vector<v1::Example>> result;
  const char* line;     // "d.csv: line N: "
  const char* message;  // and this explanation
};

void ExpectErrors(const std::vector<ErrorCase>& cases) {
  for (const ErrorCase& c : cases) {
    EXPECT_THAT(c.result, StatusIs(absl::StatusCode::kInvalidArgument,
                                   ::testing::AllOf(::testing::StartsWith(c.line), HasSubstr(c.message))))
        << c.what;
  }
}

TEST(DatasetFile, CsvErrorsNameTheLine) {
  ExpectErrors({
      {"missing header (data on line 1)", Csv("hello,positive\nbye,negative\n"),
       "d.csv: line 1: ", "unknown column 'hello'"},
      {"header without label", Csv("text,category\na,b\n"), "d.csv: line 1: ", "unknown column 'category'"},
      {"header without text", Csv("\n\nlabel\nx\n"), "d.csv: line 3: ", "no 'text' column"},
      {"duplicate column", Csv("text,label,text\na,b,c\n"), "d.csv: line 1: ", "duplicate column 'text'"},
      {"too few columns", Csv("text,label\na,b\nc\n"), "d.csv: line 3: ", "expected 2 fields (text,label), got 1"},
      {"too many columns", Csv("text,label\na,b,c\n"), "d.csv: line 2: ", "got 3"},
      {"column count after a multi-line field", Csv("text,label\n\"a\nb\nc\",x\nd,e,f\n"), "d.csv: line 5: ", "got 3"},
      {"empty text", Csv("text,label\na,b\n,b\n"), "d.csv: line 3: ", "empty text"},
      {"empty quoted text", Csv("text,label\n\"\",b\n"), "d.csv: line 2: ", "empty text"},
      {"missing label", Csv("text,label\na,b\nhello,\n"), "d.csv: line 3: ", "empty label"},
      {"missing label after a multi-line text", Csv("text,label\na,b\n\"x\ny\",\n"), "d.csv: line 3: ", "empty label"},
      {"unterminated quote", Csv("text,label\na,b\nc,d\n\"open,x\nmore\n"),
       "d.csv: line 4: ", "unterminated quoted field"},
      {"quote inside an unquoted field", Csv("text,label\nsay \"hi\",x\n"),
       "d.csv: line 2: ", "quote inside an unquoted field"},
      {"text after a closing quote", Csv("text,label\n\"a\"b,x\n"), "d.csv: line 2: ", "after a closing quote"},
      {"invalid UTF-8", Csv("text,label\nok,a\n\xff,b\n"), "d.csv: line 3: ", "invalid UTF-8 in text"},
  });
}

TEST(DatasetFile, JsonLinesErrorsNameTheLine) {
  ExpectErrors({
      {"bad JSON", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{nope\n"), "d.jsonl: line 2: ", "invalid JSON"},
      {"truncated object", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n\n{\"text\":\"a\",\n"),
       "d.jsonl: line 3: ", "invalid JSON"},
      {"not an object", Jsonl("[\"a\",\"b\"]\n"), "d.jsonl: line 1: ", "expected a JSON object, got array"},
      {"text of the wrong type", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n\n{\"text\":5,\"label\":\"b\"}\n"),
       "d.jsonl: line 3: ", "\"text\" must be a string, got number"},
      {"label of the wrong type", Jsonl("{\"text\":\"a\",\"label\":true}\n"),
       "d.jsonl: line 1: ", "\"label\" must be a string or a number, got boolean"},
      {"null label", Jsonl("{\"text\":\"a\",\"label\":null}\n"), "d.jsonl: line 1: ", "got null"},
      {"text_pair of the wrong type", Jsonl("{\"text\":\"a\",\"text_pair\":[1],\"label\":\"b\"}\n"),
       "d.jsonl: line 1: ", "\"text_pair\" must be a string, got array"},
      {"missing label", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{\"text\":\"a\"}\n"),
       "d.jsonl: line 2: ", "missing key \"label\""},
      {"missing target, with the members that would do", Jsonl("{\"text\":\"a\",\"text_pair\":\"b\",\"id\":7}\n"),
       "d.jsonl: line 1: ",
       "missing key \"label\" (every line needs a target: \"label\", \"labels\", \"tokens\" and \"tags\", "
       "\"entities\", or \"question\", \"context\" and \"answers\")"},
      {"missing text", Jsonl("{\"label\":\"a\"}\n"), "d.jsonl: line 1: ", "missing key \"text\""},
      {"null text", Jsonl("{\"text\":null,\"label\":\"a\"}\n"), "d.jsonl: line 1: ", "got null"},
      {"empty text", Jsonl("{\"text\":\"\",\"label\":\"a\"}\n"), "d.jsonl: line 1: ", "empty text"},
      {"empty label", Jsonl("{\"text\":\"t\",\"label\":\"\"}\n"), "d.jsonl: line 1: ", "empty label"},
      {"invalid UTF-8", Jsonl("{\"text\":\"\xc3\",\"label\":\"a\"}\n"), "d.jsonl: line 1: ", "invalid UTF-8"},
      // nlohmann throws out_of_range (not parse_error) for these.
      {"number too large for a double in an ignored field",
       Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{\"text\":\"a\",\"label\":\"x\",\"n\":1e400}\n"),
       "d.jsonl: line 2: ", "invalid JSON: number overflow parsing '1e400'"},
      {"number too large as the label", Jsonl("{\"text\":\"a\",\"label\":-1e999}\n"),
       "d.jsonl: line 1: ", "number overflow"},
  });
}

TEST(DatasetFile, CsvLabelsErrors) {
  ExpectErrors({
      {"neither label nor labels", Csv("text,text_pair\na,b\n"),
       "d.csv: line 1: ", "the header has no 'label' or 'labels' column"},
      {"an empty label between bars", Csv("text,labels\na,x\nb,x| |y\n"),
       "d.csv: line 3: ", "empty label in labels 'x| |y'"},
      {"a trailing bar", Csv("text,labels\na,x|\n"), "d.csv: line 2: ", "empty label in labels 'x|'"},
      {"an empty label cell beside labels", Csv("text,label,labels\na,,x\n"), "d.csv: line 2: ", "empty label"},
      {"invalid UTF-8 in labels", Csv("text,labels\na,ok|\xff\n"), "d.csv: line 2: ", "invalid UTF-8 in labels[1]"},
      {"a JSON-only column", Csv("tokens,tags\na,O\n"), "d.csv: line 1: ",
       "unknown column 'tokens' in the header (expected text, label and/or labels, and optionally text_pair; token "
       "classification and extractive QA datasets must be JSON Lines or SQuAD JSON)"},
  });
}

TEST(DatasetFile, JsonTaskMemberErrors) {
  ExpectErrors({
      // labels
      {"non-string label in labels", Jsonl("{\"text\":\"a\",\"labels\":[\"x\",true]}\n"),
       "d.jsonl: line 1: ", "labels[1] must be a string or a number, got boolean"},
      {"labels as a string", Jsonl("{\"text\":\"a\",\"labels\":\"x|y\"}\n"),
       "d.jsonl: line 1: ", "\"labels\" must be an array of strings or numbers, got string"},
      {"an empty label in labels", Jsonl("{\"text\":\"a\",\"labels\":[\"\"]}\n"),
       "d.jsonl: line 1: ", "labels[0] is empty"},
      // tokens and tags
      {"tokens without tags", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{\"tokens\":[\"a\"]}\n"),
       "d.jsonl: line 2: ", "\"tokens\" without \"tags\""},
      {"tags without tokens", Jsonl("{\"text\":\"a\",\"tags\":[\"O\"]}\n"),
       "d.jsonl: line 1: ", "\"tags\" without \"tokens\""},
      {"length mismatch", Jsonl("{\"tokens\":[\"a\",\"b\",\"c\"],\"tags\":[\"O\",\"O\"]}\n"),
       "d.jsonl: line 1: ", "\"tokens\" has 3 elements but \"tags\" has 2"},
      {"no tokens", Jsonl("{\"tokens\":[],\"tags\":[]}\n"), "d.jsonl: line 1: ", "\"tokens\" is empty"},
      {"a number as a token", Jsonl("{\"tokens\":[\"a\",5],\"tags\":[\"O\",\"O\"]}\n"),
       "d.jsonl: line 1: ", "tokens[1] must be a string, got number"},
      {"an empty token", Jsonl("{\"tokens\":[\"\"],\"tags\":[\"O\"]}\n"), "d.jsonl: line 1: ", "tokens[0] is empty"},
      {"an empty tag", Jsonl("{\"tokens\":[\"a\"],\"tags\":[\"\"]}\n"), "d.jsonl: line 1: ", "tags[0] is empty"},
      {"null text with tokens", Jsonl("{\"text\":null,\"tokens\":[\"a\"],\"tags\":[\"O\"]}\n"),
       "d.jsonl: line 1: ", "\"text\" must be a string, got null"},
      {"text with tokens", Jsonl("{\"text\":\"a\",\"tokens\":[\"a\"],\"tags\":[\"O\"]}\n"),
       "d.jsonl: line 1: ", "\"text\" must be absent or empty with \"tokens\""},
      {"entities with tokens", Jsonl("{\"tokens\":[\"a\"],\"tags\":[\"O\"],\"entities\":[]}\n"),
       "d.jsonl: line 1: ", "\"entities\" are offsets into \"text\""},
      // entities
      {"entities not an array", Jsonl("{\"text\":\"a\",\"entities\":{}}\n"),
       "d.jsonl: line 1: ", "\"entities\" must be an array of {\"start\", \"end\", \"label\"} objects, got object"},
      {"an entity that is not an object", Jsonl("{\"text\":\"a\",\"entities\":[[0,1,\"X\"]]}\n"),
       "d.jsonl: line 1: ", "entities[0] must be an object"},
      {"start as a string", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":\"0\",\"end\":1,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[0].start must be an integer, got string"},
      {"fractional end",
       Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":0,\"end\":1,\"label\":\"X\"},"
             "{\"start\":0,\"end\":1.5,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[1].end must be an integer, got number 1.5"},
      {"negative start", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":-3,\"end\":1,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[0].start is negative (-3)"},
      {"end past int32", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":0,\"end\":2147483648,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[0].end is too large (2147483648"},
      {"start not before end", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":1,\"end\":1,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[0]: start 1 is not before end 1"},
      {"missing end", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":0,\"label\":\"X\"}]}\n"),
       "d.jsonl: line 1: ", "entities[0].end is missing"},
      {"missing entity label", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":0,\"end\":1}]}\n"),
       "d.jsonl: line 1: ", "entities[0].label is missing"},
      {"entity label not a string", Jsonl("{\"text\":\"ab\",\"entities\":[{\"start\":0,\"end\":1,\"label\":3}]}\n"),
       "d.jsonl: line 1: ", "entities[0].label must be a string, got number"},
      {"entities without text", Jsonl("{\"entities\":[]}\n"), "d.jsonl: line 1: ", "missing key \"text\""},
      // questions
      {"question with text", Jsonl("{\"question\":\"q\",\"context\":\"c\",\"text\":\"t\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "\"question\" and \"context\" (extractive QA) cannot be combined with \"text\""},
      {"context with text_pair", Jsonl("{\"context\":\"c\",\"text_pair\":\"t\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "cannot be combined with \"text\" or \"text_pair\""},
      {"question without context", Jsonl("{\"question\":\"q\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "missing key \"context\""},
      {"context without question", Jsonl("{\"context\":\"c\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "missing key \"question\""},
      {"empty question", Jsonl("{\"question\":\"\",\"context\":\"c\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "empty question"},
      {"empty context", Jsonl("{\"question\":\"q\",\"context\":\"\",\"answers\":[]}\n"),
       "d.jsonl: line 1: ", "empty context"},
      {"question without answers", Jsonl("{\"question\":\"q\",\"context\":\"c\"}\n"),
       "d.jsonl: line 1: ", "missing key \"answers\""},
      {"answers not an array", Jsonl("{\"question\":\"q\",\"context\":\"c\",\"answers\":{\"text\":[]}}\n"),
       "d.jsonl: line 1: ", "\"answers\" must be an array of {\"text\", \"answer_start\"} objects, got object"},
      {"negative answer_start",
       Jsonl("{\"question\":\"q\",\"context\":\"c\",\"answers\":[{\"text\":\"c\",\"answer_start\":-1}]}\n"),
       "d.jsonl: line 1: ", "answers[0].answer_start is negative (-1)"},
      {"answer without text", Jsonl("{\"question\":\"q\",\"context\":\"c\",\"answers\":[{\"answer_start\":0}]}\n"),
       "d.jsonl: line 1: ", "answers[0].text is missing"},
      {"impossible with answers",
       Jsonl("{\"question\":\"q\",\"context\":\"c\",\"is_impossible\":true,"
             "\"answers\":[{\"text\":\"c\",\"answer_start\":0}]}\n"),
       "d.jsonl: line 1: ", "\"is_impossible\" is true but \"answers\" is not empty"},
      {"possible without answers", Jsonl("{\"question\":\"q\",\"context\":\"c\",\"is_impossible\":false}\n"),
       "d.jsonl: line 1: ", "\"is_impossible\" is false but there are no answers"},
      {"is_impossible as a string", Jsonl("{\"question\":\"q\",\"context\":\"c\",\"is_impossible\":\"yes\"}\n"),
       "d.jsonl: line 1: ", "\"is_impossible\" must be a boolean, got string"},
  });
}

TEST(DatasetFile, SquadV2FileAsPublished) {
  for (DatasetFormat format : {DatasetFormat::kSquad, DatasetFormat::kAuto}) {
    ASSERT_OK_AND_ASSIGN(auto ex, ParseDataset(kSquadV2, format, "dev-v2.0.json"));
    ASSERT_EQ(ex.size(), 3u);
    const std::string normans = "The Normans gave their name to Normandy, a region in France.";
    EXPECT_THAT(Rows(ex), ElementsAre("In what country is Normandy located?|" + normans + "|",
                                      "Who gave their name to Paris?|" + normans + "|",
                                      "What is it made with?|Caf\xC3\xA9 au lait is coffee with hot milk.|"));
    EXPECT_THAT(Answers(ex[0]), ElementsAre("53:France", "53:France"));
    EXPECT_THAT(Answers(ex[1]), IsEmpty());  // is_impossible; plausible_answers ignored
    EXPECT_THAT(Answers(ex[2]), ElementsAre("28:hot milk"));
    for (const auto& e : ex) {
      EXPECT_EQ(e.label(), "");
      EXPECT_THAT(e.labels(), IsEmpty());
    }
  }
  // SQuAD 1.1: no is_impossible; with a byte-order mark, read from a file
  // whose name does not say.
  TempDir dir;
  const std::string v1 = dir.Write(
      "squad11",
      "\xEF\xBB\xBF\n{\"version\":\"1.1\",\"data\":[{\"title\":\"t\",\"paragraphs\":[{\"context\":\"ab cd\","
      "\"qas\":[{\"id\":\"x\",\"question\":\"which?\",\"answers\":[{\"answer_start\":3,\"text\":\"cd\"}]}]}]}]}");
  ASSERT_OK_AND_ASSIGN(auto ex11, ReadDatasetFile(v1));
  EXPECT_THAT(Rows(ex11), ElementsAre("which?|ab cd|"));
  EXPECT_THAT(Answers(ex11[0]), ElementsAre("3:cd"));
}

TEST(DatasetFile, SquadErrorsNameThePath) {
  const auto squad = [](std::string_view paragraphs) {
    return Squad(absl::StrCat("{\"data\":[{\"paragraphs\":[]},{\"paragraphs\":[", std::string(paragraphs), "]}]}"));
  };
  constexpr char kOk[] = "{\"context\":\"c\",\"qas\":[{\"question\":\"q\",\"answers\":[]}]}";
  ExpectErrors({
      {"question missing",
       squad(absl::StrCat(kOk, ",{\"context\":\"c\",\"qas\":[{\"question\":\"q\",\"answers\":[]},{\"answers\":[]}]}")),
       "s.json: data[1].paragraphs[1].qas[1]: ", "missing key \"question\""},
      {"answers missing", squad("{\"context\":\"c\",\"qas\":[{\"question\":\"q\",\"id\":\"1\"}]}"),
       "s.json: data[1].paragraphs[0].qas[0]: ", "missing key \"answers\""},
      {"impossible with answers",
       squad("{\"context\":\"c\",\"qas\":[{\"question\":\"q\",\"is_impossible\":true,"
             "\"answers\":[{\"text\":\"c\",\"answer_start\":0}]}]}"),
       "s.json: data[1].paragraphs[0].qas[0]: ", "\"is_impossible\" is true but \"answers\" is not empty"},
      {"answer_start as a string",
       squad(
           "{\"context\":\"c\",\"qas\":[{\"question\":\"q\",\"answers\":[{\"text\":\"c\",\"answer_start\":\"0\"}]}]}"),
       "s.json: data[1].paragraphs[0].qas[0]: ", "answers[0].answer_start must be an integer, got string"},
      {"context missing", squad(absl::StrCat(kOk, ",{\"qas\":[]}")),
       "s.json: data[1].paragraphs[1]: ", "missing key \"context\""},
      {"empty context", squad("{\"context\":\"\",\"qas\":[]}"), "s.json: data[1].paragraphs[0]: ", "empty context"},
      {"qas not an array", squad("{\"context\":\"c\",\"qas\":{}}"),
       "s.json: data[1].paragraphs[0]: ", "\"qas\" must be an array, got object"},
      {"a paragraph that is not an object", squad("[]"),
       "s.json: data[1].paragraphs[0]: ", "expected an object, got array"},
      {"paragraphs missing", Squad("{\"data\":[{\"title\":\"t\"}]}"),
       "s.json: data[0]: ", "missing key \"paragraphs\""},
      {"data missing", Squad("{\"version\":\"v2.0\"}"), "s.json: ", "missing key \"data\""},
      {"not an object", Squad("[{\"data\":[]}]"), "s.json: ", "expected a JSON object, got array"},
      {"no questions", Squad("{\"data\":[{\"paragraphs\":[{\"context\":\"c\",\"qas\":[]}]}]}"),
       "s.json: ", "no examples"},
      {"bad JSON names the line", Squad("{\"data\": [\n  {\"paragraphs\": []},\n  {oops}\n]}"),
       "s.json: ", "invalid JSON: line 3, column 4"},
      {"invalid UTF-8 names the line", Squad("{\"data\": [\n\n\"\xC3\"]}"), "s.json: line 3: ", "invalid UTF-8"},
  });
}

// Nesting is bounded before a document is built (16 MiB of '[' would cost
// about 1.15 GB as a JSON DOM): at 32 levels a document is parsed (and found to
// hold no examples), at 33 it is refused unparsed, in a JSON Lines line too; '['
// inside strings does not count.
TEST(DatasetFile, JsonNestingIsBoundedBeforeParsing) {
  const auto nested = [](int depth) {  // {"data": [...]} nested to `depth`, a string of '[' inside
    return absl::StrCat(R"({"title": "[[[[[[[[", "data": [{"paragraphs": []}], "x": )", std::string(depth - 1, '['),
                        std::string(depth - 1, ']'), "}");
  };
  EXPECT_THAT(Squad(nested(32)).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no examples")));
  EXPECT_THAT(Squad(nested(33)).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                   HasSubstr("s.json: arrays and objects nest deeper than 32")));
  EXPECT_THAT(Squad(std::string(16 << 20, '[')).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nest deeper than 32")));
  EXPECT_THAT(Jsonl(absl::StrCat(R"({"text": "a", "label": "b"})", "\n", R"({"text": "a", "x": )", std::string(40, '['),
                                 std::string(40, ']'), "}\n"))
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("line 2: arrays and objects nest deeper")));
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[", "b": [{}]})"), 3);
  EXPECT_EQ(JsonNestingDepth(R"(["\"[[[", [[]]])"), 3);  // an escaped quote does not end the string
}

TEST(DatasetFile, EmptyFilesAreErrors) {
  EXPECT_THAT(Csv(""), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d.csv: the file is empty")));
  EXPECT_THAT(Csv("\xEF\xBB\xBF\r\n\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d.csv: the file is empty")));
  EXPECT_THAT(Jsonl("\n  \n"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d.jsonl: the file is empty")));
  EXPECT_THAT(Csv("text,label\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d.csv: no examples after the header")));
}

// --- Formats and files ------------------------------------------------------------------

TEST(DatasetFile, FormatFromTheFileName) {
  EXPECT_EQ(DatasetFormatForPath("a/b.csv").value_or(DatasetFormat::kAuto), DatasetFormat::kCsv);
  EXPECT_EQ(DatasetFormatForPath("B.CSV").value_or(DatasetFormat::kAuto), DatasetFormat::kCsv);
  EXPECT_EQ(DatasetFormatForPath("b.jsonl").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_EQ(DatasetFormatForPath("b.ndjson").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_EQ(DatasetFormatForPath("b.json").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_THAT(DatasetFormatForPath("b.txt").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(DatasetFormatForPath("dir.csv/data").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ParseDatasetFormat("JSON").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_EQ(ParseDatasetFormat("csv").value_or(DatasetFormat::kAuto), DatasetFormat::kCsv);
  EXPECT_EQ(ParseDatasetFormat("auto").value_or(DatasetFormat::kCsv), DatasetFormat::kAuto);
  EXPECT_EQ(ParseDatasetFormat("SQuAD").value_or(DatasetFormat::kAuto), DatasetFormat::kSquad);
  EXPECT_THAT(ParseDatasetFormat("xml").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetFile, AutoDetectionUsesTheExtensionThenTheContent) {
  const std::string csv = "text,label\n{not json},x\n";
  const std::string jsonl = "{\"text\":\"t\",\"label\":\"x\"}\n";
  // The extension wins over the content.
  ASSERT_OK_AND_ASSIGN(auto by_ext, ParseDataset(csv, DatasetFormat::kAuto, "data.csv"));
  EXPECT_THAT(Rows(by_ext), ::testing::ElementsAre("{not json}||x"));
  EXPECT_THAT(ParseDataset(csv, DatasetFormat::kAuto, "data.jsonl"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data.jsonl: line 1: invalid JSON")));
  // An unknown extension: the content decides.
  ASSERT_OK_AND_ASSIGN(auto sniffed_jsonl, ParseDataset("\xEF\xBB\xBF\n" + jsonl, DatasetFormat::kAuto, "data.txt"));
  EXPECT_THAT(Rows(sniffed_jsonl), ::testing::ElementsAre("t||x"));
  ASSERT_OK_AND_ASSIGN(auto sniffed_csv, ParseDataset(csv, DatasetFormat::kAuto, "data"));
  EXPECT_THAT(Rows(sniffed_csv), ::testing::ElementsAre("{not json}||x"));
  // An explicit format wins over the extension.
  ASSERT_OK_AND_ASSIGN(auto forced, ParseDataset(jsonl, DatasetFormat::kJsonl, "data.csv"));
  EXPECT_THAT(Rows(forced), ::testing::ElementsAre("t||x"));
}

TEST(DatasetFile, JsonFilesAreSquadOnlyWhenOneObjectWithADataArray) {
  // .json JSON Lines stay JSON Lines: several objects, or one without a
  // "data" array.
  const std::string two_lines = "{\"text\":\"a\",\"label\":\"x\"}\n{\"text\":\"b\",\"label\":\"y\"}\n";
  ASSERT_OK_AND_ASSIGN(auto lines, ParseDataset(two_lines, DatasetFormat::kAuto, "train.json"));
  EXPECT_THAT(Rows(lines), ElementsAre("a||x", "b||y"));
  ASSERT_OK_AND_ASSIGN(
      auto one, ParseDataset("{\"text\":\"a\",\"label\":\"x\",\"data\":{}}", DatasetFormat::kAuto, "train.json"));
  EXPECT_THAT(Rows(one), ElementsAre("a||x"));
  // A .json JSON Lines file with an error reports the line, as JSON Lines.
  EXPECT_THAT(ParseDataset("{\"text\":\"a\",\"label\":\"x\"}\n{\"text\":\"b\"}\n", DatasetFormat::kAuto, "t.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("t.json: line 2: missing key \"label\"")));
  // A SQuAD document is SQuAD in a .json file or a file without extension,
  // but JSON Lines when the name or the caller says so.
  ASSERT_OK_AND_ASSIGN(auto squad, ParseDataset(kSquadV2, DatasetFormat::kAuto, "data/SQUAD.JSON"));
  EXPECT_EQ(squad.size(), 3u);
  ASSERT_OK_AND_ASSIGN(auto sniffed, ParseDataset(kSquadV2, DatasetFormat::kAuto, "dev"));
  EXPECT_EQ(sniffed.size(), 3u);
  EXPECT_THAT(ParseDataset(kSquadV2, DatasetFormat::kAuto, "dev.jsonl"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dev.jsonl: line 1: invalid JSON")));
  EXPECT_THAT(ParseDataset(kSquadV2, DatasetFormat::kJsonl, "dev.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dev.json: line 1: invalid JSON")));
  // A CSV file is never taken for SQuAD.
  EXPECT_THAT(ParseDataset(kSquadV2, DatasetFormat::kAuto, "dev.csv"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dev.csv: line 1: ")));
}

TEST(DatasetFile, EveryPrefixOfAJsonFileParsesOrFailsCleanly) {
  const std::string jsonl =
      "{\"tokens\":[\"a\",\"b\"],\"tags\":[\"B-X\",\"O\"]}\n"
      "{\"text\":\"ab\",\"entities\":[{\"start\":0,\"end\":1,\"label\":\"X\"}],\"labels\":[1.5,\"y\"]}\n"
      "{\"question\":\"q\",\"context\":\"c\",\"answers\":[{\"text\":\"c\",\"answer_start\":0}]}\n";
  for (const std::string& file : {std::string(kSquadV2), jsonl}) {
    int parsed = 0;
    for (size_t n = 0; n <= file.size(); ++n) {
      const auto result = ParseDataset(file.substr(0, n), DatasetFormat::kAuto, "t.json");
      if (result.ok()) {
        ++parsed;
        continue;
      }
      ASSERT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument, ::testing::StartsWith("t.json: ")))
          << file.substr(0, n);
    }
    EXPECT_GE(parsed, 1);  // the whole file
  }
}

TEST(DatasetFile, ReadsFilesAndReportsMissingOnes) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto csv, ReadDatasetFile(dir.Write("train.csv", "text,label\nhello,x\n")));
  EXPECT_THAT(Rows(csv), ::testing::ElementsAre("hello||x"));
  const std::string ndjson = dir.Write("train.ndjson", "{\"text\":\"a\",\"text_pair\":\"b\",\"label\":\"c\"}\n");
  ASSERT_OK_AND_ASSIGN(auto jsonl, ReadDatasetFile(ndjson));
  EXPECT_THAT(Rows(jsonl), ::testing::ElementsAre("a|b|c"));
  ASSERT_OK_AND_ASSIGN(auto sniffed, ReadDatasetFile(dir.Write("noext", "{\"text\":\"a\",\"label\":\"c\"}\n")));
  EXPECT_THAT(Rows(sniffed), ::testing::ElementsAre("a||c"));
  // Errors name the path as given.
  const std::string bad = dir.Write("bad.csv", "text,label\nok,x\nnot ok\n");
  EXPECT_THAT(ReadDatasetFile(bad), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(bad + ": line 3: ")));
  EXPECT_THAT(ReadDatasetFile(dir.Sub("nope.csv")).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(ReadDatasetFile(dir.Sub("nope.txt")).status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST(DatasetFile, TheShippedExamplesParse) {
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "ADAPTERD_SOURCE_DIR is not set (run through ctest)";
  for (const char* f :
       {"sentiment_train.csv", "sentiment_validation.csv", "topics_train.csv", "topics_validation.csv"}) {
    ASSERT_OK_AND_ASSIGN(auto rows, ReadDatasetFile(std::string(src) + "/examples/" + f));
    EXPECT_GE(rows.size(), 100u) << f;
  }
}

// Streaming (the HTTP uploads): fed in pieces of any size, the parser gives
// exactly ParseDataset's examples, or its error with the same line number.
absl::StatusOr<std::vector<v1::Example>> Streamed(std::string_view text, DatasetFormat format, size_t piece) {
  DatasetStreamParser parser(format, format == DatasetFormat::kCsv ? "d.csv" : "d.jsonl", 1 << 20);
  std::vector<v1::Example> all;
  for (size_t pos = 0; pos < text.size(); pos += piece) {
    ASSIGN_OR_RETURN(auto examples, parser.Feed(text.substr(pos, piece)));
    all.insert(all.end(), examples.begin(), examples.end());
  }
  ASSIGN_OR_RETURN(auto last, parser.Finish());
  all.insert(all.end(), last.begin(), last.end());
  return all;
}

TEST(DatasetStreamParser, AnyPieceSizeGivesTheWholeParse) {
  const std::vector<std::pair<DatasetFormat, std::string>> inputs = {
      {DatasetFormat::kCsv, "text,label\na,x\nb,y\n"},
      {DatasetFormat::kCsv, "\xEF\xBB\xBF\n\ntext_pair,text,label\r\n\"p, \"\"q\"\"\n\",\"t\nu\",x\r\n\nv,w,y"},
      {DatasetFormat::kCsv, "text,labels\na,x|y\nb,\n\"c\nd\",z\n"},
      {DatasetFormat::kCsv, "text,label\n"},                              // no examples
      {DatasetFormat::kCsv, "  \n\n"},                                    // empty
      {DatasetFormat::kCsv, "text,label\na,x\n\"b\nc\",y,extra\nd,z\n"},  // line 3
      {DatasetFormat::kCsv, "text,label\na,x\n\"unterminated,y\n"},
      {DatasetFormat::kCsv, "txt,label\na,x\n"},            // bad header
      {DatasetFormat::kCsv, "text,label\na,x\n  \nb,y\n"},  // a record of spaces: line 3
      {DatasetFormat::kCsv, "  \ntext,label\na,x\n"},       // a header of spaces
      {DatasetFormat::kJsonl, "{\"text\": \"a\", \"label\": 1}\n\xEF\xBB\xBF{\"text\"\n"},  // a BOM on line 2
      {DatasetFormat::kCsv, "text,label\n\xEF\xBB\xBF,x\n"},                                // a BOM in a cell of line 2
      {DatasetFormat::kJsonl, "{\"text\": \"a\", \"label\": 1}\n\n{\"text\": \"b\", \"labels\": [\"x\"]}"},
      {DatasetFormat::kJsonl, "\xEF\xBB\xBF{\"tokens\": [\"A\"], \"tags\": [\"B-X\"]}\n"},
      {DatasetFormat::kJsonl, "{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \"b\"}\n"},  // line 2
      {DatasetFormat::kJsonl, "{\"text\": \"a\", \"label\": \"x\"}\n\n\n{oops\n"},          // line 4
      {DatasetFormat::kJsonl, "\n \n"},
  };
  for (const auto& [format, text] : inputs) {
    const auto whole = ParseDataset(text, format, format == DatasetFormat::kCsv ? "d.csv" : "d.jsonl");
    for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}}) {
      SCOPED_TRACE(absl::StrCat("input '", text, "', pieces of ", piece));
      const auto streamed = Streamed(text, format, piece);
      ASSERT_EQ(streamed.ok(), whole.ok()) << streamed.status() << " vs " << whole.status();
      if (!whole.ok()) {
        EXPECT_EQ(streamed.status(), whole.status());
        continue;
      }
      ASSERT_EQ(streamed->size(), whole->size());
      for (size_t i = 0; i < whole->size(); ++i) {
        EXPECT_EQ((*streamed)[i].SerializeAsString(), (*whole)[i].SerializeAsString()) << i;
      }
    }
  }
}

TEST(DatasetStreamParser, HoldsOneRecordAtMost) {
  DatasetStreamParser parser(DatasetFormat::kJsonl, "d.jsonl", 64);
  ASSERT_OK_AND_ASSIGN(auto first, parser.Feed("{\"text\": \"a\", \"label\": \"x\"}\n{\"text\": \""));
  EXPECT_EQ(first.size(), 1u);  // the complete record comes out at once
  EXPECT_THAT(
      parser.Feed(std::string(100, 'b')).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("d.jsonl: line 2: a record longer than 64 bytes")));
  // The error sticks.
  EXPECT_THAT(parser.Finish().status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace adapterd
