// GoogleTest helpers for absl::Status, which Abseil 20220623 does not ship.
// Header-only; link adapterd::common_testing from test targets only.
#ifndef ADAPTERD_COMMON_TESTING_STATUS_MATCHERS_H_
#define ADAPTERD_COMMON_TESTING_STATUS_MATCHERS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace adapterd::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, HasSubstr("x")))
MATCHER_P2(StatusIs, code, message_matcher, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::adapterd::testing::GetStatus(arg);
  if (s.code() != code) {
    *result_listener << "whose status is " << s.ToString();
    return false;
  }
  if (!::testing::Matches(message_matcher)(std::string(s.message()))) {
    *result_listener << "whose status is " << s.ToString();
    return false;
  }
  return true;
}

// EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound))
MATCHER_P(StatusIs, code, "has code " + absl::StatusCodeToString(code)) {
  const absl::Status& s = ::adapterd::testing::GetStatus(arg);
  if (s.code() != code) *result_listener << "whose status is " << s.ToString();
  return s.code() == code;
}

MATCHER(IsOk, "is OK") {
  const absl::Status& s = ::adapterd::testing::GetStatus(arg);
  if (!s.ok()) *result_listener << "whose status is " << s.ToString();
  return s.ok();
}

}  // namespace adapterd::testing

#define ASSERT_OK(expr) ASSERT_THAT((expr), ::adapterd::testing::IsOk())
#define EXPECT_OK(expr) EXPECT_THAT((expr), ::adapterd::testing::IsOk())

// ASSERT_OK_AND_ASSIGN(auto x, MakeX());
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  ADAPTERD_ASSERT_OK_AND_ASSIGN_IMPL_(ADAPTERD_TEST_CONCAT_(_adapterd_test_statusor_, __LINE__), lhs, rexpr)
#define ADAPTERD_TEST_CONCAT_INNER_(a, b) a##b
#define ADAPTERD_TEST_CONCAT_(a, b) ADAPTERD_TEST_CONCAT_INNER_(a, b)
#define ADAPTERD_ASSERT_OK_AND_ASSIGN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                        \
  ASSERT_TRUE(statusor.ok()) << statusor.status().ToString();     \
  lhs = std::move(statusor).value()

#endif  // ADAPTERD_COMMON_TESTING_STATUS_MATCHERS_H_
