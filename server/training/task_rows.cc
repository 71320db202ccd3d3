#include "server/training/task_rows.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "server/training/kind_rules.h"

namespace adapterd::training {

absl::StatusOr<RowSet> EncodeRows(const model::AdapterConfig& config, const model::BertTokenizer& tokenizer,
                                  const std::vector<Example>& examples, const char* which) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < config.labels.size(); ++i) index[config.labels[i]] = static_cast<int64_t>(i);
  const RowContext context{config, tokenizer, index};
  const KindRules& rules = KindRulesOf(config.kind);
  RowSet out;
  for (size_t i = 0; i < examples.size(); ++i) {
    const size_t first_row = out.rows.size();
    ExampleGold gold;
    absl::Status added = rules.AddRows(context, examples[i], out, gold);
    if (!added.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(which, " example ", i, ": ", added.message()));
    }
    for (size_t r = first_row; r < out.rows.size(); ++r) out.rows[r].example = static_cast<int32_t>(i);
    out.examples.push_back(std::move(gold));
  }
  return out;
}

double MetricValue(const Evaluation& e, model::Metric metric) {
  switch (metric) {
    case model::Metric::kValAccuracy:
      return e.accuracy;
    case model::Metric::kMicroF1:
      return e.micro_f1;
    case model::Metric::kSpearman:
      return e.spearman;
    case model::Metric::kF1:
      return e.f1;
  }
  return 0;
}

double SelectionMetric(model::TaskKind kind, const Evaluation& e) {
  return MetricValue(e, model::SpecOf(kind).selection);
}

Evaluation ScoreRows(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) {
  if (data.examples.empty()) return {};
  return KindRulesOf(config.kind).Score(config, data, outputs);
}

}  // namespace adapterd::training
