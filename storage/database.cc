#include "storage/database.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/base/config.h"
#include "absl/base/dynamic_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/iterator.h"
#include "rocksdb/options.h"
#include "rocksdb/slice.h"
#include "rocksdb/write_batch.h"
#include "storage/keys.h"
#include "storage/record_codec.h"
#include "storage/rocks_status.h"

namespace adapterd::storage {

using v1::JobEvent;
using v1::JobRecord;
using v1::QueueEntry;
using v1::TaskRecord;

struct Database::CommitState {
  // Each task as this commit leaves it so far (nullopt: deleted).
  absl::flat_hash_map<std::string, std::optional<TaskRecord>> tasks;
  // Last event seq assigned so far, per job.
  absl::flat_hash_map<std::string, int64_t> event_seqs;
  // Job and request-index keys created so far.
  absl::flat_hash_set<std::string> created_jobs;
  absl::flat_hash_set<std::string> created_requests;
  int64_t queue_seq = 0;
  std::vector<CommittedEvent> events;
  std::vector<QueueEntry> queue_entries;
  std::vector<PromotionResult> promotions;
  // Some adapter version is deleted (Database::adapter_deletions_).
  bool adapters_deleted = false;
};

namespace {

std::string_view View(const rocksdb::Slice& s) { return std::string_view(s.data(), s.size()); }

bool IsBlobFamily(ColumnFamily cf) {
  return cf == ColumnFamily::kAdapters || cf == ColumnFamily::kCheckpoints || cf == ColumnFamily::kDatasets;
}

rocksdb::ColumnFamilyOptions FamilyOptions(const Database::Options& o, ColumnFamily cf) {
  rocksdb::ColumnFamilyOptions c;
  if (IsBlobFamily(cf)) {
    // A memtable holds its values until a flush moves them to a blob file:
    // at RocksDB's default size per family, checkpoints and adapters pile up
    // resident memory before a flush (docs/PERFORMANCE.md, "Soak").
    // Written-once blobs gain nothing from a large memtable.
    c.write_buffer_size = kBlobFamilyWriteBufferBytes;
  }
  if (o.write_buffer_size > 0) c.write_buffer_size = o.write_buffer_size;
  if (IsBlobFamily(cf)) {
    // Adapter sets, checkpoints and dataset chunks are large values that are
    // written once: keep them out of the LSM tree so compactions do not
    // rewrite them, and reclaim the space of deleted ones during compaction.
    c.enable_blob_files = true;
    c.min_blob_size = o.min_blob_size;
    c.enable_blob_garbage_collection = true;
    c.blob_compression_type = rocksdb::kNoCompression;  // float weights do not compress
  }
  return c;
}

absl::Status AddToBatch(const rocksdb::Status& s) { return FromRocks(s, "build write batch"); }

}  // namespace

Database::Database() = default;

Database::~Database() { Close().IgnoreError(); }

namespace {

rocksdb::DBOptions RocksOptions(const Database::Options& options, rocksdb::Env* env) {
  rocksdb::DBOptions dbo;
  dbo.env = env;
  dbo.create_if_missing = options.create_if_missing;
  dbo.create_missing_column_families = true;
  dbo.max_background_jobs = 2;
  dbo.keep_log_file_num = 4;
  dbo.max_log_file_size = 16 << 20;
  // WAL files live until every family with data in them has flushed; a
  // family written rarely (jobs, tasks) would keep old ones, and their
  // size, forever. Past this total RocksDB flushes the families holding the
  // oldest.
  dbo.max_total_wal_size = 64 << 20;
  // RocksDB keeps every table and blob file open by default (-1): the
  // descriptors would grow with the database, past a container's nofile
  // limit (1024 is common). A bounded cache reopens cold files instead.
  dbo.max_open_files = 256;
  return dbo;
}

// The column families to open: the default one, this build's, and any a
// newer schema added (RocksDB refuses to open a database without all of its
// families).
absl::StatusOr<std::vector<rocksdb::ColumnFamilyDescriptor>> FamiliesToOpen(const Database::Options& options,
                                                                            const rocksdb::DBOptions& dbo,
                                                                            bool exists) {
  std::vector<std::string> existing;
  if (exists) {
    RETURN_IF_ERROR(FromRocks(rocksdb::DB::ListColumnFamilies(dbo, options.path, &existing),
                              absl::StrCat("list column families of database '", options.path, "'")));
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (int i = 0; i < kNumColumnFamilies; ++i) {
    auto cf = static_cast<ColumnFamily>(i);
    descriptors.emplace_back(ColumnFamilyName(cf), FamilyOptions(options, cf));
  }
  for (const std::string& name : existing) {
    bool known = std::any_of(descriptors.begin(), descriptors.end(), [&](const auto& d) { return d.name == name; });
    if (!known) descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  return descriptors;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const Options& options) {
  const std::string& path = options.path;
  if (path.empty()) return absl::InvalidArgumentError("Database::Options.path is empty");
  rocksdb::Env* env = options.env ? options.env.get() : rocksdb::Env::Default();
  const rocksdb::DBOptions dbo = RocksOptions(options, env);
  const bool exists = env->FileExists(path + "/CURRENT").ok();
  if (!exists && !options.create_if_missing) {
    return absl::NotFoundError(absl::StrCat("database '", path, "' does not exist (and create_if_missing is false)"));
  }
  if (!exists && options.env == nullptr) {
    // RocksDB creates only the last path component.
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create database directory '", path, "': ", ec.message()));
    }
  }
  ASSIGN_OR_RETURN(const std::vector<rocksdb::ColumnFamilyDescriptor> descriptors,
                   FamiliesToOpen(options, dbo, exists));
  rocksdb::DB* raw = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(dbo, path, descriptors, &handles, &raw);
  if (!s.ok()) {
    if (IsLockError(s)) {
      return absl::FailedPreconditionError(
          absl::StrCat("database '", path, "' is locked by another process (lock file ", path,
                       "/LOCK): only one adapterd process (one Database) may open it at a time; ", s.ToString()));
    }
    return FromRocks(s, absl::StrCat("open database '", path, "'"));
  }
  auto db = std::unique_ptr<Database>(new Database());
  db->Adopt(options, raw, handles);
  RETURN_IF_ERROR(db->InitSchema());
  RETURN_IF_ERROR(db->LoadQueueSeq());
  // Uploads a crash interrupted: their space comes back. Best effort (a full
  // disk must not keep the server from starting): an upload clears its id's
  // range before it writes anyway (DatasetStore::ClearChunks).
  absl::StatusOr<int64_t> swept = db->datasets_->RemoveUncommittedChunks();
  if (!swept.ok()) {
    LOG(WARNING) << "storage: could not remove the chunks of unfinished dataset uploads: " << swept.status();
  } else if (*swept > 0) {
    LOG(INFO) << "storage: removed the chunks of " << *swept << " dataset uploads that never finished";
  }
  return db;
}

void Database::Adopt(const Options& options, rocksdb::DB* raw,
                     const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  path_ = options.path;
  sync_writes_ = options.sync_writes;
  min_free_bytes_ = options.min_free_bytes;
  free_bytes_ = options.free_bytes;
  env_ = options.env;
  db_.reset(raw);
  extra_handles_.push_back(handles[0]);  // default family: unused
  for (int i = 0; i < kNumColumnFamilies; ++i) handles_[i] = handles[i + 1];
  for (size_t i = kNumColumnFamilies + 1; i < handles.size(); ++i) extra_handles_.push_back(handles[i]);
  tasks_ = std::make_unique<TaskStore>(this);
  adapters_ = std::make_unique<AdapterStore>(this);
  jobs_ = std::make_unique<JobStore>(this);
  datasets_ = std::make_unique<DatasetStore>(this);
  checkpoints_ = std::make_unique<CheckpointStore>(this);
}

std::optional<int64_t> Database::FreeBytes() const {
  if (free_bytes_) return free_bytes_();
  struct statvfs fs {};
  if (::statvfs(path_.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
}

int64_t Database::UnflushedBytes() const {
  // RocksDB's estimate of the keys and values in each family's memtables
  // (not their arenas, which run megabytes ahead of the data). A key is at
  // most a few ids and numbers long (storage/keys.h), so every key sorts
  // below this run of 0xff bytes.
  static const std::string end(4 * kMaxIdBytes + 256, '\xff');
  const rocksdb::Range all("", end);
  int64_t total = 0;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    uint64_t count = 0, size = 0;
    db_->GetApproximateMemTableStats(h, all, &count, &size);
    total += static_cast<int64_t>(size);
  }
  return total;
}

Database::SpaceHold::~SpaceHold() {
  if (db_ == nullptr) return;
  absl::MutexLock lock(&db_->space_mu_);
  db_->held_bytes_ -= bytes_;
}

std::optional<Database::SpaceHold> Database::HoldSpace(int64_t bytes, std::string_view what) {
  if (min_free_bytes_ <= 0) return SpaceHold(nullptr, 0);
  absl::MutexLock lock(&space_mu_);
  const std::optional<int64_t> free_bytes = FreeBytes();
  if (!free_bytes.has_value()) return SpaceHold(nullptr, 0);
  const int64_t memtables = UnflushedBytes();
  const int64_t need = min_free_bytes_ + held_bytes_ + static_cast<int64_t>(memtables) + bytes;
  if (*free_bytes < need) {
    LOG(ERROR) << "storage: " << what << " of " << bytes << " bytes refused: " << *free_bytes << " bytes free on "
               << path_ << ", " << min_free_bytes_ << " reserved, " << held_bytes_ << " held by writes under way, "
               << memtables << " in memtables to flush";
    return std::nullopt;
  }
  held_bytes_ += bytes;
  return SpaceHold(this, bytes);
}

absl::Status Database::ReclaimSpace(ColumnFamily cf, const std::string& begin, const std::string& end) {
  RETURN_IF_ERROR(CheckOpen());
#ifdef ABSL_HAVE_THREAD_SANITIZER
  // The flush and compaction run on RocksDB's own threads, whose hand-offs
  // ThreadSanitizer cannot see in Debian's uninstrumented librocksdb: it
  // reported libstdc++ and snappy copies inside them by the dozen. TSan
  // builds leave the space to a later compaction (docs/ARCHITECTURE.md,
  // "Sanitizer runs"); storage_test checks the reclaiming elsewhere.
  return absl::OkStatus();
#endif
  // The compaction flushes the memtable (counted by HoldSpace) and rewrites
  // at most the family's live files. On a disk without room for that it
  // would meet ENOSPC, and Debian's RocksDB 7.8 aborts on the write after a
  // failed WAL write (database.h, min_free_bytes): leave the space to a
  // later compaction instead.
  uint64_t sst = 0, blob = 0;
  db_->GetIntProperty(handle(cf), "rocksdb.live-sst-files-size", &sst);
  db_->GetIntProperty(handle(cf), "rocksdb.live-blob-file-size", &blob);
  const int64_t rewrite = static_cast<int64_t>(sst + blob);
  const std::optional<SpaceHold> hold = HoldSpace(rewrite, absl::StrCat("compaction of ", ColumnFamilyName(cf)));
  if (!hold.has_value()) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough free space to compact column family '",
                                                     ColumnFamilyName(cf), "' now (", rewrite, " bytes to rewrite)"));
  }
  rocksdb::CompactRangeOptions co;
  // Every blob file the compacted tables reference is rewritten without its
  // garbage (the default only collects the oldest quarter).
  co.blob_garbage_collection_policy = rocksdb::BlobGarbageCollectionPolicy::kForce;
  co.blob_garbage_collection_age_cutoff = 1.0;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Slice b(begin), e(end);
  return FromRocks(db_->CompactRange(co, handle(cf), &b, end.empty() ? nullptr : &e),
                   absl::StrCat("reclaim space in column family '", ColumnFamilyName(cf), "'"));
}

absl::Status Database::InitSchema() {
  ASSIGN_OR_RETURN(std::optional<std::string> stored, ReadValue(ColumnFamily::kMeta, keys::kSchemaVersion));
  if (!stored.has_value()) {
    // A new database (or one whose creation was interrupted before this write).
    rocksdb::WriteBatch wb;
    RETURN_IF_ERROR(
        AddToBatch(wb.Put(handle(ColumnFamily::kMeta), keys::kSchemaVersion, std::to_string(kSchemaVersion))));
    RETURN_IF_ERROR(Write(&wb));
    schema_version_ = kSchemaVersion;
    return absl::OkStatus();
  }
  int64_t version = 0;
  if (!absl::SimpleAtoi(*stored, &version) || version < 1) {
    return CorruptRecordError(ColumnFamily::kMeta, keys::kSchemaVersion,
                              absl::StrCat("schema version '", PrintableKey(*stored), "' is not a positive integer"));
  }
  if (version > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("database '", path_, "' has schema version ", version,
                                                      ", newer than the newest this build supports (", kSchemaVersion,
                                                      "); open it with a newer adapterd"));
  }
  if (version < kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("database '", path_, "' has schema version ", version,
                                                      " and no migration to ", kSchemaVersion, " exists"));
  }
  schema_version_ = version;
  return absl::OkStatus();
}

