// Shared command-line handling for the Google Benchmark binaries in bench/,
// and the percentile every bench program reports latencies with.
//
// Each binary has a few flags of its own (--preset=..., --batch=...). ParseOwnFlags
// consumes those and leaves every other argument for benchmark::Initialize. The
// binaries size their compute threads with model::SetComputeThreads.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace adapterd::bench {

// The q-quantile (nearest rank) of `v`, sorting it in place; 0 when empty.
inline double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())) - 1));
  return v[i];
}

// name ("--batch") -> setter given the text after '='.
using FlagSetters = std::map<std::string, std::function<void(const char*)>>;

// Returns argv[0] plus the arguments that are not ours, for benchmark::Initialize.
inline std::vector<char*> ParseOwnFlags(int argc, char** argv, const FlagSetters& setters) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    auto it = eq == nullptr ? setters.end() : setters.find(std::string(argv[i], static_cast<size_t>(eq - argv[i])));
    if (it != setters.end()) {
      it->second(eq + 1);
    } else {
      rest.push_back(argv[i]);
    }
  }
  return rest;
}

}  // namespace adapterd::bench
