// AdapterStore: the `adapters` column family, a task's adapter versions as
// bytes (safetensors layout, docs/ADAPTER_FORMAT.md), stored in blob files.
//
// Read-only: versions are written only by Database::PromoteAdapterVersion
// (atomically with the TaskRecord that points at them) and removed by its
// retention or by TaskStore::Delete.
//
// Thread safety: thread-safe. Ownership: owned by its Database; get it with
// Database::adapters(). Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_ADAPTER_STORE_H_
#define ADAPTERD_STORAGE_ADAPTER_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

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

 private:
  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_ADAPTER_STORE_H_
