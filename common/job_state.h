// The two facts about a job's state that both sides of the wire need,
// written once for both enums that spell the job life cycle: the public API's
// adapterd.v1.JobState and the stored adapterd.storage.v1.JobState. Both are
// protobuf enums with the same value names (tests/api/record_mapping_test.cc
// pins it); these functions go by those names, through the enum's
// descriptor, so they need nothing of either proto library but its enum.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_COMMON_JOB_STATE_H_
#define ADAPTERD_COMMON_JOB_STATE_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/generated_enum_reflection.h>

#include <string>
#include <string_view>

namespace adapterd {

// "QUEUED", "RUNNING", ...: the value's name without JOB_STATE_, or the
// number for a value this build does not know.
template <typename JobStateEnum>
std::string JobStateName(JobStateEnum state) {
  const google::protobuf::EnumValueDescriptor* value =
      google::protobuf::GetEnumDescriptor<JobStateEnum>()->FindValueByNumber(static_cast<int>(state));
  if (value == nullptr) return std::to_string(static_cast<int>(state));
  std::string_view name = value->name();
  constexpr std::string_view kPrefix = "JOB_STATE_";
  if (name.substr(0, kPrefix.size()) == kPrefix) name.remove_prefix(kPrefix.size());
  return std::string(name);
}

// SUCCEEDED, FAILED or CANCELLED: a job in one of these never changes again.
template <typename JobStateEnum>
bool IsTerminal(JobStateEnum state) {
  // The three values' numbers, looked up by name once per enum.
  static const auto number = [](std::string_view name) {
    return google::protobuf::GetEnumDescriptor<JobStateEnum>()->FindValueByName(std::string(name))->number();
  };
  static const int succeeded = number("JOB_STATE_SUCCEEDED");
  static const int failed = number("JOB_STATE_FAILED");
  static const int cancelled = number("JOB_STATE_CANCELLED");
  const int s = static_cast<int>(state);
  return s == succeeded || s == failed || s == cancelled;
}

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_JOB_STATE_H_
