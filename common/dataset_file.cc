#include "common/dataset_file.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/json_depth.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd {
namespace {

constexpr std::string_view kUtf8Bom = "\xEF\xBB\xBF";

// "<name>: <where>: <message>"; `where` is "line <N>" or, in a SQuAD file,
// the path of the offending value ("data[0].paragraphs[2].qas[5]").
absl::Status PlaceError(std::string_view name, std::string_view where, std::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(name), ": ", std::string(where), ": ", std::string(message)));
}

absl::Status LineError(std::string_view name, int line, std::string_view message) {
  return PlaceError(name, absl::StrCat("line ", line), message);
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

// The checks every example passes, whatever the file format: valid UTF-8
// everywhere, and a non-empty text unless the example has tokens (then no
// text).
absl::Status ValidateExample(const v1::Example& example, std::string_view name, std::string_view where) {
  const std::pair<const char*, const std::string*> fields[] = {
      {"text", &example.text()}, {"text_pair", &example.text_pair()}, {"label", &example.label()}};
  for (const auto& [field, value] : fields) {
    if (!IsValidUtf8(*value)) return PlaceError(name, where, absl::StrCat("invalid UTF-8 in ", field));
  }
  const std::pair<const char*, const google::protobuf::RepeatedPtrField<std::string>*> lists[] = {
      {"labels", &example.labels()}, {"tokens", &example.tokens()}, {"tags", &example.tags()}};
  for (const auto& [field, values] : lists) {
    for (int i = 0; i < values->size(); ++i) {
      if (!IsValidUtf8(values->Get(i))) {
        return PlaceError(name, where, absl::StrCat("invalid UTF-8 in ", field, "[", i, "]"));
      }
    }
  }
  for (int i = 0; i < example.entities_size(); ++i) {
    if (!IsValidUtf8(example.entities(i).label())) {
      return PlaceError(name, where, absl::StrCat("invalid UTF-8 in entities[", i, "].label"));
    }
  }
  for (int i = 0; i < example.answers_size(); ++i) {
    if (!IsValidUtf8(example.answers(i).text())) {
      return PlaceError(name, where, absl::StrCat("invalid UTF-8 in answers[", i, "].text"));
    }
  }
  if (example.tokens_size() > 0) {
    if (!example.text().empty()) {
      return PlaceError(name, where, "\"text\" must be absent or empty with \"tokens\" (the tokens are the text)");
    }
  } else if (example.text().empty()) {
    return PlaceError(name, where, "empty text");
  }
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
  CsvReader(std::string_view contents, std::string_view name, int first_line)
      : in_(contents), name_(name), line_(first_line) {
    // A byte-order mark only at the start of the file (a streamed piece
    // from line 2 on keeps one as data, as the whole file would).
    if (first_line == 1 && in_.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos_ = kUtf8Bom.size();
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
  int line_;
};

// A `labels` cell: labels separated by '|', spaces around each trimmed; an
// empty cell is no labels.
absl::Status SplitLabels(std::string_view cell, std::string_view name, int line, v1::Example& example) {
  if (TrimAsciiWhitespace(cell).empty()) return absl::OkStatus();
  std::string_view rest = cell;
  while (true) {
    const size_t bar = rest.find('|');
    const std::string_view label = TrimAsciiWhitespace(rest.substr(0, bar));
    if (label.empty()) {
      return LineError(name, line,
                       absl::StrCat("empty label in labels '", std::string(cell),
                                    "' (separate labels with a single '|'; an empty cell is no labels)"));
    }
    example.add_labels(std::string(label));
    if (bar == std::string_view::npos) return absl::OkStatus();
    rest.remove_prefix(bar + 1);
  }
}

// `first_line`: the line number of contents' first line (a streamed piece).
absl::StatusOr<std::vector<v1::Example>> ParseCsv(std::string_view contents, std::string_view name,
                                                  int first_line = 1) {
  CsvReader reader(contents, name, first_line);
  CsvRecord header;
  ASSIGN_OR_RETURN(const bool has_header, reader.Next(header));
  if (!has_header) return LineError(name, 1, "no header row (expected 'text,label')");

  // Column index of text, text_pair, label and labels; nullopt = absent.
  enum Column { kText, kTextPair, kLabel, kLabels };
  std::optional<size_t> columns[4];
  static constexpr const char* kColumnNames[4] = {"text", "text_pair", "label", "labels"};
  // JSON members that CSV does not carry, for a better message.
  static constexpr const char* kJsonOnly[] = {"tokens", "tags", "entities", "question", "context", "answers"};
  for (size_t i = 0; i < header.fields.size(); ++i) {
    const std::string column(TrimAsciiWhitespace(header.fields[i]));
    const auto* it = std::find(std::begin(kColumnNames), std::end(kColumnNames), column);
    if (it == std::end(kColumnNames)) {
      const bool json_only = std::find(std::begin(kJsonOnly), std::end(kJsonOnly), column) != std::end(kJsonOnly);
      return LineError(name, header.line,
                       absl::StrCat("unknown column '", column,
                                    "' in the header (expected text, label and/or labels, and optionally text_pair",
                                    json_only ? "; token classification and extractive QA datasets must be JSON "
                                                "Lines or SQuAD JSON"
                                              : "",
                                    ")"));
    }
    auto& slot = columns[it - std::begin(kColumnNames)];
    if (slot.has_value()) {
      return LineError(name, header.line, absl::StrCat("duplicate column '", column, "'"));
    }
    slot = i;
  }
  if (!columns[kText].has_value()) {
    return LineError(name, header.line,
                     "the header has no 'text' column (expected 'text,label' or 'text,text_pair,label')");
  }
  if (!columns[kLabel].has_value() && !columns[kLabels].has_value()) {
    return LineError(name, header.line,
                     "the header has no 'label' or 'labels' column (expected 'text,label', "
                     "'text,text_pair,label' or 'text,labels')");
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
    example.set_text(std::move(record.fields[*columns[kText]]));
    if (columns[kTextPair].has_value()) example.set_text_pair(std::move(record.fields[*columns[kTextPair]]));
    if (columns[kLabel].has_value()) example.set_label(std::move(record.fields[*columns[kLabel]]));
    if (columns[kLabels].has_value()) {
      RETURN_IF_ERROR(SplitLabels(record.fields[*columns[kLabels]], name, record.line, example));
    }
    RETURN_IF_ERROR(ValidateExample(example, name, absl::StrCat("line ", record.line)));
    if (columns[kLabel].has_value() && example.label().empty()) return LineError(name, record.line, "empty label");
  }
  return examples;
}

// ---------------------------------------------------------------------------
// JSON (JSON Lines and SQuAD)
// ---------------------------------------------------------------------------

// nlohmann's messages read "[json.exception.parse_error.101] parse error at
// line 1, column 7: syntax error ..." or "[json.exception.out_of_range.406]
// number overflow parsing '1e400'". `keep_line`: keep "line L, column C: "
// and what follows (a whole file); else (one line of JSON Lines, always line
// 1) the column and what follows; else what follows the bracketed id.
std::string DescribeJsonError(const nlohmann::json::exception& e, bool keep_line) {
  std::string_view what = e.what();
  const size_t position = what.find(keep_line ? "at line " : "column ");
  if (position != std::string_view::npos) {
    what.remove_prefix(position + (keep_line ? 3 : 0));
  } else if (const size_t id_end = what.find("] ");
             what.starts_with("[json.exception.") && id_end != std::string_view::npos) {
    what.remove_prefix(id_end + 2);
  }
  return std::string(what);
}

// The file name and where in it a JSON value is ("line <N>" or a SQuAD
// path), for errors.
struct JsonPlace {
  std::string_view name;
  std::string where;

  absl::Status Error(std::string_view message) const { return PlaceError(name, where, message); }
};

// Member `key` of `object`; nullptr when it is absent or null.
const nlohmann::json* Member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// `value` into `*out` if it is a string; `what` names it in the error.
absl::Status GetString(const nlohmann::json& value, const JsonPlace& place, std::string_view what, std::string* out) {
  if (!value.is_string()) {
    return place.Error(absl::StrCat(std::string(what), " must be a string, got ", value.type_name()));
  }
  *out = value.get<std::string>();
  return absl::OkStatus();
}

// A label: a string as it is; an integer in decimal; any other number as
// nlohmann writes a double, the shortest form that reads back as the same
// value ("3.25", "2.0", "1e+20"; JSON has no NaN or infinity). False for
// any other type.
bool LabelText(const nlohmann::json& value, std::string* out) {
  if (value.is_string()) {
    *out = value.get<std::string>();
    return true;
  }
  if (value.is_number()) {
    *out = value.dump();
    return true;
  }
  return false;
}

// An array of non-empty strings (and, `numbers`, numbers written as
// LabelText does) appended to `*out`.
absl::Status GetStringArray(const nlohmann::json& value, const JsonPlace& place, const char* key, bool numbers,
                            google::protobuf::RepeatedPtrField<std::string>* out) {
  const char* const kinds = numbers ? "strings or numbers" : "strings";
  if (!value.is_array()) {
    return place.Error(absl::StrCat("\"", key, "\" must be an array of ", kinds, ", got ", value.type_name()));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& element = value[i];
    std::string text;
    if (element.is_string() || (numbers && element.is_number())) {
      LabelText(element, &text);
    } else {
      return place.Error(absl::StrCat(key, "[", i, "] must be a ", numbers ? "string or a number" : "string", ", got ",
                                      element.type_name()));
    }
    if (text.empty()) return place.Error(absl::StrCat(key, "[", i, "] is empty"));
    out->Add(std::move(text));
  }
  return absl::OkStatus();
}

// A code-point offset: an integer in [0, 2^31-1]. `what` names it
// ("entities[0].start").
absl::StatusOr<int32_t> GetOffset(const nlohmann::json& object, const char* key, const JsonPlace& place,
                                  const std::string& what) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr) return place.Error(absl::StrCat(what, " is missing"));
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (value->is_number_unsigned()) {
    const uint64_t v = value->get<uint64_t>();
    if (v > static_cast<uint64_t>(kMax)) {
      return place.Error(absl::StrCat(what, " is too large (", v, "; at most ", kMax, ")"));
    }
    return static_cast<int32_t>(v);
  }
  if (value->is_number_integer()) {  // signed (nlohmann parses only negative integers so)
    const int64_t v = value->get<int64_t>();
    if (v < 0) return place.Error(absl::StrCat(what, " is negative (", v, ")"));
    if (v > kMax) return place.Error(absl::StrCat(what, " is too large (", v, "; at most ", kMax, ")"));
    return static_cast<int32_t>(v);
  }
  return place.Error(absl::StrCat(what, " must be an integer, got ", value->type_name(),
                                  value->is_number() ? absl::StrCat(" ", value->dump()) : ""));
}

// "entities": [{"start", "end", "label"}, ...] into example.entities.
absl::Status GetEntities(const nlohmann::json& value, const JsonPlace& place, v1::Example& example) {
  if (!value.is_array()) {
    return place.Error(absl::StrCat("\"entities\" must be an array of {\"start\", \"end\", \"label\"} objects, got ",
                                    value.type_name()));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& entity = value[i];
    const std::string path = absl::StrCat("entities[", i, "]");
    if (!entity.is_object()) {
      return place.Error(
          absl::StrCat(path, " must be an object {\"start\", \"end\", \"label\"}, got ", entity.type_name()));
    }
    ASSIGN_OR_RETURN(const int32_t start, GetOffset(entity, "start", place, path + ".start"));
    ASSIGN_OR_RETURN(const int32_t end, GetOffset(entity, "end", place, path + ".end"));
    if (start >= end) {
      return place.Error(absl::StrCat(path, ": start ", start, " is not before end ", end,
                                      " (offsets are code points, [start, end))"));
    }
    const nlohmann::json* label = Member(entity, "label");
    if (label == nullptr) return place.Error(absl::StrCat(path, ".label is missing"));
    v1::Example::Entity& out = *example.add_entities();
    RETURN_IF_ERROR(GetString(*label, place, path + ".label", out.mutable_label()));
    if (out.label().empty()) return place.Error(absl::StrCat(path, ".label is empty"));
    out.set_start(start);
    out.set_end(end);
  }
  return absl::OkStatus();
}

// "answers" and "is_impossible" of `object` (a JSON Lines line or a SQuAD
// question) into example.answers; `*present` tells whether either is there.
absl::Status GetAnswers(const nlohmann::json& object, const JsonPlace& place, v1::Example& example, bool* present) {
  const nlohmann::json* answers = Member(object, "answers");
  const nlohmann::json* impossible = Member(object, "is_impossible");
  *present = answers != nullptr || impossible != nullptr;
  if (impossible != nullptr && !impossible->is_boolean()) {
    return place.Error(absl::StrCat("\"is_impossible\" must be a boolean, got ", impossible->type_name()));
  }
  if (answers != nullptr) {
    if (!answers->is_array()) {
      return place.Error(absl::StrCat("\"answers\" must be an array of {\"text\", \"answer_start\"} objects, got ",
                                      answers->type_name()));
    }
    for (size_t i = 0; i < answers->size(); ++i) {
      const nlohmann::json& answer = (*answers)[i];
      const std::string path = absl::StrCat("answers[", i, "]");
      if (!answer.is_object()) {
        return place.Error(
            absl::StrCat(path, " must be an object {\"text\", \"answer_start\"}, got ", answer.type_name()));
      }
      const nlohmann::json* text = Member(answer, "text");
      if (text == nullptr) return place.Error(absl::StrCat(path, ".text is missing"));
      v1::Example::Answer& out = *example.add_answers();
      RETURN_IF_ERROR(GetString(*text, place, path + ".text", out.mutable_text()));
      if (out.text().empty()) return place.Error(absl::StrCat(path, ".text is empty"));
      ASSIGN_OR_RETURN(const int32_t start, GetOffset(answer, "answer_start", place, path + ".answer_start"));
      out.set_answer_start(start);
    }
  }
  if (impossible != nullptr) {
    if (impossible->get<bool>() && example.answers_size() > 0) {
      return place.Error(
          "\"is_impossible\" is true but \"answers\" is not empty (an unanswerable question has \"answers\": [])");
    }
    if (!impossible->get<bool>() && example.answers_size() == 0) {
      return place.Error("\"is_impossible\" is false but there are no answers");
    }
  }
  return absl::OkStatus();
}

// One JSON Lines object into `example` (see the header for the members).
absl::Status ReadJsonExample(const nlohmann::json& object, const JsonPlace& place, v1::Example& example) {
  const nlohmann::json* question = Member(object, "question");
  const nlohmann::json* context = Member(object, "context");
  const nlohmann::json* tokens = Member(object, "tokens");
  const nlohmann::json* tags = Member(object, "tags");
  const bool is_question = question != nullptr || context != nullptr;
  if (is_question) {
    if (object.contains("text") || Member(object, "text_pair") != nullptr) {
      return place.Error(
          "\"question\" and \"context\" (extractive QA) cannot be combined with \"text\" or \"text_pair\"");
    }
    if (question == nullptr) return place.Error("missing key \"question\"");
    if (context == nullptr) return place.Error("missing key \"context\"");
    RETURN_IF_ERROR(GetString(*question, place, "\"question\"", example.mutable_text()));
    RETURN_IF_ERROR(GetString(*context, place, "\"context\"", example.mutable_text_pair()));
    if (example.text().empty()) return place.Error("empty question");
    if (example.text_pair().empty()) return place.Error("empty context");
  } else {
    // A null text is a wrong type, not an absent one.
    if (const auto text = object.find("text"); text != object.end()) {
      RETURN_IF_ERROR(GetString(*text, place, "\"text\"", example.mutable_text()));
    } else if (tokens == nullptr) {
      return place.Error("missing key \"text\"");
    }
    if (const nlohmann::json* text_pair = Member(object, "text_pair")) {
      RETURN_IF_ERROR(GetString(*text_pair, place, "\"text_pair\"", example.mutable_text_pair()));
    }
  }

  bool has_target = false;
  bool has_label = false;
  if (const auto label = object.find("label"); label != object.end()) {
    if (!LabelText(*label, example.mutable_label())) {
      return place.Error(absl::StrCat("\"label\" must be a string or a number, got ", label->type_name()));
    }
    has_label = has_target = true;
  }
  if (const nlohmann::json* labels = Member(object, "labels")) {
    RETURN_IF_ERROR(GetStringArray(*labels, place, "labels", /*numbers=*/true, example.mutable_labels()));
    has_target = true;
  }
  if (tokens != nullptr && tags == nullptr) {
    return place.Error("\"tokens\" without \"tags\" (token classification needs one tag per token)");
  }
  if (tags != nullptr && tokens == nullptr) {
    return place.Error("\"tags\" without \"tokens\" (token classification needs one tag per token)");
  }
  if (tokens != nullptr) {
    RETURN_IF_ERROR(GetStringArray(*tokens, place, "tokens", /*numbers=*/false, example.mutable_tokens()));
    RETURN_IF_ERROR(GetStringArray(*tags, place, "tags", /*numbers=*/false, example.mutable_tags()));
    if (example.tokens_size() != example.tags_size()) {
      return place.Error(absl::StrCat("\"tokens\" has ", example.tokens_size(), " elements but \"tags\" has ",
                                      example.tags_size(), " (one tag per token)"));
    }
    if (example.tokens_size() == 0) return place.Error("\"tokens\" is empty");
    has_target = true;
  }
  if (const nlohmann::json* entities = Member(object, "entities")) {
    if (tokens != nullptr) {
      return place.Error(
          "\"entities\" are offsets into \"text\": give either \"text\" and \"entities\" or "
          "\"tokens\" and \"tags\"");
    }
    RETURN_IF_ERROR(GetEntities(*entities, place, example));
    has_target = true;
  }
  bool has_answers = false;
  RETURN_IF_ERROR(GetAnswers(object, place, example, &has_answers));
  has_target = has_target || has_answers;

  if (!has_target) {
    if (is_question) {
      return place.Error("missing key \"answers\" (the gold answers; \"answers\": [] for an unanswerable question)");
    }
    return place.Error(
        "missing key \"label\" (every line needs a target: \"label\", \"labels\", \"tokens\" and \"tags\", "
        "\"entities\", or \"question\", \"context\" and \"answers\")");
  }
  RETURN_IF_ERROR(ValidateExample(example, place.name, place.where));
  if (has_label && example.label().empty()) return place.Error("empty label");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Example>> ParseJsonl(std::string_view contents, std::string_view name,
                                                    int first_line = 1) {
  std::vector<v1::Example> examples;
  int line = first_line - 1;
  size_t pos = 0;
  if (first_line == 1 && contents.substr(0, kUtf8Bom.size()) == kUtf8Bom) pos = kUtf8Bom.size();
  while (pos < contents.size()) {
    ++line;
    size_t end = contents.find('\n', pos);
    if (end == std::string_view::npos) end = contents.size();
    const std::string_view text = TrimAsciiWhitespace(contents.substr(pos, end - pos));
    pos = end + 1;
    if (text.empty()) continue;
    if (!IsValidUtf8(text)) return LineError(name, line, "invalid UTF-8");
    if (JsonNestingDepth(text) > kMaxJsonDepth) {
      return LineError(name, line, absl::StrCat("arrays and objects nest deeper than ", kMaxJsonDepth));
    }
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      // Every parse failure, including a number too large for a double
      // (out_of_range, not parse_error), is the line's fault.
      return LineError(name, line, absl::StrCat("invalid JSON: ", DescribeJsonError(e, /*keep_line=*/false)));
    }
    if (!object.is_object()) {
      return LineError(
          name, line,
          absl::StrCat("expected a JSON object, got ", object.type_name(), " (JSON Lines: one object per line)"));
    }
    RETURN_IF_ERROR(ReadJsonExample(object, JsonPlace{name, absl::StrCat("line ", line)}, examples.emplace_back()));
  }
  return examples;
}

// ---------------------------------------------------------------------------
// SQuAD
// ---------------------------------------------------------------------------

// What kAuto takes for SQuAD: one object with a "data" array.
bool IsSquadDocument(const nlohmann::json& document) {
  if (!document.is_object()) return false;
  const nlohmann::json* data = Member(document, "data");
  return data != nullptr && data->is_array();
}

// Parses the whole of `contents` as one JSON value.
absl::StatusOr<nlohmann::json> ParseJsonDocument(std::string_view contents, std::string_view name) {
  const std::string_view body = SkipBom(contents);
  // nlohmann rejects invalid UTF-8 too, but this names the line.
  int line = 1;
  for (size_t pos = 0; pos < body.size(); ++line) {
    size_t end = body.find('\n', pos);
    if (end == std::string_view::npos) end = body.size();
    if (!IsValidUtf8(body.substr(pos, end - pos))) return LineError(name, line, "invalid UTF-8");
    pos = end + 1;
  }
  if (JsonNestingDepth(body) > kMaxJsonDepth) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": arrays and objects nest deeper than ",
                                                   kMaxJsonDepth, " (a SQuAD document needs 8)"));
  }
  try {
    return nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), ": invalid JSON: ", DescribeJsonError(e, /*keep_line=*/true)));
  }
}

