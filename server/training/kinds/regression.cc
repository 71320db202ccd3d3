// Regression: a decimal number per example (`label`), standardised with
// the training split's mean and standard deviation (stored with the task);
// one truncated row per example; scored by Spearman (selects), Pearson and
// MSE in the targets' units.
#include "common/status_macros.h"
#include "server/training/kind_examples.h"
#include "server/training/kinds/kind_support.h"
#include "server/training/validation_metrics.h"

namespace adapterd::training::kinds {
namespace {

class Regression final : public KindRules {
 public:
  model::TaskKind kind() const override { return model::TaskKind::kRegression; }

  absl::Status CheckExample(const Example& e) const override { return RegressionTargetOf(e).status(); }

  absl::Status SetParameters(const std::vector<Example>& train, const ParameterChoices&,
                             model::AdapterConfig& config) const override {
    std::vector<double> targets;
    for (size_t i = 0; i < train.size(); ++i) {
      absl::StatusOr<double> t = RegressionTargetOf(train[i]);
      if (!t.ok()) return BadExample(absl::StrCat("training example ", i, ": ", t.status().message()));
      targets.push_back(*t);
    }
    config.target = model::StandardizationOf(targets);
    return absl::OkStatus();
  }

  uint32_t targets() const override { return kValueTarget; }
  absl::Status AddRows(const RowContext& c, const Example& e, RowSet& out, ExampleGold& gold) const override {
    Row r = PooledRow(c.tokenizer, e);
    ASSIGN_OR_RETURN(gold.value, RegressionTargetOf(e));
    r.value = static_cast<float>(model::Standardize(gold.value, c.config.target));
    AddRow(std::move(r), out, gold);
    return absl::OkStatus();
  }
  Evaluation Score(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) const override {
    std::vector<double> gold, predicted;
    for (const ExampleGold& g : data.examples) {
      gold.push_back(g.value);
      predicted.push_back(model::Destandardize(outputs[static_cast<size_t>(g.rows.front())][0], config.target));
    }
    const RegressionScores s = RegressionMetrics(gold, predicted);
    Evaluation e;
    e.spearman = s.spearman;
    e.pearson = s.pearson;
    e.mse = s.mse;
    return e;
  }
};

}  // namespace

const KindRules& RegressionRules() {
  static const Regression rules;
  return rules;
}

}  // namespace adapterd::training::kinds
