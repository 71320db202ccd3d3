#include "common/status_macros.h"

#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x, int* calls) {
  ++*calls;
  return x % 2 == 0 ? absl::OkStatus() : absl::InvalidArgumentError("odd");
}

absl::Status TwoChecks(int a, int b, int* calls) {
  RETURN_IF_ERROR(CheckEven(a, calls));
  RETURN_IF_ERROR(CheckEven(b, calls));
  return absl::OkStatus();
}

TEST(StatusMacros, AssignOrReturnPropagatesValueAndError) {
  ASSERT_OK_AND_ASSIGN(int q, Quarter(12));
  EXPECT_EQ(q, 3);
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd")));
}

TEST(StatusMacros, ReturnIfErrorStopsAtFirstErrorAndEvaluatesOnce) {
  int calls = 0;
  EXPECT_OK(TwoChecks(2, 4, &calls));
  EXPECT_EQ(calls, 2);
  calls = 0;
  EXPECT_THAT(TwoChecks(1, 4, &calls), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd")));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace adapterd
