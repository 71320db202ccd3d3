// Multi-label classification: any number of labels per example (`labels`,
// or one `label`), none twice; one truncated row per example with a 0/1
// target per label; scored by micro F1 at 0.5 (selects), macro F1 and exact
// match.
#include <algorithm>
#include <set>

#include "common/status_macros.h"
#include "server/training/kind_examples.h"
#include "server/training/kinds/kind_support.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training::kinds {
namespace {

class MultiLabel final : public KindRules {
 public:
  model::TaskKind kind() const override { return model::TaskKind::kMultiLabelClassification; }

  absl::Status CheckExample(const Example& e) const override {
    std::set<std::string> seen;
    for (const std::string& l : MultiLabelsOf(e)) {
      if (!seen.insert(l).second) return BadExample(absl::StrCat("labels lists '", l, "' twice"));
    }
    return absl::OkStatus();
  }
  std::vector<std::string> LabelNames(const Example& e) const override { return MultiLabelsOf(e); }
  absl::Status CheckDistinctNames(const std::map<std::string, int64_t>& counts) const override {
    return CheckAtLeastTwoLabels(counts);
  }

  uint32_t targets() const override { return kLabelSetTarget; }
  absl::Status AddRows(const RowContext& c, const Example& e, RowSet& out, ExampleGold& gold) const override {
    Row r = PooledRow(c.tokenizer, e);
    r.label_set.assign(static_cast<size_t>(c.config.num_labels()), 0.0f);
    for (const std::string& l : MultiLabelsOf(e)) {
      ASSIGN_OR_RETURN(const int64_t i, IndexOf(c, l, "label"));
      r.label_set[static_cast<size_t>(i)] = 1.0f;
      gold.label_ids.push_back(static_cast<int32_t>(i));
    }
    std::sort(gold.label_ids.begin(), gold.label_ids.end());
    AddRow(std::move(r), out, gold);
    return absl::OkStatus();
  }
  Evaluation Score(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) const override {
    std::vector<std::vector<int32_t>> gold, predicted;
    for (const ExampleGold& g : data.examples) {
      gold.push_back(g.label_ids);
      std::vector<int32_t>& p = predicted.emplace_back();
      for (const model::LabelProbability& l :
           model::LabelsAtThreshold(outputs[static_cast<size_t>(g.rows.front())], 0.5)) {
        p.push_back(l.label);
      }
      std::sort(p.begin(), p.end());
    }
    const MultiLabelScores s = MultiLabelF1(gold, predicted, static_cast<int32_t>(config.num_labels()));
    Evaluation e;
    e.micro_f1 = s.micro_f1;
    e.macro_f1 = s.macro_f1;
    e.exact_match = s.exact_match;
    return e;
  }
};

}  // namespace

const KindRules& MultiLabelRules() {
  static const MultiLabel rules;
  return rules;
}

}  // namespace adapterd::training::kinds
