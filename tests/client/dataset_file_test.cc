// Dataset files for `adapterctl datasets upload` / `train`: CSV and JSON
// Lines, format detection, and errors that name the file and line.
#include "client/dataset_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "tests/client/client_test_util.h"

namespace adapterd::client {
namespace {

using ::adapterd::client::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<v1::Example>> Csv(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kCsv, "d.csv");
}
absl::StatusOr<std::vector<v1::Example>> Jsonl(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kJsonl, "d.jsonl");
}

// text|text_pair|label of every example, for compact comparisons.
std::vector<std::string> Rows(const std::vector<v1::Example>& examples) {
  std::vector<std::string> rows;
  for (const auto& e : examples) rows.push_back(e.text() + "|" + e.text_pair() + "|" + e.label());
  return rows;
}

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
       "d.jsonl: line 1: ", "\"label\" must be a string or an integer, got boolean"},
      {"fractional label", Jsonl("{\"text\":\"a\",\"label\":1.5}\n"), "d.jsonl: line 1: ", "got number"},
      {"text_pair of the wrong type", Jsonl("{\"text\":\"a\",\"text_pair\":[1],\"label\":\"b\"}\n"),
       "d.jsonl: line 1: ", "\"text_pair\" must be a string, got array"},
      {"missing label", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{\"text\":\"a\"}\n"),
       "d.jsonl: line 2: ", "missing key \"label\""},
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

}  // namespace
}  // namespace adapterd::client
