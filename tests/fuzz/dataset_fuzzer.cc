// Fuzzes ParseDataset (common/dataset_file.h): the CSV and JSON Lines files
// users upload with adapterctl.
//
// Input: byte 0 picks the format (CSV, JSON Lines, kAuto, which sniffs the
// content, or SQuAD), the rest is the file.
//
// Invariants of a successful parse: at least one example; every example
// passes the server's upload check (training::CheckExampleFields: valid
// UTF-8, well-formed tokens, entities and answers), except the label length
// limit only the server applies; writing the examples back as JSON Lines
// (every field) and, for examples of the CSV columns, as CSV (every field
// quoted) and parsing those gives the same examples. Errors are
// INVALID_ARGUMENT and start with the file's name. CSV and JSON Lines
// streamed a piece at a time (DatasetStreamParser, the HTTP gateway's
// uploads; byte 0 also picks the piece size, 1 to 17 bytes) give the same
// examples, or the same error.
//
// Then the examples go through training::ValidateDataset (server/training/
// dataset_validator.h), as the server does before it queues a job (every 4th
// example as validation data, the rest as training data, with the default
// encoder's vocabulary), for every task kind: it succeeds or fails
// INVALID_ARGUMENT with a valid UTF-8 message; a report counts every
// example and its labels are distinct; for sequence classification they are
// sorted (at least 2) and the label counts add up to the training examples.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"

#include "common/dataset_file.h"
#include "common/utf8.h"
#include "server/model/tokenizer.h"
#include "server/training/dataset_validator.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd {
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

// Only examples of the CSV columns (text, text_pair, a non-empty label)
// round-trip through CSV.
bool CsvShaped(const std::vector<v1::Example>& examples) {
  return std::all_of(examples.begin(), examples.end(), [](const v1::Example& e) {
    return !e.label().empty() && e.labels().empty() && e.tokens().empty() && e.entities().empty() &&
           e.answers().empty();
  });
}

std::string ToCsv(const std::vector<v1::Example>& examples) {
  std::string out = "text,text_pair,label\n";
  for (const v1::Example& e : examples) {
    out += CsvField(e.text()) + "," + CsvField(e.text_pair()) + "," + CsvField(e.label()) + "\n";
  }
  return out;
}

// Every field, as the JSON Lines members that set it. An example with no
// target came from a sentence with no entities (no text_pair) or an
// unanswerable question (a context).
std::string ToJsonl(const std::vector<v1::Example>& examples) {
  std::string out;
  for (const v1::Example& e : examples) {
    nlohmann::json line = nlohmann::json::object();
    const bool targetless =
        e.label().empty() && e.labels().empty() && e.tokens().empty() && e.entities().empty() && e.answers().empty();
    if (targetless && !e.text_pair().empty()) {
      line = {{"question", e.text()}, {"context", e.text_pair()}, {"answers", nlohmann::json::array()}};
      out += line.dump() + "\n";
      continue;
    }
    if (!e.text().empty()) line["text"] = e.text();
    if (!e.text_pair().empty()) line["text_pair"] = e.text_pair();
    if (!e.label().empty()) line["label"] = e.label();
    if (!e.labels().empty()) line["labels"] = std::vector<std::string>(e.labels().begin(), e.labels().end());
    if (!e.tokens().empty()) {
      line["tokens"] = std::vector<std::string>(e.tokens().begin(), e.tokens().end());
      line["tags"] = std::vector<std::string>(e.tags().begin(), e.tags().end());
    }
    if (!e.entities().empty() || targetless) {
      line["entities"] = nlohmann::json::array();
      for (const auto& x : e.entities()) {
        line["entities"].push_back({{"start", x.start()}, {"end", x.end()}, {"label", x.label()}});
      }
    }
    if (!e.answers().empty()) {
      line["answers"] = nlohmann::json::array();
      for (const auto& a : e.answers())
        line["answers"].push_back({{"text", a.text()}, {"answer_start", a.answer_start()}});
    }
    out += line.dump() + "\n";
  }
  return out;
}

void CheckSame(const std::vector<v1::Example>& want, const absl::StatusOr<std::vector<v1::Example>>& got,
               const char* how) {
  FUZZ_CHECK(got.ok()) << "examples written back as " << how << " do not parse: " << got.status();
  FUZZ_CHECK(got->size() == want.size()) << how << " round trip: " << got->size() << " examples, not " << want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    FUZZ_CHECK(want[i].SerializeAsString() == (*got)[i].SerializeAsString())
        << how << " round trip changed example " << i;
  }
}

