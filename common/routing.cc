#include "common/routing.h"

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace adapterd {
namespace {

constexpr size_t kHexDigits = 13 + 6;

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string FormatMintedId(std::string_view prefix, int64_t now_micros, uint64_t random, std::string_view task_id) {
  std::string id =
      absl::StrFormat("%s-%013x%06x", std::string(prefix), static_cast<uint64_t>(now_micros), random & 0xffffff);
  if (!task_id.empty()) {
    id.push_back('.');
    id.append(task_id);
  }
  return id;
}

std::string MintId(std::string_view prefix, int64_t now_micros, std::string_view task_id) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return FormatMintedId(prefix, now_micros, rng(), task_id);
}

std::string_view RoutingTaskOf(std::string_view id) {
  size_t head = 0;
  if (id.starts_with("job-")) {
    head = 4;
  } else if (id.starts_with("ds-")) {
    head = 3;
  } else {
    return {};
  }
  if (id.size() < head + kHexDigits + 2 || id[head + kHexDigits] != '.' || !IsLowerHex(id.substr(head, kHexDigits))) {
    return {};
  }
  const std::string_view task = id.substr(head + kHexDigits + 1);
  // Only what could be a task id: printable ASCII without spaces (the server
  // validates ids fully; this keeps junk out of metadata).
  for (char c : task) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) return {};
  }
  return task;
}

absl::Status CheckRoutingHeader(std::string_view task, const std::string* header) {
  if (header != nullptr && *header == task) return absl::OkStatus();
  const std::string t(task), key(kTaskRoutingHeader);
  return absl::FailedPreconditionError(absl::StrCat(
      "this server is one of several task-sharded replicas: a call about task '", t, "' must carry the metadata ", key,
      ": ", t, " (", header == nullptr ? std::string("none was sent") : absl::StrCat("got '", *header, "'"),
      "), so that the router sends it to the task's replica"));
}

}  // namespace adapterd
