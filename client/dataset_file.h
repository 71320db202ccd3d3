// Reading labelled datasets from files for UploadDataset.
//
// Formats:
// - CSV (RFC 4180): a header row naming the columns `text` and `label`, and
//   optionally `text_pair`, in any order (names are matched after trimming
//   spaces; a UTF-8 byte-order mark is skipped). Fields may be quoted with
//   '"'; inside quotes, `""` is a quote and commas and line breaks are data.
//   Records end with LF or CRLF; completely empty lines are skipped.
// - JSON Lines: one JSON object per line with members "text", "label" and
//   optionally "text_pair" (null = absent). "text" and "text_pair" must be
//   strings; "label" a string or an integer (written in decimal, so that
//   {"label": 1} and the CSV label "1" are the same label). Other members are
//   ignored; blank lines are skipped; a UTF-8 byte-order mark is skipped.
//
// Format detection (DatasetFormat::kAuto): by the file name's extension
// (.csv = CSV; .jsonl, .json, .ndjson = JSON Lines); for any other name, by
// the content: JSON Lines when the first non-blank character is '{', else
// CSV.
//
// A file without examples is an error (INVALID_ARGUMENT "<name>: the file is
// empty" or "<name>: no examples"). Every example needs a non-empty text and
// label; all strings must be valid UTF-8. Errors about a record are
// INVALID_ARGUMENT and start with "<name>: line <N>: ", where <N> is the
// 1-based line on which the offending record (or, for an unterminated quote,
// the quoted field) starts, counting line breaks inside quoted fields. A
// missing file is NOT_FOUND (ReadDatasetFile).
//
// Thread safety: free functions without shared state.
#ifndef ADAPTERD_CLIENT_DATASET_FILE_H_
#define ADAPTERD_CLIENT_DATASET_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd::client {

enum class DatasetFormat {
  kAuto,  // from the file name's extension, else from the content (see above)
  kCsv,
  kJsonl,
};

// "auto", "csv", "jsonl" / "json" / "ndjson" (case-insensitive).
absl::StatusOr<DatasetFormat> ParseDatasetFormat(std::string_view name);

// The format `path`'s extension names; INVALID_ARGUMENT for an unknown
// extension (ParseDataset and ReadDatasetFile then look at the content).
absl::StatusOr<DatasetFormat> DatasetFormatForPath(std::string_view path);

// Parses `contents`. `name` is used in error messages and, for kAuto, to
// pick the format (its extension, else the content).
absl::StatusOr<std::vector<v1::Example>> ParseDataset(std::string_view contents, DatasetFormat format,
                                                      std::string_view name);

// Reads and parses the file at `path`.
absl::StatusOr<std::vector<v1::Example>> ReadDatasetFile(const std::string& path,
                                                         DatasetFormat format = DatasetFormat::kAuto);

}  // namespace adapterd::client

#endif  // ADAPTERD_CLIENT_DATASET_FILE_H_