// The array member `key` of `object` at `where` ("data[0]").
absl::StatusOr<const nlohmann::json*> GetArray(const nlohmann::json& object, const char* key, const JsonPlace& place) {
  const nlohmann::json* value = Member(object, key);
  if (value == nullptr) return place.Error(absl::StrCat("missing key \"", key, "\""));
  if (!value->is_array()) {
    return place.Error(absl::StrCat("\"", key, "\" must be an array, got ", value->type_name()));
  }
  return value;
}

absl::Status ExpectObject(const nlohmann::json& value, const JsonPlace& place) {
  if (value.is_object()) return absl::OkStatus();
  return place.Error(absl::StrCat("expected an object, got ", value.type_name()));
}

absl::StatusOr<std::vector<v1::Example>> ParseSquad(const nlohmann::json& document, std::string_view name) {
  constexpr std::string_view kShape =
      "(SQuAD: {\"data\": [{\"paragraphs\": [{\"context\": ..., \"qas\": [{\"question\": ..., \"answers\": "
      "[...]}]}]}]})";
  if (!document.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(name), ": expected a JSON object, got ",
                                                   document.type_name(), " ", std::string(kShape)));
  }
  const nlohmann::json* data = Member(document, "data");
  if (data == nullptr || !data->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(name), data == nullptr ? ": missing key \"data\" " : ": \"data\" must be an array ",
                     std::string(kShape)));
  }
  std::vector<v1::Example> examples;
  for (size_t i = 0; i < data->size(); ++i) {
    const JsonPlace article_place{name, absl::StrCat("data[", i, "]")};
    const nlohmann::json& article = (*data)[i];
    RETURN_IF_ERROR(ExpectObject(article, article_place));
    ASSIGN_OR_RETURN(const nlohmann::json* paragraphs, GetArray(article, "paragraphs", article_place));
    for (size_t j = 0; j < paragraphs->size(); ++j) {
      const JsonPlace paragraph_place{name, absl::StrCat(article_place.where, ".paragraphs[", j, "]")};
      const nlohmann::json& paragraph = (*paragraphs)[j];
      RETURN_IF_ERROR(ExpectObject(paragraph, paragraph_place));
      const nlohmann::json* context_value = Member(paragraph, "context");
      if (context_value == nullptr) return paragraph_place.Error("missing key \"context\"");
      std::string context;
      RETURN_IF_ERROR(GetString(*context_value, paragraph_place, "\"context\"", &context));
      if (context.empty()) return paragraph_place.Error("empty context");
      ASSIGN_OR_RETURN(const nlohmann::json* qas, GetArray(paragraph, "qas", paragraph_place));
      for (size_t k = 0; k < qas->size(); ++k) {
        const JsonPlace place{name, absl::StrCat(paragraph_place.where, ".qas[", k, "]")};
        const nlohmann::json& qa = (*qas)[k];
        RETURN_IF_ERROR(ExpectObject(qa, place));
        v1::Example& example = examples.emplace_back();
        const nlohmann::json* question = Member(qa, "question");
        if (question == nullptr) return place.Error("missing key \"question\"");
        RETURN_IF_ERROR(GetString(*question, place, "\"question\"", example.mutable_text()));
        if (example.text().empty()) return place.Error("empty question");
        example.set_text_pair(context);
        bool has_answers = false;
        RETURN_IF_ERROR(GetAnswers(qa, place, example, &has_answers));
        if (!has_answers) {
          return place.Error(
              "missing key \"answers\" (the gold answers; \"answers\": [] for an unanswerable question)");
        }
        RETURN_IF_ERROR(ValidateExample(example, name, place.where));
      }
    }
  }
  return examples;
}

