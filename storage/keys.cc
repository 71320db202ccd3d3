#include "storage/keys.h"

#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace adapterd::storage {
namespace {

std::string S(std::string_view v) { return std::string(v); }

}  // namespace

absl::Status ValidateId(std::string_view what, std::string_view id) {
  if (id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(S(what), " must not be empty"));
  }
  if (id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(S(what), " is ", id.size(), " bytes; the limit is ", kMaxIdBytes));
  }
  if (id.find('/') != std::string_view::npos || id.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(S(what), " '", absl::CHexEscape(S(id)), "' must not contain '/' or NUL"));
  }
  return absl::OkStatus();
}

namespace keys {

std::string PaddedNumber(int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu", static_cast<unsigned long long>(n));
  return buf;
}

std::optional<int64_t> ParsePaddedNumber(std::string_view digits) {
  if (digits.size() != 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t next = v * 10 + static_cast<uint64_t>(c - '0');
    if (next / 10 != v) return std::nullopt;  // overflow
    v = next;
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  // Prefixes end in '/' (0x2F); its successor '0' bounds every key below it.
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xFF) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::string Task(std::string_view tenant, std::string_view task_id) { return absl::StrCat(S(tenant), "/", S(task_id)); }
std::string TaskPrefix(std::string_view tenant) { return absl::StrCat(S(tenant), "/"); }

std::string Adapter(std::string_view tenant, std::string_view task_id, int64_t version) {
  return absl::StrCat(S(tenant), "/", S(task_id), "/", PaddedNumber(version));
}
std::string AdapterPrefix(std::string_view tenant, std::string_view task_id) {
  return absl::StrCat(S(tenant), "/", S(task_id), "/");
}
std::string AdapterServingForm(std::string_view tenant, std::string_view task_id, int64_t version) {
  return absl::StrCat(Adapter(tenant, task_id, version), "/serving");
}

std::string Job(std::string_view tenant, std::string_view job_id) { return absl::StrCat(S(tenant), "/", S(job_id)); }
std::string JobPrefix(std::string_view tenant) { return absl::StrCat(S(tenant), "/"); }
std::string JobRequest(std::string_view tenant, std::string_view request_id) {
  return absl::StrCat(S(tenant), "/", S(request_id));
}

std::string QueueEntry(int64_t seq) { return PaddedNumber(seq); }

std::string JobEvent(std::string_view job_id, int64_t seq) { return absl::StrCat(S(job_id), "/", PaddedNumber(seq)); }
std::string JobEventPrefix(std::string_view job_id) { return absl::StrCat(S(job_id), "/"); }

std::string DatasetMeta(std::string_view tenant, std::string_view dataset_id) {
  return absl::StrCat("m/", S(tenant), "/", S(dataset_id));
}
std::string DatasetMetaPrefix(std::string_view tenant) { return absl::StrCat("m/", S(tenant), "/"); }
std::string DatasetChunk(std::string_view tenant, std::string_view dataset_id, int64_t index) {
  return absl::StrCat("c/", S(tenant), "/", S(dataset_id), "/", PaddedNumber(index));
}
std::string DatasetChunkPrefix(std::string_view tenant, std::string_view dataset_id) {
  return absl::StrCat("c/", S(tenant), "/", S(dataset_id), "/");
}

std::string Checkpoint(std::string_view job_id) { return std::string(job_id); }

}  // namespace keys
}  // namespace adapterd::storage