absl::Status Database::LoadQueueSeq() {
  // The persisted high-water mark keeps seqs increasing after the queue
  // drains; the last key is a cross-check (both are written in one batch).
  int64_t seq = 0;
  ASSIGN_OR_RETURN(std::optional<std::string> hwm, ReadValue(ColumnFamily::kMeta, keys::kQueueSeq));
  if (hwm.has_value() && (!absl::SimpleAtoi(*hwm, &seq) || seq < 0)) {
    return CorruptRecordError(ColumnFamily::kMeta, keys::kQueueSeq,
                              absl::StrCat("queue seq '", PrintableKey(*hwm), "' is not a non-negative integer"));
  }
  ASSIGN_OR_RETURN(std::optional<std::string> last, LastKey(ColumnFamily::kJobQueue, "", ""));
  if (last.has_value()) {
    std::optional<int64_t> n = keys::ParsePaddedNumber(*last);
    if (!n.has_value()) {
      return CorruptRecordError(ColumnFamily::kJobQueue, *last, "key is not a queue seq");
    }
    seq = std::max(seq, *n);
  }
  absl::MutexLock lock(&commit_mu_);
  queue_seq_ = seq;
  return absl::OkStatus();
}

absl::Status Database::Close() {
  if (db_ == nullptr) return absl::OkStatus();
  absl::Status status;
  if (!sync_writes_) {
    status.Update(FromRocks(db_->FlushWAL(/*sync=*/true), absl::StrCat("sync the WAL of database '", path_, "'")));
  }
  for (rocksdb::ColumnFamilyHandle*& h : handles_) {
    if (h != nullptr) db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    h = nullptr;
  }
  for (rocksdb::ColumnFamilyHandle* h : extra_handles_) {
    db_->DestroyColumnFamilyHandle(h).PermitUncheckedError();
  }
  extra_handles_.clear();
  status.Update(FromRocks(db_->Close(), absl::StrCat("close database '", path_, "'")));
  db_.reset();
  return status;
}