// The lower-case extension of `path`'s last component; "" if none.
std::string Extension(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  if (dot == std::string_view::npos) return "";
  return absl::AsciiStrToLower(std::string(base.substr(dot + 1)));
}

absl::Status EmptyInputError(std::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(name),
                   ": the file is empty (expected a CSV header 'text,label', JSON lines or a SQuAD JSON document)"));
}

absl::Status NoExamplesError(std::string_view name, DatasetFormat format) {
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(name), format == DatasetFormat::kCsv ? ": no examples after the header row" : ": no examples"));
}

}  // namespace

absl::StatusOr<DatasetFormat> ParseDatasetFormat(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower == "auto") return DatasetFormat::kAuto;
  if (lower == "csv") return DatasetFormat::kCsv;
  if (lower == "jsonl" || lower == "json" || lower == "ndjson") return DatasetFormat::kJsonl;
  if (lower == "squad") return DatasetFormat::kSquad;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset format '", std::string(name), "' (use csv, jsonl or squad)"));
}

DatasetFormat FromApiFormat(v1::DatasetFormat format) {
  switch (format) {
    case v1::DATASET_FORMAT_CSV:
      return DatasetFormat::kCsv;
    case v1::DATASET_FORMAT_JSONL:
      return DatasetFormat::kJsonl;
    case v1::DATASET_FORMAT_SQUAD:
      return DatasetFormat::kSquad;
    default:
      return DatasetFormat::kAuto;
  }
}

