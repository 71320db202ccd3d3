#include "common/logging.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/testing/status_matchers.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;

TEST(LogFormat, ParsesTheTwoNamesAndRefusesOthers) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_THAT(ParseLogFormat("JSON"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseLogFormat(""), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(JsonLogLine, IsOneParsableObjectWithUtcMicrosecondTimestamp) {
  // 2026-11-27T06:14:11Z = 1795760051.
  const std::string line = JsonLogLine(google::GLOG_WARNING, 1795760051, 42, 4242, "server.cc", 189, "disk \"full\"");
  EXPECT_EQ(line, R"({"ts":"2026-11-27T06:14:11.000042Z","level":"WARNING","thread":4242,"source":"server.cc:189",)"
                  R"("msg":"disk \"full\""})");
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "disk \"full\"");
}

TEST(JsonLogLine, EscapesControlCharactersAndReplacesInvalidUtf8) {
  const std::string line =
      JsonLogLine(google::GLOG_ERROR, 0, 0, 1, "a.cc", 1, std::string("tab\tnew\nline\x01 bad\xff end"));
  EXPECT_EQ(line.find('\n'), std::string::npos);         // one line, whatever the message
  const nlohmann::json j = nlohmann::json::parse(line);  // throws on invalid JSON or UTF-8
  EXPECT_EQ(j["level"], "ERROR");
  EXPECT_EQ(j["msg"], "tab\tnew\nline\x01 bad\xEF\xBF\xBD end");
  EXPECT_EQ(j["ts"], "1970-01-01T00:00:00.000000Z");
  EXPECT_NE(JsonLogLine(google::GLOG_INFO, 0, 0, 1, "a.cc", 1, "x").find(R"("level":"INFO")"), std::string::npos);
  EXPECT_NE(JsonLogLine(google::GLOG_FATAL, 0, 0, 1, "a.cc", 1, "x").find(R"("level":"FATAL")"), std::string::npos);
}

}  // namespace
}  // namespace adapterd