absl::Status Database::CheckOpen() const {
  if (db_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("database '", path_, "' is closed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Database::ReadValue(ColumnFamily cf, const std::string& key,
                                                               const rocksdb::Snapshot* snapshot,
                                                               bool verify_checksums) const {
  RETURN_IF_ERROR(CheckOpen());
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  ro.verify_checksums = verify_checksums;
  std::string value;
  rocksdb::Status s = db_->Get(ro, handle(cf), key, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  RETURN_IF_ERROR(
      FromRocks(s, absl::StrCat("read key '", PrintableKey(key), "' of column family '", ColumnFamilyName(cf), "'")));
  return std::optional<std::string>(std::move(value));
}

absl::StatusOr<bool> Database::ReadRecord(ColumnFamily cf, const std::string& key, google::protobuf::MessageLite* out,
                                          const rocksdb::Snapshot* snapshot) const {
  ASSIGN_OR_RETURN(std::optional<std::string> value, ReadValue(cf, key, snapshot));
  if (!value.has_value()) return false;
  RETURN_IF_ERROR(ParseRecord(cf, key, *value, out));
  return true;
}

absl::Status Database::Scan(ColumnFamily cf, const std::string& begin, const std::string& end, const ScanFn& fn,
                            const rocksdb::Snapshot* snapshot) const {
  RETURN_IF_ERROR(CheckOpen());
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot;
  rocksdb::Slice upper(end);
  if (!end.empty()) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handle(cf)));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    ASSIGN_OR_RETURN(bool more, fn(View(it->key()), View(it->value())));
    if (!more) return absl::OkStatus();
  }
  return FromRocks(it->status(),
                   absl::StrCat("scan column family '", ColumnFamilyName(cf), "' from '", PrintableKey(begin), "'"));
}