v1::DatasetFormat ToApiFormat(DatasetFormat format) {
  switch (format) {
    case DatasetFormat::kCsv:
      return v1::DATASET_FORMAT_CSV;
    case DatasetFormat::kJsonl:
      return v1::DATASET_FORMAT_JSONL;
    case DatasetFormat::kSquad:
      return v1::DATASET_FORMAT_SQUAD;
    case DatasetFormat::kAuto:
      break;
  }
  return v1::DATASET_FORMAT_AUTO;
}

absl::StatusOr<DatasetFormat> DatasetFormatForPath(std::string_view path) {
  const std::string ext = Extension(path);
  if (ext == "csv") return DatasetFormat::kCsv;
  if (ext == "jsonl" || ext == "json" || ext == "ndjson") return DatasetFormat::kJsonl;
  return absl::InvalidArgumentError(absl::StrCat("cannot tell the format of '", std::string(path),
                                                 "' from its extension: name it .csv or .jsonl, or give the format"));
}

absl::StatusOr<std::vector<v1::Example>> ParseDataset(std::string_view contents, DatasetFormat format,
                                                      std::string_view name) {
  const std::string_view body = TrimAsciiWhitespace(SkipBom(contents));
  if (body.empty()) return EmptyInputError(name);
  std::optional<nlohmann::json> squad;  // parsed while detecting the format
  if (format == DatasetFormat::kAuto) {
    const absl::StatusOr<DatasetFormat> by_name = DatasetFormatForPath(name);
    // .json and unknown extensions: one object with a "data" array is SQuAD.
    if ((!by_name.ok() || Extension(name) == "json") && body.front() == '{' &&
        JsonNestingDepth(body) <= kMaxJsonDepth) {
      nlohmann::json document;
      try {
        document = nlohmann::json::parse(body, /*cb=*/nullptr, /*allow_exceptions=*/false);
      } catch (const nlohmann::json::exception&) {
        document = nlohmann::json::value_t::discarded;
      }
      if (IsSquadDocument(document)) {
        squad = std::move(document);
        format = DatasetFormat::kSquad;
      }
    }
    // An unknown extension: JSON Lines start with an object, CSV with a header.
    if (format == DatasetFormat::kAuto) {
      format = by_name.ok() ? *by_name : body.front() == '{' ? DatasetFormat::kJsonl : DatasetFormat::kCsv;
    }
  }
  std::vector<v1::Example> examples;
  switch (format) {
    case DatasetFormat::kCsv: {
      ASSIGN_OR_RETURN(examples, ParseCsv(contents, name));
      break;
    }
    case DatasetFormat::kSquad: {
      if (!squad.has_value()) {
        ASSIGN_OR_RETURN(squad, ParseJsonDocument(contents, name));
      }
      ASSIGN_OR_RETURN(examples, ParseSquad(*squad, name));
      break;
    }
    case DatasetFormat::kAuto:  // resolved above
    case DatasetFormat::kJsonl: {
      ASSIGN_OR_RETURN(examples, ParseJsonl(contents, name));
      break;
    }
  }
  if (examples.empty()) return NoExamplesError(name, format);
  return examples;
}

