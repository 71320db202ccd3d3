// Fuzzes ParseDataset (client/dataset_file.h): the CSV and JSON Lines files
// users upload with adapterctl.
//
// Input: byte 0 picks the format (CSV, JSON Lines, or kAuto, which sniffs the
// content), the rest is the file.
//
// Invariants of a successful parse: at least one example; every example has
// a non-empty text and label and only valid UTF-8 (as documented); writing the
// examples back as CSV (every field quoted) and as JSON Lines and parsing
// those gives the same examples. Errors are INVALID_ARGUMENT and start with
// the file's name.
//
// Then the examples go through training::ValidateDataset (server/training/
// dataset_validator.h), as the server does before it queues a job (every 4th
// example as validation data, the rest as training data, with the default
// encoder's vocabulary): it succeeds or fails INVALID_ARGUMENT with a valid
// UTF-8 message; a report counts every example, its labels are distinct and
// sorted (at least 2), and the label counts add up to the training examples.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/dataset_file.h"
#include "common/utf8.h"
#include "server/model/tokenizer.h"
#include "server/training/dataset_validator.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::client {
namespace {

constexpr std::string_view kName = "fuzz";  // no extension: kAuto sniffs

std::string CsvField(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string ToCsv(const std::vector<v1::Example>& examples) {
  std::string out = "text,text_pair,label\n";
  for (const v1::Example& e : examples) {
    out += CsvField(e.text()) + "," + CsvField(e.text_pair()) + "," + CsvField(e.label()) + "\n";
  }
  return out;
}

std::string ToJsonl(const std::vector<v1::Example>& examples) {
  std::string out;
  for (const v1::Example& e : examples) {
    nlohmann::json line = {{"text", e.text()}, {"label", e.label()}};
    if (!e.text_pair().empty()) line["text_pair"] = e.text_pair();
    out += line.dump() + "\n";
  }
  return out;
}

void CheckSame(const std::vector<v1::Example>& want, const absl::StatusOr<std::vector<v1::Example>>& got,
               const char* how) {
  FUZZ_CHECK(got.ok()) << "examples written back as " << how << " do not parse: " << got.status();
  FUZZ_CHECK(got->size() == want.size()) << how << " round trip: " << got->size() << " examples, not " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    const v1::Example& a = want[i];
    const v1::Example& b = (*got)[i];
    FUZZ_CHECK(a.text() == b.text() && a.text_pair() == b.text_pair() && a.label() == b.label())
        << how << " round trip changed example " << i;
  }
}

void CheckValidation(const std::vector<v1::Example>& examples) {
  static const model::BertTokenizer* const tokenizer = [] {
    auto t = model::BertTokenizer::FromVocabFile(ADAPTERD_FUZZ_VOCAB, model::TokenizerOptions{});
    FUZZ_CHECK(t.ok()) << t.status();
    return t->release();
  }();
  std::vector<training::Example> train, validation;
  for (size_t i = 0; i < examples.size(); ++i) {
    training::Example e{examples[i].text(), examples[i].text_pair(), examples[i].label()};
    (i % 4 == 3 ? validation : train).push_back(std::move(e));
  }
  training::DatasetLimits limits;
  limits.min_examples = 2;
  absl::StatusOr<training::DatasetReport> report =
      training::ValidateDataset(train, validation, *tokenizer, /*max_seq_len=*/16, limits);
  if (!report.ok()) {
    FUZZ_CHECK(report.status().code() == absl::StatusCode::kInvalidArgument) << report.status();
    FUZZ_CHECK(IsValidUtf8(std::string(report.status().message()))) << "message is not valid UTF-8";
    return;
  }
  FUZZ_CHECK(report->num_train == static_cast<int64_t>(train.size()));
  FUZZ_CHECK(report->num_validation == static_cast<int64_t>(validation.size()));
  FUZZ_CHECK(report->labels.size() >= 2) << "fewer than 2 labels accepted";
  FUZZ_CHECK(std::is_sorted(report->labels.begin(), report->labels.end()) &&
             std::adjacent_find(report->labels.begin(), report->labels.end()) == report->labels.end())
      << "labels not distinct and sorted";
  int64_t counted = 0;
  for (const auto& [label, n] : report->label_counts) counted += n;
  FUZZ_CHECK(counted == report->num_train) << "label counts do not add up";
}

}  // namespace
}  // namespace adapterd::client

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::client;
  if (size < 1) return 0;
  static constexpr DatasetFormat kFormats[3] = {DatasetFormat::kCsv, DatasetFormat::kJsonl, DatasetFormat::kAuto};
  const DatasetFormat format = kFormats[data[0] % 3];
  const std::string_view contents = adapterd::fuzz::AsStringView(data + 1, size - 1);

  absl::StatusOr<std::vector<adapterd::v1::Example>> examples = ParseDataset(contents, format, kName);
  if (!examples.ok()) {
    FUZZ_CHECK(examples.status().code() == absl::StatusCode::kInvalidArgument)
        << "unexpected error " << examples.status();
    const std::string message(examples.status().message());
    FUZZ_CHECK(message.starts_with(std::string(kName) + ": ")) << "error does not name the file: " << message;
    return 0;
  }
  FUZZ_CHECK(!examples->empty()) << "a successful parse without examples";
  for (const adapterd::v1::Example& e : *examples) {
    FUZZ_CHECK(!e.text().empty() && !e.label().empty()) << "empty text or label";
    FUZZ_CHECK(adapterd::IsValidUtf8(e.text()) && adapterd::IsValidUtf8(e.text_pair()) &&
               adapterd::IsValidUtf8(e.label()))
        << "invalid UTF-8 in an example";
  }
  CheckSame(*examples, ParseDataset(ToCsv(*examples), DatasetFormat::kCsv, kName), "CSV");
  CheckSame(*examples, ParseDataset(ToJsonl(*examples), DatasetFormat::kJsonl, kName), "JSON Lines");
  CheckValidation(*examples);
  return 0;
}