absl::StatusOr<std::optional<std::string>> Database::LastKey(ColumnFamily cf, const std::string& begin,
                                                             const std::string& end) const {
  RETURN_IF_ERROR(CheckOpen());
  rocksdb::ReadOptions ro;
  rocksdb::Slice lower(begin);
  rocksdb::Slice upper(end);
  if (!begin.empty()) ro.iterate_lower_bound = &lower;
  if (!end.empty()) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handle(cf)));
  it->SeekToLast();
  if (it->Valid()) return std::optional<std::string>(it->key().ToString());
  RETURN_IF_ERROR(
      FromRocks(it->status(), absl::StrCat("seek to the last key of column family '", ColumnFamilyName(cf), "'")));
  return std::optional<std::string>();
}

absl::StatusOr<std::string> Database::ListPage(ColumnFamily cf, const std::string& prefix, std::string_view page_token,
                                               int page_size, const ScanFn& take) const {
  if (page_size <= 0) page_size = kDefaultPageSize;
  page_size = std::min(page_size, kMaxPageSize);
  // Tokens are key suffixes; the scan is bounded by the prefix, so a forged
  // token can never reach another tenant's keys.
  if (page_token.size() > 2 * kMaxIdBytes + 1 || page_token.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError("invalid page_token");
  }
  std::string begin = prefix;
  if (!page_token.empty()) {
    begin.append(page_token);
    begin.push_back('\0');  // the first key after the token's
  }
  const int max_scanned = std::max(1000, 10 * page_size);
  int taken = 0;
  int scanned = 0;
  std::string last_key;
  bool more = false;
  RETURN_IF_ERROR(Scan(cf, begin, prefix.empty() ? std::string() : keys::PrefixEnd(prefix),
                       [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
                         if (taken == page_size || scanned == max_scanned) {
                           more = true;
                           return false;
                         }
                         ++scanned;
                         ASSIGN_OR_RETURN(bool take_it, take(key, value));
                         if (take_it) ++taken;
                         last_key.assign(key);
                         return true;
                       }));
  if (!more) return std::string();
  return last_key.substr(prefix.size());
}

