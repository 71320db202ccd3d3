#include "common/api_util.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace adapterd {

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
}

std::string JobStateName(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  if (absl::StartsWith(name, "JOB_STATE_")) name = name.substr(10);
  return name.empty() ? absl::StrCat(static_cast<int>(state)) : name;
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace adapterd
