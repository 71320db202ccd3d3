// Fuzzes ParseRecord (storage/record_codec.h): every record read back from
// RocksDB (a database restored from a backup, or damaged on disk) is parsed by
// it.
//
// Input: byte 0 picks the record type (and its column family) from kKinds;
// byte 1 is the key's length (mod 64), then the key, then the record bytes.
//
// Invariants: a failed parse is DATA_LOSS with a valid UTF-8 message naming
// the column family; a record that parses serialises (SerializeRecord, to
// ByteSizeLong() bytes), that serialisation parses again, and both messages
// serialise (deterministically) to the same bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "storage/batch.h"
#include "storage/record_codec.h"
#include "tests/fuzz/fuzz_check.h"

namespace adapterd::storage {
namespace {

struct Kind {
  ColumnFamily cf;
  std::unique_ptr<google::protobuf::MessageLite> (*make)();
};

template <typename T>
std::unique_ptr<google::protobuf::MessageLite> Make() {
  return std::make_unique<T>();
}

// The record types storage/ parses, with the column family each lives in.
constexpr Kind kKinds[] = {
    {ColumnFamily::kTasks, &Make<v1::TaskRecord>},
    {ColumnFamily::kJobs, &Make<v1::JobRecord>},
    {ColumnFamily::kJobQueue, &Make<v1::QueueEntry>},
    {ColumnFamily::kJobEvents, &Make<v1::JobEvent>},
    {ColumnFamily::kDatasets, &Make<v1::DatasetRecord>},
    {ColumnFamily::kDatasets, &Make<v1::DatasetChunk>},
    {ColumnFamily::kCheckpoints, &Make<v1::CheckpointRecord>},
};
constexpr size_t kNumKinds = sizeof(kKinds) / sizeof(kKinds[0]);

// Deterministic serialisation (map entries sorted), to compare messages.
std::string Canonical(const google::protobuf::MessageLite& msg) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    FUZZ_CHECK(msg.SerializeToCodedStream(&coded)) << "cannot serialise " << msg.GetTypeName();
  }
  return out;
}

}  // namespace
}  // namespace adapterd::storage

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // proto3 strings with invalid UTF-8 are logged as parse errors; millions of
  // such lines would only slow the fuzzer down.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace adapterd::storage;
  if (size < 2) return 0;
  const Kind& kind = kKinds[data[0] % kNumKinds];
  std::string_view rest = adapterd::fuzz::AsStringView(data + 2, size - 2);
  const size_t key_size = std::min<size_t>(data[1] % 64, rest.size());
  const std::string_view key = rest.substr(0, key_size);
  const std::string_view bytes = rest.substr(key_size);

  std::unique_ptr<google::protobuf::MessageLite> msg = kind.make();
  const absl::Status parsed = ParseRecord(kind.cf, key, bytes, msg.get());
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.code() == absl::StatusCode::kDataLoss) << "unexpected error " << parsed;
    const std::string message(parsed.message());
    FUZZ_CHECK(adapterd::IsValidUtf8(message)) << "error message is not valid UTF-8";
    FUZZ_CHECK(message.find(ColumnFamilyName(kind.cf)) != std::string::npos)
        << "error does not name the column family: " << message;
    return 0;
  }
  std::string serialized;
  const absl::Status written = SerializeRecord(*msg, &serialized);
  FUZZ_CHECK(written.ok()) << "parsed record does not serialise: " << written;
  FUZZ_CHECK(serialized.size() == msg->ByteSizeLong()) << "serialised size != ByteSizeLong()";

  std::unique_ptr<google::protobuf::MessageLite> again = kind.make();
  const absl::Status reparsed = ParseRecord(kind.cf, key, serialized, again.get());
  FUZZ_CHECK(reparsed.ok()) << "re-serialised " << msg->GetTypeName() << " does not parse: " << reparsed;
  FUZZ_CHECK(Canonical(*msg) == Canonical(*again)) << msg->GetTypeName() << " changed in a round trip";
  return 0;
}
