#include "client/dataset_file.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd::client {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

absl::Status LineError(std::string_view name, int line, std::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": line ", line, ": ", std::string(message)));
}

std::string_view SkipBom(std::string_view contents) {
  if (contents.substr(0, kUtf8Bom.size()) == kUtf8Bom) contents.remove_prefix(kUtf8Bom.size());
  return contents;
}

// absl::StripAsciiWhitespace for std::string_view (absl::string_view is a
// different type in this Abseil).
std::string_view TrimAsciiWhitespace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The checks every example passes, whatever the file format.
absl::Status ValidateExample(const v1::Example& example, std::string_view name, int line) {
  const std::pair<const char*, const std::string*> fields[] = {
      {"text", &example.text()}, {"text_pair", &example.text_pair()}, {"label", &example.label()}};
  for (const auto& [field, value] : fields) {
    if (!IsValidUtf8(*value)) return LineError(name, line, absl::StrCat("invalid UTF-8 in ", field));
  }
  if (example.text().empty()) return LineError(name, line, "empty text");
  if (example.label().empty()) return LineError(name, line, "empty label");
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// CSV (RFC 4180)
// ---------------------------------------------------------------------------

struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;  // where the record starts
};

// Splits `contents` into records, counting lines (line breaks inside quoted
// fields included). Completely empty lines are skipped.
class CsvReader {
 public:
  CsvReader(std::string_view contents, std::string_view name) : in_(contents), name_(name) {
    if (in_.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos_ = kUtf8Bom.size();
  }

  // Reads the next record into `record`; false at the end of the input.
  absl::StatusOr<bool> Next(CsvRecord& record) {
    while (AtLineBreak()) SkipLineBreak();
    if (pos_ >= in_.size()) return false;
    record.fields.clear();
    record.line = line_;
    while (true) {
      std::string field;
      RETURN_IF_ERROR(ReadField(field));
      record.fields.push_back(std::move(field));
      if (pos_ >= in_.size()) return true;
      if (in_[pos_] == ',') {
        ++pos_;
        continue;
      }
      SkipLineBreak();  // ReadField stops only at ',', a line break or the end
      return true;
    }
  }

 private:
  // LF, CRLF, or a CR that ends the input (so that a file whose last
  // record ends in a lone CR does not get a label with a CR in it). Any
  // other CR outside quotes is data.
  bool AtLineBreak() const {
    if (pos_ >= in_.size()) return false;
    if (in_[pos_] == '\n') return true;
    return in_[pos_] == '\r' && (pos_ + 1 == in_.size() || in_[pos_ + 1] == '\n');
  }
  void SkipLineBreak() {
    pos_ += in_[pos_] == '\r' && pos_ + 1 < in_.size() ? 2 : 1;
    ++line_;
  }

  absl::Status ReadField(std::string& field) {
    if (pos_ < in_.size() && in_[pos_] == '"') return ReadQuotedField(field);
    while (pos_ < in_.size() && in_[pos_] != ',' && !AtLineBreak()) {
      if (in_[pos_] == '"') {
        return LineError(name_, line_,
                         "quote inside an unquoted field (quote the whole field and double "
                         "the quotes inside it)");
      }
      field.push_back(in_[pos_++]);
    }
    return absl::OkStatus();
  }

  absl::Status ReadQuotedField(std::string& field) {
    const int start_line = line_;
    ++pos_;  // the opening quote
    while (true) {
      if (pos_ >= in_.size()) return LineError(name_, start_line, "unterminated quoted field");
      const char c = in_[pos_++];
      if (c == '"') {
        if (pos_ < in_.size() && in_[pos_] == '"') {
          field.push_back('"');
          ++pos_;
          continue;
        }
        break;
      }
      if (c == '\n') ++line_;
      field.push_back(c);
    }
    if (pos_ < in_.size() && in_[pos_] != ',' && !AtLineBreak()) {
      return LineError(name_, line_, "unexpected character after a closing quote");
    }
    return absl::OkStatus();
  }

  std::string_view in_;
  std::string_view name_;
  size_t pos_ = 0;
  int line_ = 1;
};

absl::StatusOr<std::vector<v1::Example>> ParseCsv(std::string_view contents, std::string_view name) {
  CsvReader reader(contents, name);
  CsvRecord header;
  ASSIGN_OR_RETURN(const bool has_header, reader.Next(header));
  if (!has_header) return LineError(name, 1, "no header row (expected 'text,label')");

  // Column index of text, text_pair and label; nullopt = absent.
  std::optional<size_t> columns[3];
  static constexpr const char* kColumnNames[3] = {"text", "text_pair", "label"};
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const std::string column(TrimAsciiWhitespace(header.fields[i]));
    const auto* it = std::find(std::begin(kColumnNames), std::end(kColumnNames), column);
    if (it == std::end(kColumnNames)) {
      return LineError(name, header.line,
                       absl::StrCat("unknown column '", column,
                                    "' in the header (expected text, label and optionally "
                                    "text_pair)"));
    }
    auto& slot = columns[it - std::begin(kColumnNames)];
    if (slot.has_value()) {
      return LineError(name, header.line, absl::StrCat("duplicate column '", column, "'"));
    }
    slot = i;
  }
  for (size_t c : {size_t{0}, size_t{2}}) {
    if (!columns[c].has_value()) {
      return LineError(name, header.line,
                       absl::StrCat("the header has no '", kColumnNames[c],
                                    "' column (expected 'text,label' or 'text,text_pair,label')"));
    }
  }

