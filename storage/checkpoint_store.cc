#include "storage/checkpoint_store.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/batch.h"
#include "storage/database.h"
#include "storage/keys.h"

namespace adapterd::storage {

using v1::CheckpointRecord;

absl::Status CheckpointStore::Put(const CheckpointRecord& checkpoint) {
  Batch batch;
  RETURN_IF_ERROR(batch.PutCheckpoint(checkpoint));
  return db_->Commit(batch);
}

absl::StatusOr<CheckpointRecord> CheckpointStore::Get(std::string_view job_id) const {
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  CheckpointRecord rec;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kCheckpoints, keys::Checkpoint(job_id), &rec));
  if (!found) {
    return absl::NotFoundError(absl::StrCat("no checkpoint for job '", std::string(job_id), "'"));
  }
  return rec;
}

absl::Status CheckpointStore::Delete(std::string_view job_id) {
  Batch batch;
  RETURN_IF_ERROR(batch.DeleteCheckpoint(job_id));
  return db_->Commit(batch);
}

}  // namespace adapterd::storage
