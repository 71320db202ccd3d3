#include "common/cpu_features.h"

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace adapterd {

namespace {

constexpr std::string_view kAvx512Core[] = {"avx512f", "avx512bw", "avx512dq", "avx512vl"};

// Every word of every "flags" line.
std::set<std::string, std::less<>> CpuFlags(std::string_view cpuinfo) {
  std::set<std::string, std::less<>> flags;
  for (absl::string_view line : absl::StrSplit(absl::string_view(cpuinfo.data(), cpuinfo.size()), '\n')) {
    if (!absl::StartsWith(line, "flags")) continue;
    for (absl::string_view flag : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      flags.emplace(flag);
    }
  }
  return flags;
}

std::string CurrentCpuinfo() {
  absl::StatusOr<std::string> text = ReadFileToString("/proc/cpuinfo");
  return text.ok() ? *std::move(text) : std::string();
}

}  // namespace

std::string FastBf16Feature(std::string_view cpuinfo) {
  const auto flags = CpuFlags(cpuinfo);
  if (flags.contains("amx_bf16")) return "amx_bf16";
  return flags.contains("avx512_bf16") ? "avx512_bf16" : "";
}

std::string CurrentFastBf16Feature() { return FastBf16Feature(CurrentCpuinfo()); }

bool HasAvx512Core(std::string_view cpuinfo) {
  const auto flags = CpuFlags(cpuinfo);
  return std::all_of(std::begin(kAvx512Core), std::end(kAvx512Core),
                     [&](std::string_view f) { return flags.contains(f); });
}

bool CurrentHasAvx512Core() { return HasAvx512Core(CurrentCpuinfo()); }

}  // namespace adapterd
