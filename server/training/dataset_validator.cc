#include "server/training/dataset_validator.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace adapterd::training {
namespace {

absl::Status Bad(const char* which, size_t i, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(which, " example ", i, ": ", why));
}

absl::Status CheckExample(const Example& e, const char* which, size_t i) {
  absl::Status fields = CheckExampleFields(e.text, e.text_pair, e.label);
  return fields.ok() ? fields : Bad(which, i, std::string(fields.message()));
}

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
      report.total_bytes += static_cast<int64_t>(e.text.size() + e.text_pair.size() + e.label.size());
    }
  }
  if (report.total_bytes > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset holds ", report.total_bytes, " bytes of text; the limit is ", limits.max_bytes));
  }
  return absl::OkStatus();
}

// Each example on its own, counting the training labels; then the label set
// those make: enough examples, at least 2 labels, at most the limit, and
// validation labels among the training ones.
absl::Status CheckExamplesAndLabels(const std::vector<Example>& train, const std::vector<Example>& validation,
                                    const DatasetLimits& limits, DatasetReport& report) {
  for (size_t i = 0; i < train.size(); ++i) {
    RETURN_IF_ERROR(CheckExample(train[i], "train", i));
    ++report.label_counts[train[i].label];
  }
  for (size_t i = 0; i < validation.size(); ++i) {
    RETURN_IF_ERROR(CheckExample(validation[i], "validation", i));
    if (!report.label_counts.contains(validation[i].label)) {
      return Bad("validation", i,
                 absl::StrCat("label '", validation[i].label, "' does not occur in the training data"));
    }
  }
  if (report.num_train < limits.min_examples) {
    return absl::InvalidArgumentError(absl::StrCat("dataset has ", report.num_train, " training examples; at least ",
                                                   limits.min_examples, " are required"));
  }
  if (report.label_counts.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset needs at least 2 distinct labels; found ", report.label_counts.size(),
                     report.label_counts.empty() ? "" : absl::StrCat(" ('", report.label_counts.begin()->first, "')")));
  }
  if (static_cast<int64_t>(report.label_counts.size()) > limits.max_labels) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset has ", report.label_counts.size(), " distinct labels; the limit is ", limits.max_labels));
  }
  return absl::OkStatus();
}

// The task's labels: an existing task's, which every training label must be
// one of (a label without examples is a warning), or the training labels.
absl::Status ResolveLabels(const std::vector<Example>& train, const std::vector<std::string>* existing_labels,
                           DatasetReport& report) {
  if (existing_labels == nullptr) {
    for (const auto& [label, count] : report.label_counts) report.labels.push_back(label);
    return absl::OkStatus();
  }
  const std::set<std::string> known(existing_labels->begin(), existing_labels->end());
  for (size_t i = 0; i < train.size(); ++i) {
    if (!known.contains(train[i].label)) {
      return Bad("train", i,
                 absl::StrCat("label '", train[i].label, "' conflicts with the task's labels [",
                              absl::StrJoin(*existing_labels, ", "), "]"));
    }
  }
  report.labels = *existing_labels;
  std::vector<std::string> absent;
  for (const std::string& l : *existing_labels) {
    if (!report.label_counts.contains(l)) absent.push_back(l);
  }
  if (!absent.empty()) {
    report.warnings.push_back(
        absl::StrCat("no training examples for the task's labels: ", absl::StrJoin(absent, ", ")));
  }
  return absl::OkStatus();
}

// What trains but may disappoint: truncated examples, imbalanced labels,
// validation examples that are also training examples.
absl::Status AddWarnings(const std::vector<Example>& train, const std::vector<Example>& validation,
                         const model::BertTokenizer& tokenizer, int max_seq_len, const DatasetLimits& limits,
                         DatasetReport& report) {
  model::TokenizerOptions topts = tokenizer.options();
  topts.max_seq_len = max_seq_len;
  ASSIGN_OR_RETURN(auto tok, model::BertTokenizer::FromTokens(tokenizer.tokens(), topts));
  for (const auto* set : {&train, &validation}) {
    for (const Example& e : *set) {
      const model::Encoding enc = e.text_pair.empty() ? tok->Encode(e.text) : tok->Encode(e.text, e.text_pair);
      if (enc.num_truncated > 0) ++report.truncated_examples;
    }
  }
  if (report.truncated_examples > 0) {
    report.warnings.push_back(absl::StrCat(report.truncated_examples, " of ", report.num_train + report.num_validation,
                                           " examples are longer than max_seq_len ", max_seq_len,
                                           " tokens and will be truncated"));
  }
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
  if (!validation.empty()) {
    std::set<std::pair<std::string, std::string>> seen;
    for (const Example& e : train) seen.emplace(e.text, e.text_pair);
    for (const Example& e : validation) report.train_validation_duplicates += seen.contains({e.text, e.text_pair});
    if (report.train_validation_duplicates > 0) {
      report.warnings.push_back(
          absl::StrCat(report.train_validation_duplicates, " validation examples also appear in the training data"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatasetReport> ValidateDataset(const std::vector<Example>& train, const std::vector<Example>& validation,
                                              const model::BertTokenizer& tokenizer, int max_seq_len,
                                              const DatasetLimits& limits,
                                              const std::vector<std::string>* existing_labels) {
  DatasetReport report;
  RETURN_IF_ERROR(CheckSizes(train, validation, limits, report));
  RETURN_IF_ERROR(CheckExamplesAndLabels(train, validation, limits, report));
  RETURN_IF_ERROR(ResolveLabels(train, existing_labels, report));
  RETURN_IF_ERROR(AddWarnings(train, validation, tokenizer, max_seq_len, limits, report));
  return report;
}

}  // namespace adapterd::training
