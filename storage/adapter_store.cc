#include "storage/adapter_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/snapshot.h"
#include "rocksdb/write_batch.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "storage/record_codec.h"
#include "storage/rocks_status.h"

namespace adapterd::storage {

using v1::TaskRecord;

namespace {

absl::Status ValidateTask(std::string_view tenant, std::string_view task_id) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  return ValidateId("task_id", task_id);
}

absl::Status ValidateVersion(std::string_view tenant, std::string_view task_id, int64_t version) {
  RETURN_IF_ERROR(ValidateTask(tenant, task_id));
  if (version <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid adapter version ", version));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> AdapterStore::Get(std::string_view tenant, std::string_view task_id,
                                              int64_t version) const {
  RETURN_IF_ERROR(ValidateVersion(tenant, task_id, version));
  ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                   db_->ReadValue(ColumnFamily::kAdapters, keys::Adapter(tenant, task_id, version)));
  if (!bytes.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("version ", version, " of task '", keys::Task(tenant, task_id), "' is not stored"));
  }
  return std::move(*bytes);
}

absl::Status AdapterStore::ReadCurrentRecord(std::string_view tenant, std::string_view task_id,
                                             const rocksdb::Snapshot* snapshot, TaskRecord* task) const {
  const std::string task_key = keys::Task(tenant, task_id);
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kTasks, task_key, task, snapshot));
  if (!found) return absl::NotFoundError(absl::StrCat("task '", task_key, "' not found"));
  if (task->current_version() <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("task '", task_key, "' has no ready version yet"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AdapterStore::Current> AdapterStore::GetCurrent(std::string_view tenant,
                                                               std::string_view task_id) const {
  RETURN_IF_ERROR(ValidateTask(tenant, task_id));
  RETURN_IF_ERROR(db_->CheckOpen());
  // One snapshot for both reads: retention may delete the version a stale
  // record points at.
  rocksdb::ManagedSnapshot snapshot(db_->db_.get());
  Current current;
  RETURN_IF_ERROR(ReadCurrentRecord(tenant, task_id, snapshot.snapshot(), &current.task));
  current.version = current.task.current_version();
  const std::string task_key = keys::Task(tenant, task_id);
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

absl::StatusOr<std::optional<std::string>> AdapterStore::GetServingForm(std::string_view tenant,
                                                                        std::string_view task_id,
                                                                        int64_t version) const {
  RETURN_IF_ERROR(ValidateVersion(tenant, task_id, version));
  return db_->ReadValue(ColumnFamily::kAdapters, keys::AdapterServingForm(tenant, task_id, version), nullptr,
                        /*verify_checksums=*/false);
}

absl::StatusOr<AdapterStore::CurrentServingForm> AdapterStore::GetCurrentServingForm(std::string_view tenant,
                                                                                     std::string_view task_id) const {
  RETURN_IF_ERROR(ValidateTask(tenant, task_id));
  RETURN_IF_ERROR(db_->CheckOpen());
  rocksdb::ManagedSnapshot snapshot(db_->db_.get());
  TaskRecord task;
  RETURN_IF_ERROR(ReadCurrentRecord(tenant, task_id, snapshot.snapshot(), &task));
  CurrentServingForm out;
  out.version = task.current_version();
  ASSIGN_OR_RETURN(out.bytes,
                   db_->ReadValue(ColumnFamily::kAdapters, keys::AdapterServingForm(tenant, task_id, out.version),
                                  snapshot.snapshot(), /*verify_checksums=*/false));
  return out;
}

uint64_t AdapterStore::ServingFormEpoch() const { return db_->adapter_deletions_.load(); }

absl::Status AdapterStore::PutServingForm(std::string_view tenant, std::string_view task_id, int64_t version,
                                          std::string_view bytes, uint64_t epoch) {
  RETURN_IF_ERROR(ValidateVersion(tenant, task_id, version));
  RETURN_IF_ERROR(db_->CheckOpen());
  const std::string task_key = keys::Task(tenant, task_id);
  // Under the commit lock, which every deletion of a version holds: no
  // deletion can fall between these checks and the write.
  absl::MutexLock lock(&db_->commit_mu_);
  if (db_->adapter_deletions_.load() != epoch) {
    return absl::AbortedError(absl::StrCat("adapter versions were deleted since the serving form of version ", version,
                                           " of task '", task_key, "' was made; not stored"));
  }
  TaskRecord task;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kTasks, task_key, &task));
  if (!found || std::find(task.versions().begin(), task.versions().end(), version) == task.versions().end()) {
    return absl::NotFoundError(absl::StrCat("version ", version, " of task '", task_key, "' is not stored"));
  }
  rocksdb::WriteBatch wb;
  RETURN_IF_ERROR(FromRocks(wb.Put(db_->handle(ColumnFamily::kAdapters),
                                   keys::AdapterServingForm(tenant, task_id, version), rocksdb::Slice(bytes)),
                            "build write batch"));
  return db_->Write(&wb, /*sync=*/false);
}

absl::Status AdapterStore::DeleteServingForm(std::string_view tenant, std::string_view task_id, int64_t version) {
  RETURN_IF_ERROR(ValidateVersion(tenant, task_id, version));
  rocksdb::WriteBatch wb;
  RETURN_IF_ERROR(
      FromRocks(wb.Delete(db_->handle(ColumnFamily::kAdapters), keys::AdapterServingForm(tenant, task_id, version)),
                "build write batch"));
  return db_->Write(&wb);
}

}  // namespace adapterd::storage
