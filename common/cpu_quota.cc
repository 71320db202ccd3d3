#include "common/cpu_quota.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"

namespace adapterd {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return std::nullopt;
  return *std::move(text);
}

// "/a/b/c" -> {"/a/b/c", "/a/b", "/a", ""} (the last is the mount root).
std::vector<std::string> SelfAndAncestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  while (true) {
    out.push_back(path);
    if (path.empty()) break;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  return out;
}

// cgroup v2 cpu.max: "max 100000" or "<quota> <period>".
std::optional<double> ParseCpuMax(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  if (parts.size() != 2 || parts[0] == "max") return std::nullopt;
  double quota = 0, period = 0;
  if (!absl::SimpleAtod(parts[0], &quota) || !absl::SimpleAtod(parts[1], &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return quota / period;
}

// cgroup v1: cpu.cfs_quota_us (-1 = none) over cpu.cfs_period_us.
std::optional<double> ReadCfsQuota(const std::string& dir) {
  std::optional<std::string> q = ReadSmallFile(dir + "/cpu.cfs_quota_us");
  std::optional<std::string> p = ReadSmallFile(dir + "/cpu.cfs_period_us");
  if (!q || !p) return std::nullopt;
  double quota = 0, period = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(*q), &quota) ||
      !absl::SimpleAtod(absl::StripAsciiWhitespace(*p), &period) || quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return quota / period;
}

void KeepTightest(std::optional<double>& best, std::optional<double> q) {
  if (q && (!best || *q < *best)) best = q;
}

}  // namespace

int CpuBudget::usable() const {
  int n = std::max(1, affinity);
  if (quota) n = std::min(n, std::max(1, static_cast<int>(std::ceil(*quota - 1e-9))));
  return n;
}

std::string CpuBudget::Describe() const {
  std::string s = quota ? absl::StrFormat("cgroup CPU quota %.2f CPUs, ", *quota) : "no cgroup CPU quota, ";
  return s + absl::StrFormat("%d of %d online CPUs in the affinity mask", affinity, online);
}

std::optional<double> CgroupCpuQuota(const std::string& cgroup_root, const std::string& proc_self_cgroup) {
  std::optional<double> best;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    // hierarchy-id:controllers:path
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const std::string& controllers = f[1];
    const std::string& path = f[2];
    if (f[0] == "0" && controllers.empty()) {  // unified hierarchy (v2)
      for (const std::string& dir : SelfAndAncestors(path)) {
        if (std::optional<std::string> text = ReadSmallFile(cgroup_root + dir + "/cpu.max")) {
          KeepTightest(best, ParseCpuMax(*text));
        }
      }
      continue;
    }
    std::vector<std::string> names = absl::StrSplit(controllers, ',');
    if (std::find(names.begin(), names.end(), "cpu") == names.end()) continue;
    // v1: the cpu hierarchy is mounted as "cpu,cpuacct" (often with a "cpu"
    // link) under the root. Inside a container the process's own cgroup is
    // the mount's root, so the walk up to "" finds it there.
    for (const std::string& mount : {absl::StrCat(cgroup_root, "/", controllers), absl::StrCat(cgroup_root, "/cpu")}) {
      for (const std::string& dir : SelfAndAncestors(path)) KeepTightest(best, ReadCfsQuota(mount + dir));
    }
  }
  return best;
}

CpuBudget CurrentCpuBudget() {
  CpuBudget b;
  b.online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  CPU_ZERO(&set);
  b.affinity = sched_getaffinity(0, sizeof(set), &set) == 0 ? std::max(1, CPU_COUNT(&set)) : b.online;
  if (std::optional<std::string> self = ReadSmallFile("/proc/self/cgroup")) {
    b.quota = CgroupCpuQuota("/sys/fs/cgroup", *self);
  }
  return b;
}

}  // namespace adapterd
