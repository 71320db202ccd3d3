// ToGrpcStatus: codes kept one to one, messages always valid UTF-8.
#include "server/api/grpc_status.h"

#include <gtest/gtest.h>

#include "common/utf8.h"

namespace adapterd::api {
namespace {

TEST(GrpcStatus, CodesAndValidMessagesPassThrough) {
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError("task 'caf\xc3\xa9' not found"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "task 'caf\xc3\xa9' not found");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(FromGrpcStatus(s).code(), absl::StatusCode::kNotFound);
}

// A malformed safetensors header's parse error quotes the caller's bytes;
// what goes back on the wire is valid UTF-8 with each bad byte replaced.
TEST(GrpcStatus, InvalidUtf8InAMessageIsReplaced) {
  const std::string raw = std::string("header is not valid JSON: last read: '\xff\xfe") + "\xc3" + "'";
  ASSERT_FALSE(IsValidUtf8(raw));
  const grpc::Status s = ToGrpcStatus(absl::InvalidArgumentError(raw));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(IsValidUtf8(s.error_message()));
  EXPECT_EQ(s.error_message(), "header is not valid JSON: last read: '\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd'");
}

}  // namespace
}  // namespace adapterd::api