absl::Status Database::Write(rocksdb::WriteBatch* batch, bool sync) {
  RETURN_IF_ERROR(CheckOpen());
  const std::string context = absl::StrCat("write to database '", path_, "'");
  const std::optional<SpaceHold> hold = HoldSpace(static_cast<int64_t>(batch->GetDataSize()), "write");
  if (!hold.has_value()) return DiskFullError();
  if (resume_needed_.load()) {
    // Clears RocksDB's background error if the cause is gone (space is
    // back); otherwise fails as the write would, and the next write retries.
    rocksdb::Status r = db_->Resume();
    if (r.IsBusy()) {
      // RocksDB's own recovery (it polls for free space) is under way.
      return absl::UnavailableError(
          "the server's storage is recovering from an earlier write error (disk full?); retry shortly");
    }
    if (!r.ok()) return FromRocks(r, context);
    resume_needed_ = false;
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_ && sync;
  // RocksDB commits concurrent writes as a group: one writer copies the
  // others' batches into its own and inserts them all, handed over through
  // RocksDB's lock-free write queue. ThreadSanitizer cannot see that queue
  // in Debian's uninstrumented librocksdb and reported the copy (made by
  // libstdc++ on RocksDB's behalf) as a race with the batch's owner. Only
  // TSan builds ignore the accesses of this call; elsewhere these are no-ops
  // (docs/ARCHITECTURE.md, "Sanitizer runs").
  ABSL_ANNOTATE_IGNORE_READS_AND_WRITES_BEGIN();
  rocksdb::Status s = db_->Write(wo, batch);
  ABSL_ANNOTATE_IGNORE_READS_AND_WRITES_END();
  if (s.IsIOError()) resume_needed_ = true;
  return FromRocks(s, context);
}

absl::Status Database::Flush() {
  RETURN_IF_ERROR(CheckOpen());
  std::vector<rocksdb::ColumnFamilyHandle*> all(handles_.begin(), handles_.end());
  return FromRocks(db_->Flush(rocksdb::FlushOptions(), all), absl::StrCat("flush database '", path_, "'"));
}

absl::StatusOr<Database::MemoryUsage> Database::Memory() const {
  RETURN_IF_ERROR(CheckOpen());
  MemoryUsage m;
  for (auto [property, out] : {std::pair{"rocksdb.cur-size-all-mem-tables", &m.memtables},
                               std::pair{"rocksdb.estimate-table-readers-mem", &m.table_readers},
                               std::pair{"rocksdb.block-cache-usage", &m.block_cache}}) {
    uint64_t v = 0;
    if (!db_->GetAggregatedIntProperty(property, &v)) {
      return absl::InternalError(absl::StrCat("RocksDB has no property ", property));
    }
    *out = static_cast<int64_t>(v);
  }
  return m;
}

absl::StatusOr<bool> Database::AddRawOp(const Batch::Op& any, rocksdb::WriteBatch& wb) const {
  if (const auto* op = std::get_if<Batch::RawPut>(&any)) {
    RETURN_IF_ERROR(AddToBatch(wb.Put(handle(op->cf), op->key, op->value)));
  } else if (const auto* op = std::get_if<Batch::RawDelete>(&any)) {
    RETURN_IF_ERROR(AddToBatch(wb.Delete(handle(op->cf), op->key)));
  } else if (const auto* op = std::get_if<Batch::RawDeleteRange>(&any)) {
    RETURN_IF_ERROR(AddToBatch(wb.DeleteRange(handle(op->cf), op->begin, op->end)));
  } else {
    return false;
  }
  return true;
}

absl::StatusOr<std::optional<TaskRecord>> Database::LoadTaskLocked(CommitState& st, const std::string& key) {
  auto it = st.tasks.find(key);
  if (it != st.tasks.end()) return it->second;
  TaskRecord rec;
  ASSIGN_OR_RETURN(bool found, ReadRecord(ColumnFamily::kTasks, key, &rec));
  if (!found) return std::optional<TaskRecord>();
  return std::optional<TaskRecord>(std::move(rec));
}

absl::StatusOr<int64_t> Database::NextEventSeqLocked(CommitState& st, const std::string& job_id) {
  auto pending = st.event_seqs.find(job_id);
  if (pending != st.event_seqs.end()) return ++pending->second;
  int64_t last = 0;
  auto cached = last_event_seq_.find(job_id);
  if (cached != last_event_seq_.end()) {
    last = cached->second;
  } else {
    const std::string prefix = keys::JobEventPrefix(job_id);
    ASSIGN_OR_RETURN(std::optional<std::string> key,
                     LastKey(ColumnFamily::kJobEvents, prefix, keys::PrefixEnd(prefix)));
    if (key.has_value()) {
      std::optional<int64_t> n = keys::ParsePaddedNumber(std::string_view(*key).substr(prefix.size()));
      if (!n.has_value()) {
        return CorruptRecordError(ColumnFamily::kJobEvents, *key, "key has no event seq");
      }
      last = *n;
    }
  }
  st.event_seqs[job_id] = last + 1;
  return last + 1;
}

absl::Status Database::Resolve(Batch& batch, CommitState& st, rocksdb::WriteBatch& wb) {
  for (Batch::Op& any : batch.ops_) {
    ASSIGN_OR_RETURN(bool raw, AddRawOp(any, wb));
    if (raw) continue;
    if (auto* op = std::get_if<Batch::TaskPut>(&any)) {
      RETURN_IF_ERROR(ResolveTaskPut(*op, st, wb));
    } else if (auto* op = std::get_if<Batch::TaskDelete>(&any)) {
      RETURN_IF_ERROR(ResolveTaskDelete(*op, st, wb));
    } else if (auto* op = std::get_if<Batch::JobCreate>(&any)) {
      RETURN_IF_ERROR(ResolveJobCreate(*op, st, wb));
    } else if (auto* op = std::get_if<Batch::EventAppend>(&any)) {
      RETURN_IF_ERROR(AppendEventLocked(op->job_id, op->event, st, wb).status());
    } else if (auto* op = std::get_if<Batch::EnqueueOp>(&any)) {
      RETURN_IF_ERROR(ResolveEnqueue(*op, st, wb));
    } else if (auto* op = std::get_if<Batch::PromoteOp>(&any)) {
      RETURN_IF_ERROR(ResolvePromote(*op, st, wb));
    }
  }
  return absl::OkStatus();
}

absl::Status Database::ResolveTaskPut(const Batch::TaskPut& op, CommitState& st, rocksdb::WriteBatch& wb) {
  const std::string key = keys::Task(op.task.tenant(), op.task.task_id());
  ASSIGN_OR_RETURN(std::optional<TaskRecord> stored, LoadTaskLocked(st, key));
  TaskRecord rec = op.task;
  rec.clear_versions();
  if (stored.has_value()) {
    rec.set_current_version(stored->current_version());
    rec.set_latest_version(stored->latest_version());
    rec.mutable_versions()->CopyFrom(stored->versions());
    rec.set_current_job_id(stored->current_job_id());
    rec.set_current_adapter_bytes(stored->current_adapter_bytes());
    if (stored->created_at_micros() != 0) rec.set_created_at_micros(stored->created_at_micros());
  } else {
    rec.set_current_version(0);
    rec.set_latest_version(0);
    rec.clear_current_job_id();
    rec.clear_current_adapter_bytes();
  }
  rec.set_state(rec.current_version() > 0 ? v1::TASK_STATE_READY : v1::TASK_STATE_PENDING);
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(rec, &value));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kTasks), key, value)));
  st.tasks[key] = std::move(rec);
  return absl::OkStatus();
}