absl::StatusOr<std::vector<v1::Example>> ReadDatasetFile(const std::string& path, DatasetFormat format) {
  ASSIGN_OR_RETURN(const std::string contents, ReadFileToString(path));
  return ParseDataset(contents, format, path);
}

// ---------------------------------------------------------------------------
// Streamed
// ---------------------------------------------------------------------------

DatasetStreamParser::DatasetStreamParser(DatasetFormat format, std::string name, size_t max_record_bytes)
    : format_(format), name_(std::move(name)), max_record_bytes_(max_record_bytes) {}

absl::StatusOr<std::vector<v1::Example>> DatasetStreamParser::Feed(std::string_view bytes) {
  RETURN_IF_ERROR(error_);
  pending_.append(bytes);
  // Record boundaries: a line break outside quotes (CSV quotes toggle; a
  // doubled quote inside a quoted field toggles twice).
  for (; scanned_ < pending_.size(); ++scanned_) {
    const char c = pending_[scanned_];
    if (c == '"' && format_ == DatasetFormat::kCsv) in_quotes_ = !in_quotes_;
    if (c == '\n' && !in_quotes_) boundary_ = scanned_ + 1;
  }
  if (boundary_ == 0) {
    if (pending_.size() > max_record_bytes_) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat(name_, ": line ", next_line_, ": a record longer than ", max_record_bytes_, " bytes"));
      return error_;
    }
    return std::vector<v1::Example>();
  }
  const size_t end = boundary_;
  auto examples = ParsePiece(std::string_view(pending_).substr(0, end));
  pending_.erase(0, end);
  scanned_ -= end;
  boundary_ = 0;
  if (!examples.ok()) error_ = examples.status();
  return examples;
}

