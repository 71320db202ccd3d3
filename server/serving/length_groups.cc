#include "server/serving/length_groups.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace adapterd::serving {

std::vector<LengthGroup> PlanLengthGroups(const std::vector<int64_t>& lengths, int64_t overhead_tokens,
                                          int64_t length_quantum) {
  const size_t n = lengths.size();
  if (n == 0) return {};
  const int64_t q = std::max<int64_t>(1, length_quantum);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lengths[a] < lengths[b]; });
  const auto padded = [&](size_t last) { return (lengths[order[last]] + q - 1) / q * q; };
  // cost[j]: the best plan of the j shortest rows; cut[j]: where its last
  // group starts. The last group of rows [i, j) pads to row j-1's length.
  std::vector<int64_t> cost(n + 1, std::numeric_limits<int64_t>::max());
  std::vector<size_t> cut(n + 1, 0);
  cost[0] = 0;
  for (size_t j = 1; j <= n; ++j) {
    for (size_t i = 0; i < j; ++i) {
      const int64_t c = cost[i] + static_cast<int64_t>(j - i) * padded(j - 1) + (i == 0 ? 0 : overhead_tokens);
      if (c < cost[j]) {  // strict: a tie keeps the earlier start, fewer groups
        cost[j] = c;
        cut[j] = i;
      }
    }
  }
  std::vector<LengthGroup> groups;
  for (size_t j = n; j > 0; j = cut[j]) {
    LengthGroup g;
    g.rows.assign(order.begin() + static_cast<std::ptrdiff_t>(cut[j]), order.begin() + static_cast<std::ptrdiff_t>(j));
    g.padded_length = padded(j - 1);
    groups.push_back(std::move(g));
  }
  std::reverse(groups.begin(), groups.end());
  return groups;
}

int64_t PaddedTokens(const std::vector<LengthGroup>& groups) {
  int64_t total = 0;
  for (const LengthGroup& g : groups) total += static_cast<int64_t>(g.rows.size()) * g.padded_length;
  return total;
}

}  // namespace adapterd::serving