absl::Status Database::ResolveTaskDelete(const Batch::TaskDelete& op, CommitState& st, rocksdb::WriteBatch& wb) {
  const std::string key = keys::Task(op.tenant, op.task_id);
  ASSIGN_OR_RETURN(std::optional<TaskRecord> stored, LoadTaskLocked(st, key));
  if (!stored.has_value()) return absl::NotFoundError(absl::StrCat("task '", key, "' not found"));
  const std::string prefix = keys::AdapterPrefix(op.tenant, op.task_id);
  RETURN_IF_ERROR(AddToBatch(wb.Delete(handle(ColumnFamily::kTasks), key)));
  // The range holds every version and its serving form.
  RETURN_IF_ERROR(AddToBatch(wb.DeleteRange(handle(ColumnFamily::kAdapters), prefix, keys::PrefixEnd(prefix))));
  st.tasks[key] = std::nullopt;
  st.adapters_deleted = true;
  return absl::OkStatus();
}

absl::Status Database::ResolveJobCreate(const Batch::JobCreate& op, CommitState& st, rocksdb::WriteBatch& wb) {
  const JobRecord& job = op.job;
  const std::string key = keys::Job(job.tenant(), job.job_id());
  ASSIGN_OR_RETURN(std::optional<std::string> existing, ReadValue(ColumnFamily::kJobs, key));
  if (existing.has_value() || st.created_jobs.contains(key)) {
    return absl::AlreadyExistsError(absl::StrCat("job '", key, "' already exists"));
  }
  if (!job.request_id().empty()) {
    const std::string rkey = keys::JobRequest(job.tenant(), job.request_id());
    ASSIGN_OR_RETURN(std::optional<std::string> owner, ReadValue(ColumnFamily::kJobRequests, rkey));
    if (owner.has_value() || st.created_requests.contains(rkey)) {
      return absl::AlreadyExistsError(absl::StrCat("tenant '", job.tenant(), "' already has job '",
                                                   owner.has_value() ? *owner : std::string("(in this batch)"),
                                                   "' for request_id '", job.request_id(), "'"));
    }
    RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kJobRequests), rkey, job.job_id())));
    st.created_requests.insert(rkey);
  }
  RETURN_IF_ERROR(PutJobLocked(job, wb));
  st.created_jobs.insert(key);
  return absl::OkStatus();
}

