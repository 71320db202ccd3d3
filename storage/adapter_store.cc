#include "storage/adapter_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/snapshot.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "storage/record_codec.h"

namespace adapterd::storage {

using v1::TaskRecord;

absl::StatusOr<std::string> AdapterStore::Get(std::string_view tenant, std::string_view task_id,
                                              int64_t version) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  if (version <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid adapter version ", version));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                   db_->ReadValue(ColumnFamily::kAdapters, keys::Adapter(tenant, task_id, version)));
  if (!bytes.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("version ", version, " of task '", keys::Task(tenant, task_id), "' is not stored"));
  }
  return std::move(*bytes);
}

absl::StatusOr<AdapterStore::Current> AdapterStore::GetCurrent(std::string_view tenant,
                                                               std::string_view task_id) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  RETURN_IF_ERROR(db_->CheckOpen());
  const std::string task_key = keys::Task(tenant, task_id);
  // One snapshot for both reads: retention may delete the version a stale
  // record points at.
  rocksdb::ManagedSnapshot snapshot(db_->db_.get());
  Current current;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kTasks, task_key, &current.task, snapshot.snapshot()));
  if (!found) return absl::NotFoundError(absl::StrCat("task '", task_key, "' not found"));
  current.version = current.task.current_version();
  if (current.version <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("task '", task_key, "' has no ready version yet"));
  }
  const std::string key = keys::Adapter(tenant, task_id, current.version);
  ASSIGN_OR_RETURN(std::optional<std::string> bytes, db_->ReadValue(ColumnFamily::kAdapters, key, snapshot.snapshot()));
  if (!bytes.has_value()) {
    return CorruptRecordError(
        ColumnFamily::kAdapters, key,
        absl::StrCat("task '", task_key, "' points at version ", current.version, " but its bytes are missing"));
  }
  current.bytes = std::move(*bytes);
  return current;
}

}  // namespace adapterd::storage