  std::vector<v1::Example> examples;
  CsvRecord record;
  while (true) {
    ASSIGN_OR_RETURN(const bool more, reader.Next(record));
    if (!more) break;
    if (record.fields.size() != header.fields.size()) {
      return LineError(name, record.line,
                       absl::StrCat("expected ", header.fields.size(), " fields (", absl::StrJoin(header.fields, ","),
                                    "), got ", record.fields.size(), " (quote fields that contain commas)"));
    }
    v1::Example& example = examples.emplace_back();
    example.set_text(std::move(record.fields[*columns[0]]));
    if (columns[1].has_value()) example.set_text_pair(std::move(record.fields[*columns[1]]));
    example.set_label(std::move(record.fields[*columns[2]]));
    RETURN_IF_ERROR(ValidateExample(example, name, record.line));
  }
  return examples;
}

// ---------------------------------------------------------------------------
// JSON Lines
// ---------------------------------------------------------------------------

// nlohmann's messages read "[json.exception.parse_error.101] parse error at
// line 1, column 7: syntax error ..." or "[json.exception.out_of_range.406]
// number overflow parsing '1e400'"; the line is always 1 here, so keep the
// column and what follows, or else what follows the bracketed id.
std::string DescribeJsonError(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  const size_t column = what.find("column ");
  if (column != std::string_view::npos) {
    what.remove_prefix(column);
  } else if (const size_t id_end = what.find("] ");
             what.starts_with("[json.exception.") && id_end != std::string_view::npos) {
    what.remove_prefix(id_end + 2);
  }
  return std::string(what);
}

// Sets `*out` from member `key` of `object`. Absent (or null, when
// `optional`) leaves `*out` unchanged. `allow_integer`: an integer member is
// written in decimal (labels such as {"label": 1}).
absl::Status GetStringMember(const nlohmann::json& object, const char* key, bool optional, bool allow_integer,
                             std::string_view name, int line, std::string* out) {
  const auto it = object.find(key);
  if (it == object.end() || (optional && it->is_null())) {
    if (optional) return absl::OkStatus();
    return LineError(name, line, absl::StrCat("missing key \"", key, "\""));
  }
  if (it->is_string()) {
    *out = it->get<std::string>();
    return absl::OkStatus();
  }
  if (allow_integer && it->is_number_integer()) {
    *out = it->dump();
    return absl::OkStatus();
  }
  return LineError(
      name, line,
      absl::StrCat("\"", key, "\" must be a string", allow_integer ? " or an integer" : "", ", got ", it->type_name()));
}

