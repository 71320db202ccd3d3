// Sequence classification: one label per example (`label`), one truncated
// row per example over its text (and pair); scored by accuracy (selects)
// and macro F1.
#include <algorithm>

#include "common/status_macros.h"
#include "server/training/kinds/kind_support.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training::kinds {
namespace {

class SequenceClassification final : public KindRules {
 public:
  model::TaskKind kind() const override { return model::TaskKind::kSequenceClassification; }

  absl::Status CheckExample(const Example& e) const override {
    if (e.label.empty()) return BadExample("label is missing");
    return absl::OkStatus();
  }
  std::vector<std::string> LabelNames(const Example& e) const override { return {e.label}; }
  absl::Status CheckDistinctNames(const std::map<std::string, int64_t>& counts) const override {
    return CheckAtLeastTwoLabels(counts);
  }
  bool one_label_per_example() const override { return true; }

  uint32_t targets() const override { return kLabelTarget; }
  absl::Status AddRows(const RowContext& c, const Example& e, RowSet& out, ExampleGold& gold) const override {
    Row r = PooledRow(c.tokenizer, e);
    ASSIGN_OR_RETURN(r.label, IndexOf(c, e.label, "label"));
    gold.label = r.label;
    AddRow(std::move(r), out, gold);
    return absl::OkStatus();
  }
  Evaluation Score(const model::AdapterConfig&, const RowSet& data, const RowOutputs& outputs) const override {
    std::vector<int32_t> gold, predicted;
    for (const ExampleGold& g : data.examples) {
      const std::vector<float>& logits = outputs[static_cast<size_t>(g.rows.front())];
      gold.push_back(static_cast<int32_t>(g.label));
      predicted.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    Evaluation e;
    e.accuracy = Accuracy(gold, predicted);
    e.micro_f1 = e.accuracy;  // one label per example
    e.macro_f1 = ClassF1(gold, predicted).macro_f1;
    return e;
  }
};

}  // namespace

const KindRules& SequenceClassificationRules() {
  static const SequenceClassification rules;
  return rules;
}

}  // namespace adapterd::training::kinds
