// TaskStore: the `tasks` column family (TaskRecord per "tenant/task_id").
//
// Thread safety: thread-safe. Ownership: owned by its Database; get it with
// Database::tasks(). Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_TASK_STORE_H_
#define ADAPTERD_STORAGE_TASK_STORE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "storage/paging.h"

namespace adapterd::storage {

class Database;

class TaskStore {
 public:
  explicit TaskStore(Database* db) : db_(db) {}

  // NOT_FOUND "task 'tenant/task_id' not found".
  absl::StatusOr<v1::TaskRecord> Get(std::string_view tenant, std::string_view task_id) const;

  // Upserts the task's metadata (labels, adapter_config, fingerprint,
  // timestamps). The version fields, current_job_id and state are storage's:
  // the stored values are kept (a new task starts PENDING with no version).
  // New versions come only from Database::PromoteAdapterVersion.
  absl::Status Put(const v1::TaskRecord& task);

  // Deletes the task and all its adapter versions in one atomic write.
  // NOT_FOUND if the task does not exist.
  absl::Status Delete(std::string_view tenant, std::string_view task_id);

  struct Page {
    std::vector<v1::TaskRecord> tasks;
    // Pass to the next List call; "" when there are no more tasks.
    std::string next_page_token;
  };
  // A tenant's tasks in task_id order, `page_size` at most (<= 0: the
  // default; capped at kMaxPageSize). `page_token` is "" or a previous
  // next_page_token (INVALID_ARGUMENT otherwise).
  absl::StatusOr<Page> List(std::string_view tenant, int page_size, std::string_view page_token) const;

 private:
  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_TASK_STORE_H_
