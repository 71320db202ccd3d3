// PlanLengthGroups: how one formed batch runs as forwards of similar-length
// rows (docs/ARCHITECTURE.md, "Shape buckets").
//
// A batch pads every row to its longest row. When rows of very different
// lengths share a batch (32-word texts beside 128-token QA windows), most of
// the forward is padding. The engine therefore runs a batch as one or more
// forwards, each over rows of similar length: with the rows sorted by length,
// it picks the partition into contiguous groups that minimises
//
//   sum over groups of  rows(g) * padded_length(g)  +  overhead_tokens
//
// where padded_length(g) is g's longest row rounded up to a multiple of
// `length_quantum`, and overhead_tokens prices one more forward in tokens
// (what a forward costs beyond its tokens: operator launches and thread
// wake-ups). One group is the whole batch at its longest length; the
// grouping never changes which rows a batch holds (the batcher's fairness
// decides that), only how they run. Every group's shape is (rows, a multiple
// of length_quantum): a bounded set of shapes for a device that plans or
// captures one per shape.
//
// Exact (dynamic programming over the sorted rows: O(n^2) for n rows, n is a
// batch, tens of rows). Ties keep fewer groups. Deterministic.
//
// Thread safety: a pure function.
#ifndef ADAPTERD_SERVER_SERVING_LENGTH_GROUPS_H_
#define ADAPTERD_SERVER_SERVING_LENGTH_GROUPS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace adapterd::serving {

struct LengthGroup {
  std::vector<std::size_t> rows;  // positions in `lengths`, ascending length
  int64_t padded_length = 0;      // the group's longest row, rounded up to the quantum
};

// `lengths` >= 1 each; overhead_tokens >= 0; length_quantum >= 1. Empty
// lengths give no group.
std::vector<LengthGroup> PlanLengthGroups(const std::vector<int64_t>& lengths, int64_t overhead_tokens,
                                          int64_t length_quantum = 1);

// Padded token positions of a plan: sum of rows(g) * padded_length(g).
int64_t PaddedTokens(const std::vector<LengthGroup>& groups);

}  // namespace adapterd::serving

#endif  // ADAPTERD_SERVER_SERVING_LENGTH_GROUPS_H_
