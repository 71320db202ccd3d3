// Reading labelled datasets from files for UploadDataset: every task kind's
// examples (adapterd.v1.Example). The reader does not know the task's kind:
// it maps whatever members a record has to the Example's fields, and checks
// only their types and what holds for every kind (the server checks the
// rest against the task, e.g. offsets against the text).
//
// Formats:
// - CSV (RFC 4180): a header row naming the columns `text`, and `label`
//   and/or `labels`, and optionally `text_pair`, in any order (names are
//   matched after trimming spaces; any other column is an error; a UTF-8
//   byte-order mark is skipped). Fields may be quoted with '"'; inside
//   quotes, `""` is a quote and commas and line breaks are data. Records end
//   with LF or CRLF; completely empty lines are skipped. Cells are taken as
//   they are (spaces kept), except `labels`: split at '|' into
//   Example.labels, spaces around each label trimmed; an empty (or all-space)
//   cell is no labels; an empty label between separators ("a||b", "a|") is
//   an error. Regression targets are the `label` column as written ("3.25").
//   Multi-label data may use `labels` alone. Token classification and
//   extractive QA are JSON only (JSON Lines or SQuAD).
// - JSON Lines: one JSON object per line. Members (null = absent, except for
//   "text" and "label", where null is a wrong type):
//     "text", "text_pair"  strings -> text, text_pair.
//     "label"     a string, or a number: an integer in decimal (so that
//                 {"label": 1} and the CSV label "1" are the same label), any
//                 other number (with a fraction or an exponent) in the
//                 shortest form that reads back as the same double ("3.25",
//                 "2.0", "1e+20"). A boolean is an error. Must not be "".
//     "labels"    an array of such strings or numbers -> labels (multi-label;
//                 [] = no labels; no element may be "").
//     "tokens", "tags"  arrays of strings, given together and of the same
//                 length (at least one), no element "" -> tokens, tags
//                 (token classification over pre-split words; "text" must
//                 then be absent or "").
//     "entities"  an array of {"start": int, "end": int, "label": string}
//                 -> entities (token classification over "text"; [] = a text
//                 without entities): code-point offsets with
//                 0 <= start < end <= 2^31-1 and a non-empty label (other
//                 members of an entity are ignored). Not with "tokens".
//     "question", "context"  extractive QA -> text, text_pair; both
//                 required, non-empty, and not on a line with "text" or
//                 "text_pair".
//     "answers"   an array of {"text": non-empty string, "answer_start":
//                 int 0..2^31-1} -> answers (code-point offset into the
//                 context; [] = unanswerable). Also allowed with
//                 "text"/"text_pair" (then text_pair is the context).
//     "is_impossible"  optional boolean (SQuAD 2.0): true requires "answers"
//                 to be absent or [], false requires at least one answer.
//   Every line needs a target: "label", "labels", "tokens" with "tags",
//   "entities", or "answers" / "is_impossible"; a line with none is an error
//   (`missing key "label" ...`, or `missing key "answers" ...` on a question
//   line). "text" is required (`missing key "text"`) and non-empty unless
//   "tokens" is given or the line is a question. Any combination of targets
//   may appear on one line (the server takes what its task needs). Other
//   members ("id", ...) are ignored; blank lines are skipped; a UTF-8
//   byte-order mark is skipped.
// - SQuAD JSON (v1.1 and v2.0 as published): one JSON object
//   {"version": ..., "data": [{"title": ..., "paragraphs": [{"context": ...,
//   "qas": [{"id": ..., "question": ..., "answers": [{"text",
//   "answer_start"}], "is_impossible": bool, "plausible_answers": [...]}]}]}]}.
//   One example per question, in file order: text = question, text_pair =
//   the paragraph's context, answers as given (every one, duplicates
//   included). "question", "answers" and "is_impossible" follow the JSON
//   Lines rules above (an impossible question has "answers": []);
//   "plausible_answers", "id", "title", "version" and other members are
//   ignored. "data", "paragraphs" and "qas" must be arrays; "context" a
//   non-empty string.
//
// Format detection (DatasetFormat::kAuto): by the file name's extension
// (.csv = CSV; .jsonl, .ndjson = JSON Lines; .json = SQuAD if the content is
// one JSON object with a "data" array, else JSON Lines); for any other name,
// by the content: SQuAD as for .json, else JSON Lines when the first
// non-blank character is '{', else CSV.
//
// A file without examples is an error (INVALID_ARGUMENT "<name>: the file is
// empty" or "<name>: no examples"). All strings must be valid UTF-8. Errors
// about a record are INVALID_ARGUMENT and start with "<name>: line <N>: ",
// where <N> is the 1-based line on which the offending record (or, for an
// unterminated quote, the quoted field) starts, counting line breaks inside
// quoted fields; in a SQuAD file they start with "<name>: " and the path of
// the offending value instead, e.g. "<name>: data[0].paragraphs[2].qas[5]:
// missing key "question"", or, above the questions, "<name>: data[1]: ...",
// "<name>: missing key "data" ..."; JSON syntax errors read "<name>: invalid
// JSON: line <L>, column <C>: ...", and invalid UTF-8 "<name>: line <N>:
// invalid UTF-8". Members of an array element are named by their path in the
// message, e.g. "entities[1].start is negative (-3)". A SQuAD file is parsed
// whole in memory. A missing file is NOT_FOUND (ReadDatasetFile).
//
// Thread safety: the free functions share no state; a DatasetStreamParser
// is one upload's, used by one thread at a time.
#ifndef ADAPTERD_COMMON_DATASET_FILE_H_
#define ADAPTERD_COMMON_DATASET_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd {

