// CheckpointStore: the `checkpoints` column family, the latest training
// checkpoint per job (blob files; values are megabytes).
//
// Thread safety: thread-safe. Ownership: owned by its Database; get it with
// Database::checkpoints(). Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_CHECKPOINT_STORE_H_
#define ADAPTERD_STORAGE_CHECKPOINT_STORE_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace adapterd::storage {

class Database;

class CheckpointStore {
 public:
  explicit CheckpointStore(Database* db) : db_(db) {}

  // Replaces the job's checkpoint (durably, when sync_writes).
  absl::Status Put(const v1::CheckpointRecord& checkpoint);
  // NOT_FOUND "no checkpoint for job '...'".
  absl::StatusOr<v1::CheckpointRecord> Get(std::string_view job_id) const;
  // OK whether or not a checkpoint existed. (A promotion deletes its job's
  // checkpoint itself; Batch::DeleteCheckpoint pairs it with a transition.)
  absl::Status Delete(std::string_view job_id);

 private:
  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_CHECKPOINT_STORE_H_