absl::StatusOr<std::vector<v1::Example>> DatasetStreamParser::Finish() {
  RETURN_IF_ERROR(error_);
  std::vector<v1::Example> examples;
  if (!pending_.empty()) {
    ASSIGN_OR_RETURN(examples, ParsePiece(pending_));
    pending_.clear();
  }
  if (!saw_content_) return EmptyInputError(name_);
  if (examples_ == 0) return NoExamplesError(name_, format_);
  return examples;
}

absl::StatusOr<std::vector<v1::Example>> DatasetStreamParser::ParsePiece(std::string_view piece) {
  // Until something but whitespace arrives, pieces are held: an input of
  // whitespace alone is "empty" (as ParseDataset has it), while whitespace
  // before content is the content's first lines (a CSV "header" of spaces).
  std::string combined;
  if (!saw_content_) {
    combined = absl::StrCat(held_, std::string(piece));
    if (TrimAsciiWhitespace(SkipBom(combined)).empty()) {
      held_ = std::move(combined);
      return std::vector<v1::Example>();
    }
    held_.clear();
    saw_content_ = true;
    piece = combined;
  }
  const int first_line = next_line_;
  next_line_ += static_cast<int>(std::count(piece.begin(), piece.end(), '\n'));
  std::vector<v1::Example> examples;
  if (format_ == DatasetFormat::kCsv) {
    if (csv_header_.empty()) {
      ASSIGN_OR_RETURN(examples, ParseCsv(piece, name_, first_line));
      // Keep the header record (and the blank lines before it) for the
      // pieces to come: each is parsed as header + records.
      size_t pos = 0;
      bool quoted = false;
      while (pos < piece.size()) {
        const char c = piece[pos++];
        if (c == '"') quoted = !quoted;
        if (c == '\n' && !quoted && !TrimAsciiWhitespace(SkipBom(piece.substr(0, pos))).empty()) break;
      }
      // Without the file's byte-order mark: pieces from line 2 on keep a
      // mark as data, and the header is put before each of them.
      csv_header_ = std::string(SkipBom(piece.substr(0, pos)));
      header_lines_ = static_cast<int>(std::count(csv_header_.begin(), csv_header_.end(), '\n'));
    } else {
      ASSIGN_OR_RETURN(examples,
                       ParseCsv(absl::StrCat(csv_header_, std::string(piece)), name_, first_line - header_lines_));
    }
  } else {
    ASSIGN_OR_RETURN(examples, ParseJsonl(piece, name_, first_line));
  }
  examples_ += static_cast<int64_t>(examples.size());
  return examples;
}