enum class DatasetFormat {
  kAuto,  // from the file name's extension, else from the content (see above)
  kCsv,
  kJsonl,
  kSquad,  // SQuAD v1.1 / v2.0 JSON
};

// The API's names of the formats (UploadDatasetRequest.Metadata.file_format)
// and the reader's: AUTO <-> kAuto, CSV <-> kCsv, JSONL <-> kJsonl, SQUAD <->
// kSquad. UNSPECIFIED (no file) reads as kAuto.
DatasetFormat FromApiFormat(v1::DatasetFormat format);
v1::DatasetFormat ToApiFormat(DatasetFormat format);

// "auto", "csv", "jsonl" / "json" / "ndjson", "squad" (case-insensitive).
absl::StatusOr<DatasetFormat> ParseDatasetFormat(std::string_view name);

// The format `path`'s extension names (.json: kJsonl; ParseDataset and
// ReadDatasetFile with kAuto still read a .json file that holds a SQuAD
// document as SQuAD); INVALID_ARGUMENT for an unknown extension
// (ParseDataset and ReadDatasetFile then look at the content).
absl::StatusOr<DatasetFormat> DatasetFormatForPath(std::string_view path);

// Parses `contents`. `name` is used in error messages and, for kAuto, to
// pick the format (its extension, else the content).
absl::StatusOr<std::vector<v1::Example>> ParseDataset(std::string_view contents, DatasetFormat format,
                                                      std::string_view name);

// Reads and parses the file at `path`.
absl::StatusOr<std::vector<v1::Example>> ReadDatasetFile(const std::string& path,
                                                         DatasetFormat format = DatasetFormat::kAuto);

// Parses a CSV or JSON Lines dataset as it arrives, a piece at a time (the
// HTTP gateway's streamed uploads), by the rules above: the examples, and
// the errors with their line numbers, are those ParseDataset gives for the
// whole input. Memory holds one incomplete record at most: a record (a line
// of JSON Lines, a CSV record with its quoted line breaks) longer than
// `max_record_bytes` is INVALID_ARGUMENT. After an error every call returns
// it. SQuAD is one JSON document and is parsed whole (ParseDataset).
class DatasetStreamParser {
 public:
  // `format`: kCsv or kJsonl. `name` starts error messages.
  DatasetStreamParser(DatasetFormat format, std::string name, size_t max_record_bytes);

  // Appends `bytes`; returns the examples of the records they complete
  // (often none), in order.
  absl::StatusOr<std::vector<v1::Example>> Feed(std::string_view bytes);
  // The end of the input: the last record's examples (it may lack a line
  // break). INVALID_ARGUMENT, as ParseDataset, when the whole input was
  // empty or held no examples.
  absl::StatusOr<std::vector<v1::Example>> Finish();

 private:
  absl::StatusOr<std::vector<v1::Example>> ParsePiece(std::string_view piece);

  const DatasetFormat format_;
  const std::string name_;
  const size_t max_record_bytes_;
  std::string pending_;       // bytes after the last complete record
  size_t scanned_ = 0;        // pending_[0, scanned_) looked at for boundaries
  size_t boundary_ = 0;       // end of the last complete record in pending_
  bool in_quotes_ = false;    // CSV: inside a quoted field at scanned_
  int next_line_ = 1;         // the line number of pending_[0]
  std::string csv_header_;    // CSV: the header record, once read
  int header_lines_ = 0;      // line breaks in csv_header_
  bool saw_content_ = false;  // anything but whitespace (and a BOM) so far
  std::string held_;          // whitespace-only records before any content
  int64_t examples_ = 0;
  absl::Status error_;
};

// Reads one dataset file that arrives a piece at a time, in any format: the
// server's one reader of uploaded files (UploadDataset with file bytes, the
// REST upload). CSV and JSON Lines (given, or by `name`'s extension .csv,
// .jsonl, .ndjson) stream through DatasetStreamParser; a SQuAD document, and
// a file whose format only its content tells (kAuto with .json or another
// extension), is held whole and read by ParseDataset at Finish, at most
// `max_whole_bytes` of it (INVALID_ARGUMENT past that, naming the streamed
// formats). The examples and errors are ParseDataset's for the whole file.
// Not thread-safe: one upload stream drives it.
class DatasetFileReader {
 public:
  DatasetFileReader(DatasetFormat format, std::string name, size_t max_record_bytes, size_t max_whole_bytes);

  // Appends `bytes`; returns the examples they complete (often none).
  absl::StatusOr<std::vector<v1::Example>> Feed(std::string_view bytes);
  // The end of the file: the rest of its examples.
  absl::StatusOr<std::vector<v1::Example>> Finish();

 private:
  const DatasetFormat format_;
  const std::string name_;
  const size_t max_whole_bytes_;
  std::unique_ptr<DatasetStreamParser> stream_;  // null: read whole
  std::string whole_;
};

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_DATASET_FILE_H_
