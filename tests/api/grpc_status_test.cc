// ToGrpcStatus: codes kept one to one, messages always valid UTF-8 and
// free of server paths.
#include "server/api/grpc_status.h"

#include <gtest/gtest.h>

#include "common/api_util.h"
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

// Internal messages name server paths (the data directory, RocksDB files,
// the model); callers get "<path>" instead, and ids with '/' are kept.
TEST(GrpcStatus, ServerPathsAreRedacted) {
  EXPECT_EQ(CallerMessage("write to database '/data/db': IO error: While appending to file: "
                          "/data/db/000012.log: No space left"),
            "write to database '<path>': IO error: While appending to file: <path>: No space left");
  EXPECT_EQ(CallerMessage("/srv/model/model.safetensors (truncated)"), "<path> (truncated)");
  EXPECT_EQ(CallerMessage("open(/x/y)=/tmp/z"), "open(<path>)=<path>");
  // Not paths: a tenant/task key, a ratio, a lone slash, a URL's "//".
  EXPECT_EQ(CallerMessage("task 'default/t0' not found"), "task 'default/t0' not found");
  EXPECT_EQ(CallerMessage("1/2 of the rows; a / b"), "1/2 of the rows; a / b");
  const grpc::Status s = ToGrpcStatus(absl::InternalError("read '/var/lib/adapterd/db/CURRENT' failed"));
  EXPECT_EQ(s.error_message(), "read '<path>' failed");
}

}  // namespace
}  // namespace adapterd::api
