#include "common/cpu_features.h"


#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"

namespace adapterd {

std::string FastBf16Feature(std::string_view cpuinfo) {
  bool avx512_bf16 = false;
  for (absl::string_view line : absl::StrSplit(absl::string_view(cpuinfo.data(), cpuinfo.size()), '\n')) {
    if (!absl::StartsWith(line, "flags")) continue;
    for (absl::string_view flag : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      if (flag == "amx_bf16") return "amx_bf16";
      avx512_bf16 = avx512_bf16 || flag == "avx512_bf16";
    }
  }
  return avx512_bf16 ? "avx512_bf16" : "";
}

std::string CurrentFastBf16Feature() {
  absl::StatusOr<std::string> text = ReadFileToString("/proc/cpuinfo");
  return text.ok() ? FastBf16Feature(*text) : std::string();
}

}  // namespace adapterd