absl::Status Database::PutJobLocked(const JobRecord& job, rocksdb::WriteBatch& wb) {
  const std::string key = keys::Job(job.tenant(), job.job_id());
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(job, &value));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kJobs), key, value)));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Database::AppendEventLocked(const std::string& job_id, JobEvent event, CommitState& st,
                                                    rocksdb::WriteBatch& wb) {
  ASSIGN_OR_RETURN(int64_t seq, NextEventSeqLocked(st, job_id));
  event.set_seq(seq);
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(event, &value));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kJobEvents), keys::JobEvent(job_id, seq), value)));
  st.events.push_back(CommittedEvent{job_id, std::move(event)});
  return seq;
}

absl::Status Database::ResolveEnqueue(const Batch::EnqueueOp& op, CommitState& st, rocksdb::WriteBatch& wb) {
  QueueEntry entry = op.entry;
  entry.set_seq(++st.queue_seq);
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(entry, &value));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kJobQueue), keys::QueueEntry(entry.seq()), value)));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kMeta), keys::kQueueSeq, std::to_string(entry.seq()))));
  st.queue_entries.push_back(std::move(entry));
  return absl::OkStatus();
}

absl::Status Database::ResolvePromote(Batch::PromoteOp& op, CommitState& st, rocksdb::WriteBatch& wb) {
  Promotion& p = op.promotion;
  const std::string tenant = p.task.tenant();
  const std::string task_id = p.task.task_id();
  const std::string key = keys::Task(tenant, task_id);
  ASSIGN_OR_RETURN(std::optional<TaskRecord> stored, LoadTaskLocked(st, key));
  const int64_t version = (stored.has_value() ? stored->latest_version() : 0) + 1;
  if (p.expected_version != 0 && p.expected_version != version) {
    return absl::FailedPreconditionError(absl::StrCat("cannot promote version ", p.expected_version, " of task '", key,
                                                      "': its next version is ", version));
  }
  // The versions kept: the newest keep_versions, this one included.
  std::vector<int64_t> kept;
  if (stored.has_value()) kept.assign(stored->versions().begin(), stored->versions().end());
  kept.push_back(version);
  PromotionResult result;
  result.tenant = tenant;
  result.task_id = task_id;
  result.version = version;
  while (kept.size() > static_cast<size_t>(p.keep_versions)) {
    result.removed_versions.push_back(kept.front());
    kept.erase(kept.begin());
  }

  TaskRecord rec = std::move(p.task);
  if (stored.has_value() && stored->created_at_micros() != 0) rec.set_created_at_micros(stored->created_at_micros());
  rec.set_current_version(version);
  rec.set_current_adapter_bytes(static_cast<int64_t>(p.adapter_bytes.size()));
  rec.set_latest_version(version);
  rec.clear_versions();
  for (int64_t v : kept) rec.add_versions(v);
  rec.set_state(v1::TASK_STATE_READY);

  RETURN_IF_ERROR(
      AddToBatch(wb.Put(handle(ColumnFamily::kAdapters), keys::Adapter(tenant, task_id, version), p.adapter_bytes)));
  // No serving form can exist for the new version (PutServingForm checks
  // the version is listed); deleting one anyway costs a tombstone.
  RETURN_IF_ERROR(
      AddToBatch(wb.Delete(handle(ColumnFamily::kAdapters), keys::AdapterServingForm(tenant, task_id, version))));
  for (int64_t v : result.removed_versions) {
    RETURN_IF_ERROR(AddToBatch(wb.Delete(handle(ColumnFamily::kAdapters), keys::Adapter(tenant, task_id, v))));
    RETURN_IF_ERROR(
        AddToBatch(wb.Delete(handle(ColumnFamily::kAdapters), keys::AdapterServingForm(tenant, task_id, v))));
    st.adapters_deleted = true;
  }
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(rec, &value));
  RETURN_IF_ERROR(AddToBatch(wb.Put(handle(ColumnFamily::kTasks), key, value)));
  st.tasks[key] = std::move(rec);
  st.promotions.push_back(std::move(result));
  return absl::OkStatus();
}

