#include "storage/dataset_store.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/snapshot.h"
#include "storage/batch.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "storage/record_codec.h"
#include "storage/rocks_status.h"

namespace adapterd::storage {

using v1::DatasetChunk;
using v1::DatasetRecord;

namespace {

absl::Status ValidateDataset(std::string_view tenant, std::string_view dataset_id) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  return ValidateId("dataset_id", dataset_id);
}

std::string Name(std::string_view tenant, std::string_view dataset_id) {
  return absl::StrCat(std::string(tenant), "/", std::string(dataset_id));
}

}  // namespace

absl::Status DatasetStore::ClearChunks(std::string_view tenant, std::string_view dataset_id) {
  RETURN_IF_ERROR(ValidateDataset(tenant, dataset_id));
  const std::string prefix = keys::DatasetChunkPrefix(tenant, dataset_id);
  // Most ids were never used: only a range with keys costs a write.
  bool any = false;
  RETURN_IF_ERROR(db_->Scan(ColumnFamily::kDatasets, prefix, keys::PrefixEnd(prefix),
                            [&](std::string_view, std::string_view) -> absl::StatusOr<bool> {
                              any = true;
                              return false;
                            }));
  if (!any) return absl::OkStatus();
  Batch batch;
  RETURN_IF_ERROR(batch.DeleteDatasetChunks(tenant, dataset_id));
  RETURN_IF_ERROR(db_->Commit(batch));
  (void)db_->ReclaimSpace(ColumnFamily::kDatasets, prefix, keys::PrefixEnd(prefix));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> DatasetStore::RemoveUncommittedChunks() {
  RETURN_IF_ERROR(db_->CheckOpen());
  const std::string all(keys::kDatasetChunkRoot);
  std::vector<std::pair<std::string, std::string>> orphans;  // (tenant, dataset id)
  {
    rocksdb::ReadOptions ro;
    std::unique_ptr<rocksdb::Iterator> it(db_->db_->NewIterator(ro, db_->handle(ColumnFamily::kDatasets)));
    // One seek per dataset id: "c/<tenant>/<id>/<index>" keys sort together.
    for (it->Seek(all); it->Valid() && it->key().starts_with(all);) {
      const std::string key = it->key().ToString();
      const size_t tenant_end = key.find('/', all.size());
      const size_t id_end = tenant_end == std::string::npos ? std::string::npos : key.find('/', tenant_end + 1);
      if (id_end == std::string::npos) {
        return CorruptRecordError(ColumnFamily::kDatasets, key, "not a dataset chunk key");
      }
      const std::string tenant = key.substr(all.size(), tenant_end - all.size());
      const std::string id = key.substr(tenant_end + 1, id_end - tenant_end - 1);
      ASSIGN_OR_RETURN(std::optional<std::string> meta,
                       db_->ReadValue(ColumnFamily::kDatasets, keys::DatasetMeta(tenant, id)));
      if (!meta.has_value()) orphans.emplace_back(tenant, id);
      it->Seek(keys::PrefixEnd(key.substr(0, id_end + 1)));
    }
    RETURN_IF_ERROR(FromRocks(it->status(), "scan dataset chunks"));
  }
  if (orphans.empty()) return 0;
  Batch batch;
  for (const auto& [tenant, id] : orphans) RETURN_IF_ERROR(batch.DeleteDatasetChunks(tenant, id));
  RETURN_IF_ERROR(db_->Commit(batch));
  // The chunks are gone whatever happens here; the space follows.
  (void)db_->ReclaimSpace(ColumnFamily::kDatasets, all, keys::PrefixEnd(all));
  return static_cast<int64_t>(orphans.size());
}

absl::Status DatasetStore::PutChunk(std::string_view tenant, std::string_view dataset_id, int64_t index,
                                    const DatasetChunk& chunk) {
  Batch batch;
  RETURN_IF_ERROR(batch.PutDatasetChunk(tenant, dataset_id, index, chunk));
  return db_->Commit(batch);
}

absl::Status DatasetStore::PutRecord(const DatasetRecord& record) {
  Batch batch;
  RETURN_IF_ERROR(batch.PutDatasetRecord(record));
  return db_->Commit(batch);
}

absl::Status DatasetStore::Put(const DatasetRecord& record, const std::vector<DatasetChunk>& chunks) {
  if (record.num_chunks() != static_cast<int64_t>(chunks.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset record says ", record.num_chunks(), " chunks but ", chunks.size(), " were given"));
  }
  Batch batch;
  RETURN_IF_ERROR(batch.PutDatasetRecord(record));
  for (size_t i = 0; i < chunks.size(); ++i) {
    RETURN_IF_ERROR(batch.PutDatasetChunk(record.tenant(), record.dataset_id(), static_cast<int64_t>(i), chunks[i]));
  }
  return db_->Commit(batch);
}

absl::StatusOr<DatasetRecord> DatasetStore::Get(std::string_view tenant, std::string_view dataset_id) const {
  RETURN_IF_ERROR(ValidateDataset(tenant, dataset_id));
  DatasetRecord rec;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kDatasets, keys::DatasetMeta(tenant, dataset_id), &rec));
  if (!found) {
    return absl::NotFoundError(absl::StrCat("dataset '", Name(tenant, dataset_id), "' not found"));
  }
  return rec;
}