absl::StatusOr<std::vector<v1::Example>> ParseJsonl(std::string_view contents, std::string_view name) {
  std::vector<v1::Example> examples;
  int line = 0;
  size_t pos = 0;
  if (contents.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos = kUtf8Bom.size();
  while (pos < contents.size()) {
    ++line;
    size_t end = contents.find('\n', pos);
    if (end == std::string_view::npos) end = contents.size();
    const std::string_view text = TrimAsciiWhitespace(contents.substr(pos, end - pos));
    pos = end + 1;
    if (text.empty()) continue;
    if (!IsValidUtf8(text)) return LineError(name, line, "invalid UTF-8");
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      // Every parse failure, including a number too large for a double
      // (out_of_range, not parse_error), is the line's fault.
      return LineError(name, line, absl::StrCat("invalid JSON: ", DescribeJsonError(e)));
    }
    if (!object.is_object()) {
      return LineError(
          name, line,
          absl::StrCat("expected a JSON object, got ", object.type_name(), " (JSON Lines: one object per line)"));
    }
    v1::Example& example = examples.emplace_back();
    RETURN_IF_ERROR(GetStringMember(object, "text", /*optional=*/false, /*allow_integer=*/false, name, line,
                                    example.mutable_text()));
    RETURN_IF_ERROR(GetStringMember(object, "text_pair", /*optional=*/true,
                                    /*allow_integer=*/false, name, line, example.mutable_text_pair()));
    RETURN_IF_ERROR(GetStringMember(object, "label", /*optional=*/false, /*allow_integer=*/true, name, line,
                                    example.mutable_label()));
    RETURN_IF_ERROR(ValidateExample(example, name, line));
  }
  return examples;
}

}  // namespace

absl::StatusOr<DatasetFormat> ParseDatasetFormat(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "auto") return DatasetFormat::kAuto;
  if (lower == "csv") return DatasetFormat::kCsv;
  if (lower == "jsonl" || lower == "json" || lower == "ndjson") return DatasetFormat::kJsonl;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset format '", std::string(name), "' (use csv or jsonl)"));
}

absl::StatusOr<DatasetFormat> DatasetFormatForPath(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string_view::npos) {
    const std::string ext = absl::AsciiStrToLower(std::string(base.substr(dot + 1)));
    if (ext == "csv") return DatasetFormat::kCsv;
    if (ext == "jsonl" || ext == "json" || ext == "ndjson") return DatasetFormat::kJsonl;
  }
  return absl::InvalidArgumentError(absl::StrCat("cannot tell the format of '", std::string(path),
                                                 "' from its extension: name it .csv or .jsonl, or give the format"));
}

absl::StatusOr<std::vector<v1::Example>> ParseDataset(std::string_view contents, DatasetFormat format,
                                                      std::string_view name) {
  const std::string_view body = TrimAsciiWhitespace(SkipBom(contents));
  if (body.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), ": the file is empty (expected a CSV header 'text,label' or JSON lines)"));
  }
  if (format == DatasetFormat::kAuto) {
    const absl::StatusOr<DatasetFormat> by_name = DatasetFormatForPath(name);
    // An unknown extension: JSON Lines start with an object, CSV with a header.
    format = by_name.ok() ? *by_name : body.front() == '{' ? DatasetFormat::kJsonl : DatasetFormat::kCsv;
  }
  ASSIGN_OR_RETURN(std::vector<v1::Example> examples,
                   format == DatasetFormat::kCsv ? ParseCsv(contents, name) : ParseJsonl(contents, name));
  if (examples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(name), format == DatasetFormat::kCsv ? ": no examples after the header row" : ": no examples"));
  }
  return examples;
}

absl::StatusOr<std::vector<v1::Example>> ReadDatasetFile(const std::string& path, DatasetFormat format) {
  ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(path));
  return ParseDataset(contents, format, path);
}

}  // namespace adapterd::client
