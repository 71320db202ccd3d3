#include "server/training/kind_rules.h"

#include <iterator>

#include "server/training/kinds/kind_support.h"

namespace adapterd::training {
namespace {

using RulesAccessor = const KindRules& (*)();

// Each kind's rules, in TaskKind's order (as the kinds' table, task_kinds.cc,
// lists them); kind_rules_test checks each entry's kind().
constexpr RulesAccessor kRules[] = {
    kinds::SequenceClassificationRules, kinds::MultiLabelRules,   kinds::RegressionRules,
    kinds::TokenClassificationRules,    kinds::ExtractiveQaRules,
};
static_assert(std::size(kRules) == model::kNumTaskKinds, "one KindRules per task kind");

}  // namespace

const KindRules& KindRulesOf(model::TaskKind kind) { return kRules[static_cast<size_t>(kind) - 1](); }

}  // namespace adapterd::training
