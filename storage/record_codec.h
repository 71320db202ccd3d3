// Internal to storage/: proto <-> bytes with storage's error conventions.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_STORAGE_RECORD_CODEC_H_
#define ADAPTERD_STORAGE_RECORD_CODEC_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "storage/batch.h"

namespace adapterd::storage {

// Serializes `msg`; INVALID_ARGUMENT if it cannot be (over 2 GiB).
absl::Status SerializeRecord(const google::protobuf::MessageLite& msg, std::string* out);

// Parses a stored record; DATA_LOSS naming the column family, the key and the
// record type when the bytes are not a valid message.
absl::Status ParseRecord(ColumnFamily cf, std::string_view key, std::string_view bytes,
                         google::protobuf::MessageLite* out);

// DATA_LOSS "corrupt record in column family '<cf>' at key '<key>': <what>".
absl::Status CorruptRecordError(ColumnFamily cf, std::string_view key, std::string_view what);

// A key with non-printable bytes escaped, for messages.
std::string PrintableKey(std::string_view key);

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_RECORD_CODEC_H_
