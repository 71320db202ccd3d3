// Key layout of adapterd's RocksDB database, and validation of the ids that
// keys are built from. Every key is built here and nowhere else.
//
//   column family  key                                   value
//   tasks          tenant/task_id                        TaskRecord
//   adapters       tenant/task_id/<20-digit version>     adapter bytes (safetensors)
//                  tenant/task_id/<20-digit version>/serving
//                                                        its serving form (derived,
//                                                        server/model/serving_form.h)
//   jobs           tenant/job_id                         JobRecord
//   job_requests   tenant/request_id                     job_id (raw bytes)
//   job_queue      <20-digit seq>                        QueueEntry
//   job_events     job_id/<20-digit seq>                 JobEvent
//   datasets       m/tenant/dataset_id                   DatasetRecord
//                  c/tenant/dataset_id/<20-digit index>  DatasetChunk
//   checkpoints    job_id                                CheckpointRecord
//   meta           schema_version, queue_seq             decimal text
//
// Numbers are zero-padded to 20 digits (the width of UINT64_MAX), so the
// lexicographic order RocksDB keeps is the numeric order.
//
// Thread safety: pure functions.
#ifndef ADAPTERD_STORAGE_KEYS_H_
#define ADAPTERD_STORAGE_KEYS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace adapterd::storage {

// Longest id accepted in a key.
inline constexpr size_t kMaxIdBytes = 256;

// OK when `id` is non-empty, at most kMaxIdBytes, and has no '/' or NUL.
// Otherwise INVALID_ARGUMENT naming `what` (e.g. "task_id") and the id.
absl::Status ValidateId(std::string_view what, std::string_view id);

namespace keys {

// 20-digit zero-padded decimal; n must be >= 0.
std::string PaddedNumber(int64_t n);
// Inverse of PaddedNumber; nullopt unless exactly 20 decimal digits.
std::optional<int64_t> ParsePaddedNumber(std::string_view digits);

// The smallest key greater than every key that starts with `prefix` (whose
// last byte is '/', as all prefixes here are): "a/b/" -> "a/b0".
std::string PrefixEnd(std::string_view prefix);

std::string Task(std::string_view tenant, std::string_view task_id);
std::string TaskPrefix(std::string_view tenant);  // "tenant/"

std::string Adapter(std::string_view tenant, std::string_view task_id, int64_t version);
std::string AdapterPrefix(std::string_view tenant, std::string_view task_id);
// A version's serving form: under AdapterPrefix (a task's delete range
// covers it) and after Adapter(version) itself, before version + 1.
std::string AdapterServingForm(std::string_view tenant, std::string_view task_id, int64_t version);

std::string Job(std::string_view tenant, std::string_view job_id);
std::string JobPrefix(std::string_view tenant);
std::string JobRequest(std::string_view tenant, std::string_view request_id);

std::string QueueEntry(int64_t seq);

std::string JobEvent(std::string_view job_id, int64_t seq);
std::string JobEventPrefix(std::string_view job_id);

std::string DatasetMeta(std::string_view tenant, std::string_view dataset_id);
std::string DatasetMetaPrefix(std::string_view tenant);
std::string DatasetChunk(std::string_view tenant, std::string_view dataset_id, int64_t index);
std::string DatasetChunkPrefix(std::string_view tenant, std::string_view dataset_id);
// Every dataset chunk key starts with this ("c/").
inline constexpr std::string_view kDatasetChunkRoot = "c/";

std::string Checkpoint(std::string_view job_id);

inline constexpr char kSchemaVersion[] = "schema_version";
inline constexpr char kQueueSeq[] = "queue_seq";

}  // namespace keys
}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_KEYS_H_
