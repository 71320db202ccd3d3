#include "common/cpu_features.h"

#include <fstream>
#include <sstream>

namespace adapterd {
namespace {

// True when the whitespace-separated `flags` contain `name` as a whole word.
bool HasFlag(std::string_view flags, std::string_view name) {
  size_t pos = 0;
  while ((pos = flags.find(name, pos)) != std::string_view::npos) {
    const bool starts = pos == 0 || flags[pos - 1] == ' ' || flags[pos - 1] == '\t' || flags[pos - 1] == ':';
    const size_t end = pos + name.size();
    const bool ends = end == flags.size() || flags[end] == ' ' || flags[end] == '\t' || flags[end] == '\n';
    if (starts && ends) return true;
    pos = end;
  }
  return false;
}

}  // namespace

std::string FastBf16Feature(std::string_view cpuinfo) {
  bool avx512_bf16 = false;
  size_t start = 0;
  while (start < cpuinfo.size()) {
    size_t end = cpuinfo.find('\n', start);
    if (end == std::string_view::npos) end = cpuinfo.size();
    const std::string_view line = cpuinfo.substr(start, end - start);
    if (line.starts_with("flags")) {
      if (HasFlag(line, "amx_bf16")) return "amx_bf16";
      avx512_bf16 = avx512_bf16 || HasFlag(line, "avx512_bf16");
    }
    start = end + 1;
  }
  return avx512_bf16 ? "avx512_bf16" : "";
}

std::string CurrentFastBf16Feature() {
  std::ifstream in("/proc/cpuinfo");
  std::ostringstream text;
  text << in.rdbuf();
  return FastBf16Feature(text.str());
}

}  // namespace adapterd
