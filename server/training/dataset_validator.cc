#include "server/training/dataset_validator.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/training/kind_examples.h"
#include "server/training/kind_rules.h"

namespace adapterd::training {
namespace {

absl::Status Bad(const char* which, size_t i, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(which, " example ", i, ": ", why));
}

using model::TaskKind;

absl::Status CheckExample(const Example& e, TaskKind kind, const char* which, size_t i) {
  absl::Status fields = CheckExampleFields(e);
  if (fields.ok()) fields = CheckExampleForKind(kind, e);
  return fields.ok() ? fields : Bad(which, i, std::string(fields.message()));
}

bool HasLabels(TaskKind kind) { return model::SpecOf(kind).min_labels > 0; }

// Refusals that need only sizes: too many examples, or too many bytes.
absl::Status CheckSizes(const std::vector<Example>& train, const std::vector<Example>& validation,
                        const DatasetLimits& limits, DatasetReport& report) {
  report.num_train = static_cast<int64_t>(train.size());
  report.num_validation = static_cast<int64_t>(validation.size());
  const int64_t total = report.num_train + report.num_validation;
  if (total > limits.max_examples) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset has ", total, " examples; the limit is ", limits.max_examples));
  }
  for (const auto* set : {&train, &validation}) {
    for (const Example& e : *set) {
      report.total_bytes += static_cast<int64_t>(ExampleBytes(e));
    }
  }
  if (report.total_bytes > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset holds ", report.total_bytes, " bytes of text; the limit is ", limits.max_bytes));
  }
  return absl::OkStatus();
}

// Each example on its own, counting the training labels; then the label set
// those make: enough examples, and for the kinds with labels at least 2 (1
// entity type), at most the limit, and validation labels among the training
// ones.
absl::Status CheckExamplesAndLabels(const std::vector<Example>& train, const std::vector<Example>& validation,
                                    TaskKind kind, const DatasetLimits& limits, DatasetReport& report) {
  for (size_t i = 0; i < train.size(); ++i) {
    RETURN_IF_ERROR(CheckExample(train[i], kind, "train", i));
    for (const std::string& name : LabelNamesOf(kind, train[i])) ++report.label_counts[name];
  }
  for (size_t i = 0; i < validation.size(); ++i) {
    RETURN_IF_ERROR(CheckExample(validation[i], kind, "validation", i));
    for (const std::string& name : LabelNamesOf(kind, validation[i])) {
      if (!report.label_counts.contains(name)) {
        return Bad("validation", i, absl::StrCat("label '", name, "' does not occur in the training data"));
      }
    }
  }
  if (report.num_train < limits.min_examples) {
    return absl::InvalidArgumentError(absl::StrCat("dataset has ", report.num_train, " training examples; at least ",
                                                   limits.min_examples, " are required"));
  }
  if (!HasLabels(kind)) return absl::OkStatus();
  RETURN_IF_ERROR(KindRulesOf(kind).CheckDistinctNames(report.label_counts));
  if (static_cast<int64_t>(report.label_counts.size()) > limits.max_labels) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset has ", report.label_counts.size(), " distinct labels; the limit is ", limits.max_labels));
  }
  return absl::OkStatus();
}

// The task's labels: an existing task's, which every training label must be
// one of (a label without examples is a warning), or the training labels.
// Token classification's are BioTagSet of the entity types.
absl::Status ResolveLabels(const std::vector<Example>& train, TaskKind kind,
                           const std::vector<std::string>* existing_labels, DatasetReport& report) {
  const KindRules& rules = KindRulesOf(kind);
  std::vector<std::string> names;
  for (const auto& [label, count] : report.label_counts) names.push_back(label);
  std::vector<std::string> wanted = rules.LabelsOfNames(names);
  if (existing_labels == nullptr) {
    report.labels = std::move(wanted);
    return absl::OkStatus();
  }
  const std::set<std::string> known(existing_labels->begin(), existing_labels->end());
  for (size_t i = 0; i < train.size(); ++i) {
    for (const std::string& name : rules.LabelNames(train[i])) {
      if (!known.contains(rules.LabelOfName(name))) {
        return Bad("train", i,
                   absl::StrCat(std::string(rules.name_noun()), " '", name, "' conflicts with the task's ",
                                std::string(model::SpecOf(kind).label_noun), " [",
                                absl::StrJoin(*existing_labels, ", "), "]"));
      }
    }
  }
  report.labels = *existing_labels;
  std::vector<std::string> absent;
  const std::set<std::string> have(wanted.begin(), wanted.end());
  for (const std::string& l : *existing_labels) {
    if (!have.contains(l)) absent.push_back(l);
  }
  if (!absent.empty()) {
    report.warnings.push_back(
        absl::StrCat("no training examples for the task's labels: ", absl::StrJoin(absent, ", ")));
  }
  return absl::OkStatus();
}

