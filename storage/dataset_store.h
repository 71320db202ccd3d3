// DatasetStore: the `datasets` column family. A dataset is a DatasetRecord
// (metadata, key "m/tenant/dataset_id") and DatasetChunks 0..num_chunks-1
// (keys "c/tenant/dataset_id/<index>"), in blob files when large.
//
// Upload protocol: ClearChunks, then PutChunk for each chunk as it streams
// in, then PutRecord, which makes the dataset visible. Or Put(record, chunks)
// in one atomic write. Chunks without a record (an upload abandoned, or cut
// short by a crash) are invisible: Delete and ClearChunks remove them, and
// Database::Open removes all of them (RemoveUncommittedChunks), so they are
// never read as part of a later upload under the same id.
//
// Thread safety: thread-safe. Ownership: owned by its Database; get it with
// Database::datasets(). Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_DATASET_STORE_H_
#define ADAPTERD_STORAGE_DATASET_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace adapterd::storage {

class Database;

class DatasetStore {
 public:
  explicit DatasetStore(Database* db) : db_(db) {}

  // Removes every chunk stored under a dataset id, and gives their space
  // back (best effort: the removal is what counts); for an id with no record
  // (the start of an upload: the caller makes sure no other upload of the
  // id runs and no record exists).
  absl::Status ClearChunks(std::string_view tenant, std::string_view dataset_id);
  // Removes the chunks of every dataset id that has no record; returns how
  // many ids had some. Run at start-up, before uploads begin.
  absl::StatusOr<int64_t> RemoveUncommittedChunks();
  // Writes chunk `index` (>= 0) of a dataset being uploaded.
  absl::Status PutChunk(std::string_view tenant, std::string_view dataset_id, int64_t index,
                        const v1::DatasetChunk& chunk);
  // Writes the metadata, making the dataset visible. Chunks
  // 0..record.num_chunks()-1 must have been written (ForEachChunk checks).
  absl::Status PutRecord(const v1::DatasetRecord& record);
  // Writes the metadata and all chunks atomically. INVALID_ARGUMENT unless
  // record.num_chunks() == chunks.size().
  absl::Status Put(const v1::DatasetRecord& record, const std::vector<v1::DatasetChunk>& chunks);

  // NOT_FOUND "dataset 'tenant/id' not found".
  absl::StatusOr<v1::DatasetRecord> Get(std::string_view tenant, std::string_view dataset_id) const;
  // NOT_FOUND if the chunk does not exist.
  absl::StatusOr<v1::DatasetChunk> GetChunk(std::string_view tenant, std::string_view dataset_id, int64_t index) const;
  // Calls fn(index, chunk) for chunks 0..num_chunks-1 in order, reading them
  // one at a time from one snapshot; stops at fn's first error and returns it.
  // NOT_FOUND if the dataset does not exist; DATA_LOSS if a chunk is missing
  // or unexpected, or the count differs from the record's num_chunks.
  absl::Status ForEachChunk(std::string_view tenant, std::string_view dataset_id,
                            const std::function<absl::Status(int64_t index, const v1::DatasetChunk& chunk)>& fn) const;

  struct Page {
    std::vector<v1::DatasetRecord> datasets;
    std::string next_page_token;  // "" when there are no more
  };
  // A tenant's datasets in dataset_id order (paging as TaskStore::List).
  absl::StatusOr<Page> List(std::string_view tenant, int page_size, std::string_view page_token) const;

  // Deletes the record and every chunk atomically, then gives their space
  // back (Database::ReclaimSpace). NOT_FOUND if there was no record (chunks
  // of an abandoned upload are removed all the same).
  absl::Status Delete(std::string_view tenant, std::string_view dataset_id);

 private:
  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_DATASET_STORE_H_
