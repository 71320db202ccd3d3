// AdapterStore: the `adapters` column family, a task's adapter versions as
// bytes (safetensors layout, docs/ADAPTER_FORMAT.md), stored in blob files,
// and next to each version (keys::AdapterServingForm) its serving form, if
// a server has made one: the version's tensors in that server's serving
// dtype (server/model/serving_form.h), a derived cache.
//
// Versions are written only by Database::PromoteAdapterVersion (atomically
// with the TaskRecord that points at them) and removed, with their serving
// forms, by its retention or by TaskStore::Delete. Serving forms are written
// by the serving cache (PutServingForm) and may be missing or stale.
//
// Thread safety: thread-safe. Ownership: owned by its Database; get it with
// Database::adapters(). Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_ADAPTER_STORE_H_
#define ADAPTERD_STORAGE_ADAPTER_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace rocksdb {
class Snapshot;
}

namespace adapterd::storage {

class Database;

class AdapterStore {
 public:
  explicit AdapterStore(Database* db) : db_(db) {}

  // The bytes of one version. NOT_FOUND if that version is not stored
  // (never promoted, removed by retention, or the task was deleted).
  absl::StatusOr<std::string> Get(std::string_view tenant, std::string_view task_id, int64_t version) const;

  struct Current {
    v1::TaskRecord task;
    int64_t version = 0;
    std::string bytes;
  };
  // The task record and its current version's bytes, read from one snapshot
  // (a concurrent promotion cannot pair a record with other bytes).
  // NOT_FOUND if the task does not exist; FAILED_PRECONDITION if it has no
  // ready version; DATA_LOSS if the current version's bytes are missing.
  absl::StatusOr<Current> GetCurrent(std::string_view tenant, std::string_view task_id) const;

  // --- Serving forms. Read with ReadOptions::verify_checksums = false: a
  // serving form carries its own XXH3-64 digest over all of its bytes, which
  // its decoder checks (DATA_LOSS on a mismatch), so RocksDB's CRC32c of the
  // same bytes (~7 ms for 9.7 MB with Debian's librocksdb) is skipped.

  // Version `version`'s serving form; nullopt when none is stored.
  absl::StatusOr<std::optional<std::string>> GetServingForm(std::string_view tenant, std::string_view task_id,
                                                            int64_t version) const;
  struct CurrentServingForm {
    int64_t version = 0;
    std::optional<std::string> bytes;  // nullopt: none stored
  };
  // The current version and its serving form, read from one snapshot. Errors
  // as GetCurrent's (NOT_FOUND, FAILED_PRECONDITION); a missing serving form
  // is not an error.
  absl::StatusOr<CurrentServingForm> GetCurrentServingForm(std::string_view tenant, std::string_view task_id) const;

  // A token for PutServingForm: take it before reading the canonical bytes
  // a serving form is made from.
  uint64_t ServingFormEpoch() const;
  // Stores `bytes` as version `version`'s serving form (replacing one).
  // Refused, writing nothing, with ABORTED when an adapter version of any
  // task was deleted since `epoch` was taken (the bytes read may be gone, or
  // a recreated task may hold another version of that number) and with
  // NOT_FOUND when the task no longer lists the version; otherwise the
  // database's write errors (RESOURCE_EXHAUSTED, FAILED_PRECONDITION when
  // closed, ...). Logged, not synced: a crash may lose it (it is rebuilt).
  absl::Status PutServingForm(std::string_view tenant, std::string_view task_id, int64_t version,
                              std::string_view bytes, uint64_t epoch);
  // Removes version `version`'s serving form (a corrupt one), if any.
  absl::Status DeleteServingForm(std::string_view tenant, std::string_view task_id, int64_t version);

 private:
  // The task record at `snapshot`: NOT_FOUND without one,
  // FAILED_PRECONDITION without a ready version.
  absl::Status ReadCurrentRecord(std::string_view tenant, std::string_view task_id, const rocksdb::Snapshot* snapshot,
                                 v1::TaskRecord* task) const;

  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_ADAPTER_STORE_H_