// ---------------------------------------------------------------------------
// Any format, a piece at a time
// ---------------------------------------------------------------------------

namespace {

// The format a file streams in, or nullopt when it is read whole.
std::optional<DatasetFormat> StreamedFormat(DatasetFormat format, std::string_view name) {
  if (format == DatasetFormat::kCsv || format == DatasetFormat::kJsonl) return format;
  if (format != DatasetFormat::kAuto) return std::nullopt;
  const std::string ext = Extension(name);
  if (ext == "csv") return DatasetFormat::kCsv;
  if (ext == "jsonl" || ext == "ndjson") return DatasetFormat::kJsonl;
  return std::nullopt;  // .json and the rest: the content tells (ParseDataset)
}

}  // namespace

DatasetFileReader::DatasetFileReader(DatasetFormat format, std::string name, size_t max_record_bytes,
                                     size_t max_whole_bytes)
    : format_(format), name_(std::move(name)), max_whole_bytes_(max_whole_bytes) {
  if (const std::optional<DatasetFormat> streamed = StreamedFormat(format, name_); streamed.has_value()) {
    stream_ = std::make_unique<DatasetStreamParser>(*streamed, name_, max_record_bytes);
  }
}

absl::StatusOr<std::vector<v1::Example>> DatasetFileReader::Feed(std::string_view bytes) {
  if (stream_ != nullptr) return stream_->Feed(bytes);
  if (whole_.size() + bytes.size() > max_whole_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        name_, ": a ", format_ == DatasetFormat::kSquad ? "SQuAD document" : "file read whole (SQuAD, or .json)",
        " larger than ", max_whole_bytes_, " bytes; send JSON Lines or CSV (read as they arrive) instead"));
  }
  whole_.append(bytes);
  return std::vector<v1::Example>();
}

absl::StatusOr<std::vector<v1::Example>> DatasetFileReader::Finish() {
  if (stream_ != nullptr) return stream_->Finish();
  absl::StatusOr<std::vector<v1::Example>> examples = ParseDataset(whole_, format_, name_);
  std::string().swap(whole_);
  return examples;
}

}  // namespace adapterd
