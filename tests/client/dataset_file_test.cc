// Dataset files for `adapterctl datasets upload` / `train`: CSV and JSON
// Lines, and errors that name the file and line.
#include "client/dataset_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/testing/status_matchers.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::client {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<std::vector<v1::Example>> Csv(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kCsv, "d.csv");
}
absl::StatusOr<std::vector<v1::Example>> Jsonl(std::string_view text) {
  return ParseDataset(text, DatasetFormat::kJsonl, "d.jsonl");
}

TEST(DatasetFile, CsvWithQuotesCommasNewlinesCrlfAndBom) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("\xEF\xBB\xBFtext,label\r\n"
                                    "plain,a\r\n"
                                    "\"with, comma\",b\r\n"
                                    "\"say \"\"hi\"\"\",a\n"
                                    "\n"
                                    "\"two\nlines\",b\n"));
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_EQ(ex[0].text(), "plain");
  EXPECT_EQ(ex[1].text(), "with, comma");
  EXPECT_EQ(ex[2].text(), "say \"hi\"");
  EXPECT_EQ(ex[3].text(), "two\nlines");
  EXPECT_EQ(ex[3].label(), "b");
}

TEST(DatasetFile, CsvPairsInAnyColumnOrder) {
  ASSERT_OK_AND_ASSIGN(auto ex, Csv("label, text_pair ,text\nyes,second,first\n"));
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].text(), "first");
  EXPECT_EQ(ex[0].text_pair(), "second");
  EXPECT_EQ(ex[0].label(), "yes");
}

TEST(DatasetFile, JsonLines) {
  ASSERT_OK_AND_ASSIGN(auto ex, Jsonl("{\"text\":\"a b\",\"label\":\"x\",\"other\":1}\n\n"
                                      "{\"text\":\"c\",\"text_pair\":\"d\",\"label\":\"y\"}\n"
                                      "{\"text\":\"e\",\"text_pair\":null,\"label\":\"x\"}\n"));
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_EQ(ex[1].text_pair(), "d");
  EXPECT_EQ(ex[2].text_pair(), "");
}

TEST(DatasetFile, ErrorsNameTheFileAndLine) {
  struct Case {
    const char* name;
    absl::StatusOr<std::vector<v1::Example>> result;
    const char* says;
  };
  const Case cases[] = {
      {"missing header column", Csv("text,category\na,b\n"), "d.csv:1:"},
      {"wrong column count", Csv("text,label\na,b\nc\n"), "d.csv:3:"},
      {"empty text", Csv("text,label\na,b\n,b\n"), "d.csv:3:"},
      {"missing label", Csv("text,label\na,b\n\"x\ny\",\n"), "d.csv:3:"},
      {"unterminated quote", Csv("text,label\na,b\nc,d\n\"open,x\n"), "d.csv:4:"},
      {"bad utf8", Csv("text,label\n\xff,b\n"), "d.csv:2:"},
      {"bad json", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n{nope\n"), "d.jsonl:2:"},
      {"wrong json type", Jsonl("{\"text\":\"a\",\"label\":\"b\"}\n\n{\"text\":5,\"label\":\"b\"}\n"), "d.jsonl:3:"},
      {"json missing label", Jsonl("{\"text\":\"a\"}\n"), "d.jsonl:1:"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(c.result, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.says))) << c.name;
  }
}

TEST(DatasetFile, EmptyFileIsAnError) {
  EXPECT_THAT(Csv(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Csv("text,label\n"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Jsonl(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetFile, FormatFromTheFileName) {
  EXPECT_EQ(DatasetFormatForPath("a/b.csv").value_or(DatasetFormat::kAuto), DatasetFormat::kCsv);
  EXPECT_EQ(DatasetFormatForPath("b.jsonl").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_THAT(DatasetFormatForPath("b.txt").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ParseDatasetFormat("JSON").value_or(DatasetFormat::kAuto), DatasetFormat::kJsonl);
  EXPECT_THAT(ParseDatasetFormat("xml").status(), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetFile, ReadsFilesAndReportsMissingOnes) {
  storage::testing::TempDir dir;
  const std::string path = dir.Sub("train.csv");
  std::ofstream(path) << "text,label\nhello,x\n";
  ASSERT_OK_AND_ASSIGN(auto ex, ReadDatasetFile(path));
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].text(), "hello");
  EXPECT_THAT(ReadDatasetFile(dir.Sub("nope.csv")).status(), StatusIs(absl::StatusCode::kNotFound));
  // The shipped examples parse.
  const char* src = std::getenv("ADAPTERD_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  for (const char* f : {"sentiment_train.csv", "sentiment_validation.csv", "topics_train.csv",
                        "topics_validation.csv"}) {
    ASSERT_OK_AND_ASSIGN(auto rows, ReadDatasetFile(std::string(src) + "/examples/" + f));
    EXPECT_GE(rows.size(), 100u) << f;
  }
}

}  // namespace
}  // namespace adapterd::client