// The token-reading kinds: every example's words and answers map onto
// tokens (KindRules::CheckTokens); counts the questions that will be cut.
absl::Status CheckTokenMapping(const std::vector<Example>& examples, const model::BertTokenizer& tokenizer,
                               const DatasetShape& shape, const char* which, int64_t& cut_questions) {
  const KindRules& rules = KindRulesOf(shape.kind);
  for (size_t i = 0; i < examples.size(); ++i) {
    const absl::Status mapped = rules.CheckTokens(examples[i], tokenizer, shape.max_question_len, cut_questions);
    if (!mapped.ok()) return Bad(which, i, std::string(mapped.message()));
  }
  return absl::OkStatus();
}

// Validation examples whose inputs are also training examples' inputs.
absl::Status AddDuplicateWarning(const std::vector<Example>& train, const std::vector<Example>& validation,
                                 DatasetReport& report) {
  if (validation.empty()) return absl::OkStatus();
  const auto key = [](const Example& e) {
    return std::make_pair(e.tokens.empty() ? e.text : model::JoinWords(e.tokens), e.text_pair);
  };
  std::set<std::pair<std::string, std::string>> seen;
  for (const Example& e : train) seen.insert(key(e));
  for (const Example& e : validation) report.train_validation_duplicates += seen.contains(key(e));
  if (report.train_validation_duplicates > 0) {
    report.warnings.push_back(
        absl::StrCat(report.train_validation_duplicates, " validation examples also appear in the training data"));
  }
  return absl::OkStatus();
}

// What trains but may disappoint: truncated examples, cut questions,
// imbalanced labels, validation examples that are also training examples.
absl::Status AddWarnings(const std::vector<Example>& train, const std::vector<Example>& validation,
                         const model::BertTokenizer& tokenizer, const DatasetShape& shape, const DatasetLimits& limits,
                         DatasetReport& report) {
  const int64_t total = report.num_train + report.num_validation;
  if (report.cut_questions > 0) {
    report.warnings.push_back(absl::StrCat(report.cut_questions, " of ", total,
                                           " questions are longer than max_question_len ", shape.max_question_len,
                                           " tokens and will be cut"));
  }
  if (!model::ReadsTokens(shape.kind)) {
    model::TokenizerOptions topts = tokenizer.options();
    topts.max_seq_len = shape.max_seq_len;
    ASSIGN_OR_RETURN(auto tok, model::BertTokenizer::FromTokens(tokenizer.tokens(), topts));
    for (const auto* set : {&train, &validation}) {
      for (const Example& e : *set) {
        const model::Encoding enc = e.text_pair.empty() ? tok->Encode(e.text) : tok->Encode(e.text, e.text_pair);
        if (enc.num_truncated > 0) ++report.truncated_examples;
      }
    }
  }
  if (report.truncated_examples > 0) {
    report.warnings.push_back(absl::StrCat(report.truncated_examples, " of ", total,
                                           " examples are longer than max_seq_len ", shape.max_seq_len,
                                           " tokens and will be truncated"));
  }
  if (!KindRulesOf(shape.kind).one_label_per_example()) return AddDuplicateWarning(train, validation, report);
  int64_t lo = INT64_MAX, hi = 0;
  std::string lo_label, hi_label;
  for (const auto& [label, count] : report.label_counts) {
    if (count < lo) lo = count, lo_label = label;
    if (count > hi) hi = count, hi_label = label;
  }
  if (static_cast<double>(hi) > limits.imbalance_warning_ratio * static_cast<double>(lo)) {
    report.warnings.push_back(
        absl::StrCat("labels are imbalanced: '", hi_label, "' has ", hi, " examples, '", lo_label, "' has ", lo));
  }
  return AddDuplicateWarning(train, validation, report);
}

}  // namespace

absl::StatusOr<DatasetReport> ValidateDataset(const std::vector<Example>& train, const std::vector<Example>& validation,
                                              const model::BertTokenizer& tokenizer, const DatasetShape& shape,
                                              const DatasetLimits& limits,
                                              const std::vector<std::string>* existing_labels) {
  DatasetReport report;
  RETURN_IF_ERROR(CheckSizes(train, validation, limits, report));
  RETURN_IF_ERROR(CheckExamplesAndLabels(train, validation, shape.kind, limits, report));
  RETURN_IF_ERROR(ResolveLabels(train, shape.kind, existing_labels, report));
  if (model::ReadsTokens(shape.kind)) {
    RETURN_IF_ERROR(CheckTokenMapping(train, tokenizer, shape, "train", report.cut_questions));
    RETURN_IF_ERROR(CheckTokenMapping(validation, tokenizer, shape, "validation", report.cut_questions));
  }
  RETURN_IF_ERROR(AddWarnings(train, validation, tokenizer, shape, limits, report));
  return report;
}

}  // namespace adapterd::training
