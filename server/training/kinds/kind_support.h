// What the kinds' rules (kind_rules.h) share, and the one accessor per
// kind that KindRulesOf's table lists. Internal to server/training.
//
// Thread safety: pure functions; the rules are immutable singletons.
#ifndef ADAPTERD_SERVER_TRAINING_KINDS_KIND_SUPPORT_H_
#define ADAPTERD_SERVER_TRAINING_KINDS_KIND_SUPPORT_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/task_kinds.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"
#include "server/training/kind_rules.h"
#include "server/training/task_rows.h"

namespace adapterd::training::kinds {

// One accessor per kind, each in its own file.
const KindRules& SequenceClassificationRules();  // sequence_classification.cc
const KindRules& MultiLabelRules();              // multi_label.cc
const KindRules& RegressionRules();              // regression.cc
const KindRules& TokenClassificationRules();     // token_classification.cc
const KindRules& ExtractiveQaRules();            // extractive_qa.cc

// INVALID_ARGUMENT with `why`.
absl::Status BadExample(const std::string& why);

// The output index of a label or tag `name`; INVALID_ARGUMENT "<what>
// 'name' is not one of the task's <what>s" for a name outside the set.
absl::StatusOr<int64_t> IndexOf(const RowContext& context, const std::string& name, const char* what);

// The classification kinds' rule for a dataset's labels: at least 2
// distinct ones (INVALID_ARGUMENT naming the one found).
absl::Status CheckAtLeastTwoLabels(const std::map<std::string, int64_t>& counts);

// The pooled kinds' one row: the text (and pair) encoded and truncated.
Row PooledRow(const model::BertTokenizer& tokenizer, const Example& e);
// Appends `row` to `out` as one of `gold`'s rows.
void AddRow(Row row, RowSet& out, ExampleGold& gold);

// A token-reading kind's row of window `w` (its context geometry set).
Row WindowRow(const model::SlidingWindow& w);
// An example's windows as SlidingWindows (geometry only) and its rows'
// outputs, for window_decoding.h.
std::vector<model::SlidingWindow> WindowsOf(const RowSet& data, const ExampleGold& gold);
std::vector<std::span<const float>> OutputsOf(const RowOutputs& outputs, const ExampleGold& gold);

}  // namespace adapterd::training::kinds

#endif  // ADAPTERD_SERVER_TRAINING_KINDS_KIND_SUPPORT_H_
