// A task kind's training side, behind one interface: what its examples must
// hold, the label set they make, the parameters a task of the kind stores,
// the rows and targets its examples become, and how a validation pass is
// scored (docs/ARCHITECTURE.md, "Task kinds"). One class per kind, each in
// its own file under server/training/kinds/; KindRulesOf is training's only
// dispatch on the kind. The kind's facts (name, outputs, selection metric,
// parameter rules) are its KindSpec (server/model/task_kinds.h); its head
// is server/model/heads.cc; its Predict planning and decoding are serving's
// (server/serving/kind_serving.h).
//
//   kind                     reads                          rows
//   sequence classification  text [, text_pair], label      one per example, truncated
//   multi-label              text [, text_pair], labels     one per example, truncated
//                            (or one `label`)
//   regression               text [, text_pair], label      one per example, truncated
//                            (a decimal number)
//   token classification     tokens + tags, or              windows of the text
//                            text + entities
//   extractive QA            text (question), text_pair     run_squad's windows of the
//                            (context), answers             context
//
// No LibTorch (adapterd::training_data): dataset validation uses these rules
// and builds without it.
//
// Thread safety: the rules are immutable singletons; every method is a pure
// function of its arguments.
#ifndef ADAPTERD_SERVER_TRAINING_KIND_RULES_H_
#define ADAPTERD_SERVER_TRAINING_KIND_RULES_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/adapter_config.h"
#include "server/model/task_kinds.h"
#include "server/model/tokenizer.h"
#include "server/training/example.h"
#include "server/training/task_rows.h"

namespace adapterd::training {

// What a kind's rows are cut with: the task's stored parameters, the
// tokenizer (whose max_seq_len is the longest row), and each label's output
// index.
struct RowContext {
  const model::AdapterConfig& config;
  const model::BertTokenizer& tokenizer;
  const std::map<std::string, int64_t>& label_index;
};

// What a job chose that a kind's stored parameters follow (Hyperparameters'
// fields, resolved).
struct ParameterChoices {
  int32_t max_seq_len = 128;
  int32_t doc_stride = 0;  // 0: DefaultDocStride
  int32_t max_question_tokens = 64;
  int32_t max_answer_tokens = 30;
};

class KindRules {
 public:
  virtual ~KindRules() = default;
  virtual model::TaskKind kind() const = 0;

  // ---- Examples (dataset validation and the trainer).

  // OK, or INVALID_ARGUMENT naming the field and the rule: the example lacks
  // what the kind reads or breaks one of its rules. Assumes
  // CheckExampleFields passed. Callers say which example.
  virtual absl::Status CheckExample(const Example& e) const = 0;
  // The names the example adds to its task's label set: its label, its
  // labels, its entity types; none for the kinds without labels.
  virtual std::vector<std::string> LabelNames(const Example& e) const { return {}; }
  // For the kinds with labels (KindSpec::min_labels > 0): what a name is
  // called in messages ("label", "entity type"), the label of the task's set
  // it stands for ("B-" + type for token classification), the task's labels
  // from its training data's distinct names (sorted), and OK or
  // INVALID_ARGUMENT when the data has too few distinct names.
  virtual std::string_view name_noun() const { return "label"; }
  virtual std::string LabelOfName(const std::string& name) const { return name; }
  virtual std::vector<std::string> LabelsOfNames(const std::vector<std::string>& names) const { return names; }
  virtual absl::Status CheckDistinctNames(const std::map<std::string, int64_t>& counts) const {
    return absl::OkStatus();
  }
  // The token-reading kinds: OK when the example's words (entities) and
  // answers map onto tokens, else INVALID_ARGUMENT; counts a question longer
  // than `max_question_tokens` in `cut_questions`.
  virtual absl::Status CheckTokens(const Example& e, const model::BertTokenizer& tokenizer, int32_t max_question_tokens,
                                   int64_t& cut_questions) const {
    return absl::OkStatus();
  }
  // True when each example has exactly one label (sequence classification):
  // the validation split is stratified by it, and label imbalance is warned
  // of.
  virtual bool one_label_per_example() const { return false; }

  // ---- What a task of the kind stores besides its labels: the regression
  // target's standardisation (from `train`), the windows it was trained with.
  virtual absl::Status SetParameters(const std::vector<Example>& train, const ParameterChoices& choices,
                                     model::AdapterConfig& config) const {
    return absl::OkStatus();
  }

  // ---- Rows and scoring (training and validation).

  // The RowTarget bits of the target fields its rows carry.
  virtual uint32_t targets() const = 0;
  // Appends the example's rows (with their targets) to `out` and fills
  // `gold` (its rows' indices and what scoring needs). INVALID_ARGUMENT for
  // an example the task cannot read (a label outside its set).
  virtual absl::Status AddRows(const RowContext& context, const Example& e, RowSet& out, ExampleGold& gold) const = 0;
  // The kind's figures (Evaluation's fields of its row in task_rows.h) of
  // `outputs`, each row's head outputs (K per row; K per position of the
  // row's own length for the token-reading kinds); loss is left 0.
  virtual Evaluation Score(const model::AdapterConfig& config, const RowSet& data, const RowOutputs& outputs) const = 0;
};

// The rules of `kind`, which must be one of TaskKind's values.
const KindRules& KindRulesOf(model::TaskKind kind);

// Shorthands for the rules' two example-level questions.
inline absl::Status CheckExampleForKind(model::TaskKind kind, const Example& e) {
  return KindRulesOf(kind).CheckExample(e);
}
inline std::vector<std::string> LabelNamesOf(model::TaskKind kind, const Example& e) {
  return KindRulesOf(kind).LabelNames(e);
}

}  // namespace adapterd::training

#endif  // ADAPTERD_SERVER_TRAINING_KIND_RULES_H_