// The streamed parse (DatasetStreamParser: the HTTP gateway's uploads), fed
// in pieces of `piece` bytes, gives the whole parse's examples, or its error.
void CheckStreamed(std::string_view contents, DatasetFormat format,
                   const absl::StatusOr<std::vector<v1::Example>>& whole, size_t piece) {
  DatasetStreamParser parser(format, std::string(kName), contents.size() + 1);
  std::vector<v1::Example> all;
  absl::Status status;
  for (size_t pos = 0; status.ok() && pos < contents.size(); pos += piece) {
    absl::StatusOr<std::vector<v1::Example>> some = parser.Feed(contents.substr(pos, piece));
    if (!some.ok()) {
      status = some.status();
      break;
    }
    all.insert(all.end(), some->begin(), some->end());
  }
  if (status.ok()) {
    absl::StatusOr<std::vector<v1::Example>> last = parser.Finish();
    if (last.ok()) {
      all.insert(all.end(), last->begin(), last->end());
    } else {
      status = last.status();
    }
  }
  if (!whole.ok()) {
    FUZZ_CHECK(status == whole.status()) << "streamed in pieces of " << piece << ": " << status
                                         << ", whole: " << whole.status();
    return;
  }
  FUZZ_CHECK(status.ok()) << "streamed in pieces of " << piece << ": " << status << ", whole: ok";
  CheckSame(*whole, all, "a stream");
}

// Every kind's validation, as the server runs it before it queues a job.
void CheckValidation(const std::vector<v1::Example>& examples) {
  static const model::BertTokenizer* const tokenizer = [] {
    auto t = model::BertTokenizer::FromVocabFile(ADAPTERD_FUZZ_VOCAB, model::TokenizerOptions{});
    FUZZ_CHECK(t.ok()) << t.status();
    return t->release();
  }();
  std::vector<training::Example> train, validation;
  for (size_t i = 0; i < examples.size(); ++i) {
    (i % 4 == 3 ? validation : train).push_back(training::ExampleFromProto(examples[i]));
  }
  training::DatasetLimits limits;
  limits.min_examples = 2;
  for (int k = 1; k <= 5; ++k) {
    const auto kind = static_cast<model::TaskKind>(k);
    absl::StatusOr<training::DatasetReport> report = training::ValidateDataset(
        train, validation, *tokenizer, {.max_seq_len = 16, .kind = kind, .max_question_len = 4}, limits);
    if (!report.ok()) {
      FUZZ_CHECK(report.status().code() == absl::StatusCode::kInvalidArgument) << report.status();
      FUZZ_CHECK(IsValidUtf8(std::string(report.status().message()))) << "message is not valid UTF-8";
      continue;
    }
    FUZZ_CHECK(report->num_train == static_cast<int64_t>(train.size()));
    FUZZ_CHECK(report->num_validation == static_cast<int64_t>(validation.size()));
    std::vector<std::string> labels = report->labels;
    std::sort(labels.begin(), labels.end());
    FUZZ_CHECK(std::adjacent_find(labels.begin(), labels.end()) == labels.end()) << "labels not distinct";
    if (kind != model::TaskKind::kSequenceClassification) continue;
    FUZZ_CHECK(report->labels.size() >= 2) << "fewer than 2 labels accepted";
    FUZZ_CHECK(std::is_sorted(report->labels.begin(), report->labels.end())) << "labels not sorted";
    int64_t counted = 0;
    for (const auto& [label, n] : report->label_counts) counted += n;
    FUZZ_CHECK(counted == report->num_train) << "label counts do not add up";
  }
}

}  // namespace
}  // namespace adapterd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd;
  if (size < 1) return 0;
  static constexpr DatasetFormat kFormats[4] = {DatasetFormat::kCsv, DatasetFormat::kJsonl, DatasetFormat::kAuto,
                                                DatasetFormat::kSquad};
  const DatasetFormat format = kFormats[data[0] % 4];
  const std::string_view contents = adapterd::fuzz::AsStringView(data + 1, size - 1);

  absl::StatusOr<std::vector<adapterd::v1::Example>> examples = ParseDataset(contents, format, kName);
  if (format == DatasetFormat::kCsv || format == DatasetFormat::kJsonl) {
    CheckStreamed(contents, format, examples, 1 + (data[0] >> 2) % 17);
  }
  if (!examples.ok()) {
    FUZZ_CHECK(examples.status().code() == absl::StatusCode::kInvalidArgument)
        << "unexpected error " << examples.status();
    const std::string message(examples.status().message());
    FUZZ_CHECK(message.starts_with(std::string(kName) + ": ")) << "error does not name the file: " << message;
    return 0;
  }
  FUZZ_CHECK(!examples->empty()) << "a successful parse without examples";
  for (const adapterd::v1::Example& e : *examples) {
    // What the client sends, the server's upload check accepts, but for the
    // label length limit, which only the server applies.
    const absl::Status fields = adapterd::training::CheckExampleFields(adapterd::training::ExampleFromProto(e));
    FUZZ_CHECK(fields.ok() || absl::StrContains(fields.message(), "bytes; the limit is"))
        << "the server would refuse a parsed example: " << fields;
  }
  if (CsvShaped(*examples)) {
    CheckSame(*examples, ParseDataset(ToCsv(*examples), DatasetFormat::kCsv, kName), "CSV");
  }
  CheckSame(*examples, ParseDataset(ToJsonl(*examples), DatasetFormat::kJsonl, kName), "JSON Lines");
  CheckValidation(*examples);
  return 0;
}