absl::Status Database::Commit(Batch& batch) {
  RETURN_IF_ERROR(CheckOpen());
  if (batch.committed_) return absl::FailedPreconditionError("the batch was already committed");
  if (batch.ops_.empty()) {
    batch.committed_ = true;
    return absl::OkStatus();
  }
  rocksdb::WriteBatch wb;
  if (!batch.needs_lock_) {
    // Blind writes of checkpoints, dataset chunks and queue removals read
    // nothing and race with nothing, so they do not wait for the commit lock.
    for (const Batch::Op& op : batch.ops_) RETURN_IF_ERROR(AddRawOp(op, wb).status());
    RETURN_IF_ERROR(Write(&wb));
    batch.committed_ = true;
    return absl::OkStatus();
  }
  absl::MutexLock lock(&commit_mu_);
  CommitState st;
  st.queue_seq = queue_seq_;
  RETURN_IF_ERROR(Resolve(batch, st, wb));
  // Before the write: a serving form made from bytes read before this
  // commit must not be stored after it, even if the write fails.
  if (st.adapters_deleted) ++adapter_deletions_;
  RETURN_IF_ERROR(Write(&wb));
  for (const auto& [job_id, seq] : st.event_seqs) last_event_seq_[job_id] = seq;
  queue_seq_ = st.queue_seq;
  batch.committed_events_ = std::move(st.events);
  batch.committed_queue_entries_ = std::move(st.queue_entries);
  batch.committed_promotions_ = std::move(st.promotions);
  batch.committed_ = true;
  return absl::OkStatus();
}

absl::StatusOr<PromotionResult> Database::PromoteAdapterVersion(Promotion promotion) {
  Batch batch;
  RETURN_IF_ERROR(batch.Promote(std::move(promotion)));
  RETURN_IF_ERROR(Commit(batch));
  return batch.committed_promotions().front();
}

}  // namespace adapterd::storage
