#include "server/api/ids.h"

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace adapterd::api {
namespace {

TEST(ValidateId, AcceptsTheDocumentedAlphabet) {
  for (const std::string& id :
       {std::string("a"), std::string("task-1"), std::string("Task_2.v3"), std::string("0"), std::string(128, 'x')}) {
    EXPECT_OK(ValidateId("task_id", id)) << id;
  }
}

TEST(ValidateId, RejectsEverythingElseNamingTheProblem) {
  struct Case {
    std::string id;
    const char* says;
  } cases[] = {
      {"", "empty"},
      {std::string(129, 'x'), "129 bytes"},
      {"../x", "must not start with '.'"},
      {".hidden", "must not start with '.'"},
      {"a/b", "'/'"},
      {"a b", "' '"},
      {std::string("a\0b", 3), "byte 1"},
      {"caf\xc3\xa9", "byte 3"},
      {"\xff", "byte 0"},
  };
  for (const Case& c : cases) {
    absl::Status s = ValidateId("task_id", c.id);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.id;
    EXPECT_NE(s.message().find(c.says), absl::string_view::npos) << s.message();
    EXPECT_NE(s.message().find("task_id"), absl::string_view::npos);
  }
}

}  // namespace
}  // namespace adapterd::api
