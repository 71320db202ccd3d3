#include "storage/task_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/batch.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "storage/record_codec.h"

namespace adapterd::storage {

using v1::TaskRecord;

namespace {

absl::Status CheckTaskKey(const TaskRecord& rec, std::string_view key, std::string_view tenant,
                          std::string_view task_id) {
  if (rec.tenant() != tenant || rec.task_id() != task_id) {
    return CorruptRecordError(ColumnFamily::kTasks, key,
                              absl::StrCat("the record names task '", rec.tenant(), "/", rec.task_id(), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TaskRecord> TaskStore::Get(std::string_view tenant, std::string_view task_id) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  const std::string key = keys::Task(tenant, task_id);
  TaskRecord rec;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kTasks, key, &rec));
  if (!found) return absl::NotFoundError(absl::StrCat("task '", key, "' not found"));
  RETURN_IF_ERROR(CheckTaskKey(rec, key, tenant, task_id));
  return rec;
}

absl::Status TaskStore::Put(const TaskRecord& task) {
  Batch batch;
  RETURN_IF_ERROR(batch.PutTask(task));
  return db_->Commit(batch);
}

absl::Status TaskStore::Delete(std::string_view tenant, std::string_view task_id) {
  Batch batch;
  RETURN_IF_ERROR(batch.DeleteTask(tenant, task_id));
  return db_->Commit(batch);
}

absl::StatusOr<TaskStore::Page> TaskStore::List(std::string_view tenant, int page_size,
                                                std::string_view page_token) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  Page page;
  const std::string prefix = keys::TaskPrefix(tenant);
  ASSIGN_OR_RETURN(page.next_page_token,
                   db_->ListPage(ColumnFamily::kTasks, prefix, page_token, page_size,
                                 [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
                                   TaskRecord rec;
                                   RETURN_IF_ERROR(ParseRecord(ColumnFamily::kTasks, key, value, &rec));
                                   RETURN_IF_ERROR(CheckTaskKey(rec, key, tenant, key.substr(prefix.size())));
                                   page.tasks.push_back(std::move(rec));
                                   return true;
                                 }));
  return page;
}

}  // namespace adapterd::storage