absl::StatusOr<DatasetChunk> DatasetStore::GetChunk(std::string_view tenant, std::string_view dataset_id,
                                                    int64_t index) const {
  RETURN_IF_ERROR(ValidateDataset(tenant, dataset_id));
  DatasetChunk chunk;
  ASSIGN_OR_RETURN(bool found,
                   db_->ReadRecord(ColumnFamily::kDatasets, keys::DatasetChunk(tenant, dataset_id, index), &chunk));
  if (!found) {
    return absl::NotFoundError(absl::StrCat("chunk ", index, " of dataset '", Name(tenant, dataset_id), "' not found"));
  }
  return chunk;
}

absl::Status DatasetStore::ForEachChunk(
    std::string_view tenant, std::string_view dataset_id,
    const std::function<absl::Status(int64_t index, const DatasetChunk& chunk)>& fn) const {
  RETURN_IF_ERROR(ValidateDataset(tenant, dataset_id));
  RETURN_IF_ERROR(db_->CheckOpen());
  rocksdb::ManagedSnapshot snapshot(db_->db_.get());
  DatasetRecord rec;
  const std::string meta_key = keys::DatasetMeta(tenant, dataset_id);
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kDatasets, meta_key, &rec, snapshot.snapshot()));
  if (!found) {
    return absl::NotFoundError(absl::StrCat("dataset '", Name(tenant, dataset_id), "' not found"));
  }
  const std::string prefix = keys::DatasetChunkPrefix(tenant, dataset_id);
  int64_t next = 0;
  absl::Status fn_status;
  RETURN_IF_ERROR(db_->Scan(
      ColumnFamily::kDatasets, prefix, keys::PrefixEnd(prefix),
      [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
        std::optional<int64_t> index = keys::ParsePaddedNumber(key.substr(prefix.size()));
        if (!index.has_value() || *index != next || next >= rec.num_chunks()) {
          return CorruptRecordError(ColumnFamily::kDatasets, key,
                                    absl::StrCat("expected chunk ", next, " of ", rec.num_chunks(), " of dataset '",
                                                 Name(tenant, dataset_id), "'"));
        }
        DatasetChunk chunk;
        RETURN_IF_ERROR(ParseRecord(ColumnFamily::kDatasets, key, value, &chunk));
        fn_status = fn(next, chunk);
        if (!fn_status.ok()) return false;
        ++next;
        return true;
      },
      snapshot.snapshot()));
  RETURN_IF_ERROR(fn_status);
  if (next != rec.num_chunks()) {
    return CorruptRecordError(
        ColumnFamily::kDatasets, meta_key,
        absl::StrCat("the dataset has ", rec.num_chunks(), " chunks but only ", next, " are stored"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DatasetStore::Page> DatasetStore::List(std::string_view tenant, int page_size,
                                                      std::string_view page_token) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  Page page;
  ASSIGN_OR_RETURN(page.next_page_token,
                   db_->ListPage(ColumnFamily::kDatasets, keys::DatasetMetaPrefix(tenant), page_token, page_size,
                                 [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
                                   DatasetRecord rec;
                                   RETURN_IF_ERROR(ParseRecord(ColumnFamily::kDatasets, key, value, &rec));
                                   page.datasets.push_back(std::move(rec));
                                   return true;
                                 }));
  return page;
}

absl::Status DatasetStore::Delete(std::string_view tenant, std::string_view dataset_id) {
  RETURN_IF_ERROR(ValidateDataset(tenant, dataset_id));
  const std::string meta_key = keys::DatasetMeta(tenant, dataset_id);
  ASSIGN_OR_RETURN(std::optional<std::string> meta, db_->ReadValue(ColumnFamily::kDatasets, meta_key));
  Batch batch;
  RETURN_IF_ERROR(batch.DeleteDataset(tenant, dataset_id));
  RETURN_IF_ERROR(db_->Commit(batch));
  const std::string prefix = keys::DatasetChunkPrefix(tenant, dataset_id);
  // The records are gone whatever happens here; the space follows.
  (void)db_->ReclaimSpace(ColumnFamily::kDatasets, prefix, keys::PrefixEnd(prefix));
  if (!meta.has_value()) {
    return absl::NotFoundError(absl::StrCat("dataset '", Name(tenant, dataset_id), "' not found"));
  }
  return absl::OkStatus();
}

}  // namespace adapterd::storage
