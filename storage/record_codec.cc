#include "storage/record_codec.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace adapterd::storage {

absl::Status SerializeRecord(const google::protobuf::MessageLite& msg, std::string* out) {
  out->clear();
  if (!msg.SerializeToString(out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot serialize ", msg.GetTypeName(), " (", msg.ByteSizeLong(), " bytes; the limit is 2 GiB)"));
  }
  return absl::OkStatus();
}

std::string PrintableKey(std::string_view key) { return absl::CHexEscape(std::string(key)); }

absl::Status CorruptRecordError(ColumnFamily cf, std::string_view key, std::string_view what) {
  return absl::DataLossError(absl::StrCat("corrupt record in column family '", ColumnFamilyName(cf), "' at key '",
                                          PrintableKey(key), "': ", std::string(what)));
}

absl::Status ParseRecord(ColumnFamily cf, std::string_view key, std::string_view bytes,
                         google::protobuf::MessageLite* out) {
  if (!out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return CorruptRecordError(cf, key,
                              absl::StrCat("cannot parse ", out->GetTypeName(), " from ", bytes.size(), " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::storage
