// adapterd's durable state: one RocksDB database with a column family per
// record kind (docs/ARCHITECTURE.md, "storage/"; key layout in storage/keys.h).
//
//   auto db = storage::Database::Open({.path = "/var/lib/adapterd/db"});
//   ASSIGN_OR_RETURN(TaskRecord t, (*db)->tasks().Get("acme", "sentiment"));
//
// Storage knows bytes and protos (proto/adapterd/storage/v1/records.proto), never
// tensors.
//
// Durability: with Options::sync_writes (the default) every write, and so
// every state change, is in the synced WAL when the call returns. Multi-record
// changes go through Commit(Batch) or PromoteAdapterVersion and are atomic:
// after a crash either all of a batch is visible or none of it.
//
// Thread safety: Database and its stores are thread-safe; reads see committed
// data. Commits that read stored state first or touch jobs (task puts and
// deletes, promotions, job creates/puts/updates, event and queue sequencing)
// are serialised by one commit lock; blind writes of checkpoints and dataset
// chunks are not. Close() and the destructor must not race with other calls.
//
// Ownership: the stores returned by tasks(), adapters(), ... are owned by the
// Database and live as long as it does.
//
// Errors (rocksdb::Status is mapped in one place, storage/rocks_status.h):
//   INVALID_ARGUMENT     empty ids, ids with '/', malformed records;
//   NOT_FOUND            a missing record, or a missing database with
//                        create_if_missing = false;
//   ALREADY_EXISTS       creating a job id or request id that exists;
//   FAILED_PRECONDITION  the database is locked by another process; its schema
//                        is newer than this build; a task has no ready version;
//                        a promotion's expected version moved on;
//                        the database is closed;
//   DATA_LOSS            a corrupt record (names the column family and key);
//   RESOURCE_EXHAUSTED   disk full;
//   UNAVAILABLE          RocksDB busy / shutting down;
//   INTERNAL             other I/O errors.
#ifndef ADAPTERD_STORAGE_DATABASE_H_
#define ADAPTERD_STORAGE_DATABASE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message_lite.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "storage/adapter_store.h"
#include "storage/batch.h"
#include "storage/checkpoint_store.h"
#include "storage/dataset_store.h"
#include "storage/job_store.h"
#include "storage/task_store.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class Snapshot;
class WriteBatch;
}  // namespace rocksdb

namespace adapterd::storage {

class Backups;

// The schema version this build writes and reads. A database with a newer
// version is refused (FAILED_PRECONDITION).
inline constexpr int64_t kSchemaVersion = 1;

// Memtable size of the blob families (values move to blob files at flush).
inline constexpr size_t kBlobFamilyWriteBufferBytes = 8 << 20;

class Database {
 public:
  struct Options {
    // Directory of the database. Required.
    std::string path;
    // Create the database (and missing parent directories) if it does not
    // exist; otherwise a missing database is NOT_FOUND.
    bool create_if_missing = true;
    // Sync the WAL on every write (fsync before returning). Turn off only for
    // tests and benchmarks: a crash may then lose the last writes (never half
    // of a batch).
    bool sync_writes = true;
    // Values of at least this many bytes in the adapters, checkpoints and
    // datasets column families go to blob files (RocksDB's integrated BlobDB).
    uint64_t min_blob_size = 4096;
    // Memtable size per column family; 0 = RocksDB's default (64 MiB), and
    // kBlobFamilyWriteBufferBytes for the blob families (adapters,
    // checkpoints, datasets). Small values make tests exercise flushes and
    // blob files.
    size_t write_buffer_size = 0;
    // Writes are refused (RESOURCE_EXHAUSTED "disk full") while the file
    // system holding `path` has less than this many bytes free beyond what
    // is about to be written: the write itself, the writes and space
    // reclaims already under way, and the memtables not yet flushed (their
    // flush writes about as many bytes again, while the WAL still holds
    // them). 0 = no check. The reserve keeps RocksDB's own writes (WAL,
    // flushes, compactions) from ever meeting a full disk: Debian's RocksDB
    // 7.8 aborts on an assertion when a write follows a failed WAL write
    // (fixed upstream in RocksDB PR 12448), and a full disk is what fails
    // WAL writes. Space freed lets writes through at once.
    int64_t min_free_bytes = 0;
    // Bytes free for this process on the file system of `path`; nullopt when
    // unknown (no check then). Null = statvfs(path). Tests set it to put the
    // reserve's arithmetic on a fixed number.
    std::function<std::optional<int64_t>()> free_bytes;
    // RocksDB environment (e.g. a fault-injecting file system in tests);
    // null = the default POSIX environment. Kept alive by the Database.
    std::shared_ptr<rocksdb::Env> env;
  };

  // Opens (or creates) the database: creates missing column families, writes
  // the schema version on creation and refuses a newer one, and removes the
  // chunks of dataset uploads that never committed (best effort: logged,
  // never fatal; storage/dataset_store.h). Fails with
  // FAILED_PRECONDITION "database '<path>' is locked by another process (lock
  // file <path>/LOCK)..." when another process (or another Database in this
  // process) has it open.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const Options& options);

  // Closes the database if Close() was not called.
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Syncs the WAL, releases the column families and the LOCK file. Later
  // calls on this object return FAILED_PRECONDITION. Idempotent.
  absl::Status Close();
  bool is_open() const { return db_ != nullptr; }

  const std::string& path() const { return path_; }
  // The schema version found (or written) at Open.
  int64_t schema_version() const { return schema_version_; }

  TaskStore& tasks() { return *tasks_; }
  AdapterStore& adapters() { return *adapters_; }
  JobStore& jobs() { return *jobs_; }
  DatasetStore& datasets() { return *datasets_; }
  CheckpointStore& checkpoints() { return *checkpoints_; }

  // Commits every change of `batch` atomically (one WriteBatch, synced WAL
  // when sync_writes). On success the batch's committed_*() results are set;
  // on error nothing was written. FAILED_PRECONDITION if the batch was already
  // committed.
  absl::Status Commit(Batch& batch);

  // One Promotion in its own batch (see storage/batch.h).
  absl::StatusOr<PromotionResult> PromoteAdapterVersion(Promotion promotion);

  // Flushes every memtable to SST and blob files. Not needed for durability
  // (the WAL is); useful before backups and in tests.
  absl::Status Flush();

  // Gives the space of deleted values in keys [begin, end) of `cf` back to
  // the file system now: compacts that range and garbage-collects every blob
  // file its tables reference ("" end = to the end of the family). Deletes
  // (and deleted blobs) otherwise wait for a compaction that may never come
  // on a family written rarely. Costs a rewrite of the range's live values.
  // RESOURCE_EXHAUSTED, doing nothing, while the disk lacks room for that
  // beyond min_free_bytes (the space then waits for a later compaction).
  absl::Status ReclaimSpace(ColumnFamily cf, const std::string& begin, const std::string& end);

  // Memory RocksDB holds for this database, in bytes, by RocksDB's own
  // accounting summed over every column family (for /metrics and the soak).
  struct MemoryUsage {
    int64_t memtables = 0;      // active and immutable (not yet flushed) memtables
    int64_t table_readers = 0;  // index and filter blocks of the open table files
    int64_t block_cache = 0;    // data blocks held in the families' block caches
  };
  // FAILED_PRECONDITION when the database is closed; INTERNAL if RocksDB
  // does not know a property (not expected of this RocksDB).
  absl::StatusOr<MemoryUsage> Memory() const;

 private:
  friend class TaskStore;
  friend class AdapterStore;
  friend class JobStore;
  friend class DatasetStore;
  friend class CheckpointStore;
  friend class Backups;

  // Per-Commit state of the resolved operations (defined in database.cc).
  struct CommitState;
  // Open's last step: takes the opened RocksDB and its handles (the default
  // family's first, then this build's families in ColumnFamily order, then
  // any others) and creates the stores.
  void Adopt(const Options& options, rocksdb::DB* raw, const std::vector<rocksdb::ColumnFamilyHandle*>& handles);
  // Called with the (key, value) of each entry in order; return false to stop.
  using ScanFn = std::function<absl::StatusOr<bool>(std::string_view key, std::string_view value)>;

  Database();

  absl::Status CheckOpen() const;
  // Bytes free for this process on the file system of `path_`
  // (Options::free_bytes); nullopt when unknown.
  std::optional<int64_t> FreeBytes() const;
  // Bytes of keys and values in the memtables not yet flushed (active and
  // immutable, every family): what their flush will write.
  int64_t UnflushedBytes() const;
  // Space counted as about to be written, from HoldSpace until destroyed.
  class SpaceHold {
   public:
    SpaceHold(Database* db, int64_t bytes) : db_(db), bytes_(bytes) {}
    SpaceHold(SpaceHold&& o) noexcept : db_(std::exchange(o.db_, nullptr)), bytes_(o.bytes_) {}
    SpaceHold& operator=(SpaceHold&&) = delete;
    ~SpaceHold();

   private:
    Database* db_;
    int64_t bytes_;
  };
  // Holds `bytes` for a write or a reclaim of `what` when the disk has room
  // for them beyond min_free_bytes, every other hold and the unflushed
  // memtables; nullopt (logged, nothing held) otherwise. Always holds when
  // min_free_bytes is 0 or the free space is unknown. The check and the hold
  // are one step, so concurrent writers cannot each count the same space.
  std::optional<SpaceHold> HoldSpace(int64_t bytes, std::string_view what) ABSL_LOCKS_EXCLUDED(space_mu_);
  rocksdb::ColumnFamilyHandle* handle(ColumnFamily cf) const { return handles_[static_cast<int>(cf)]; }
  // nullopt when the key does not exist. `verify_checksums` false skips
  // RocksDB's checksum verification of the blocks and blob read (only for
  // values that carry their own digest: serving forms).
  absl::StatusOr<std::optional<std::string>> ReadValue(ColumnFamily cf, const std::string& key,
                                                       const rocksdb::Snapshot* snapshot = nullptr,
                                                       bool verify_checksums = true) const;
  // false when the key does not exist; DATA_LOSS when the value does not parse.
  absl::StatusOr<bool> ReadRecord(ColumnFamily cf, const std::string& key, google::protobuf::MessageLite* out,
                                  const rocksdb::Snapshot* snapshot = nullptr) const;
  // Visits keys in [begin, end) ("" end = to the end of the column family).
  absl::Status Scan(ColumnFamily cf, const std::string& begin, const std::string& end, const ScanFn& fn,
                    const rocksdb::Snapshot* snapshot = nullptr) const;
  // The last key in [begin, end), or nullopt.
  absl::StatusOr<std::optional<std::string>> LastKey(ColumnFamily cf, const std::string& begin,
                                                     const std::string& end) const;
  // One page of the entries under `prefix` (paging as TaskStore::List):
  // `take` returns whether an entry goes on the page. Returns the next page
  // token ("" at the end). Scans a bounded number of entries, so a filtered
  // page may be short.
  absl::StatusOr<std::string> ListPage(ColumnFamily cf, const std::string& prefix, std::string_view page_token,
                                       int page_size, const ScanFn& take) const;
  // The one write path. A write that fails with an I/O error (a full disk)
  // leaves RocksDB read-only (its background error); the next Write first
  // asks RocksDB to Resume(), so writes work again as soon as space returns,
  // without a restart. Reads go on throughout. `sync` false logs the write
  // in the WAL without waiting for the disk (derived data only: a crash may
  // lose it, never half of it). Not past the WAL: a WAL-less write makes
  // closing the database flush its memtable.
  absl::Status Write(rocksdb::WriteBatch* batch, bool sync = true);

  absl::Status InitSchema();
  absl::Status LoadQueueSeq();
  // Adds a RawPut/RawDelete/RawDeleteRange to `wb`; false for other ops.
  absl::StatusOr<bool> AddRawOp(const Batch::Op& op, rocksdb::WriteBatch& wb) const;
  // Turns the batch's resolved operations into writes, checking each against
  // storage and the writes before it in the batch: one function per
  // operation below.
  absl::Status Resolve(Batch& batch, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::Status ResolveTaskPut(const Batch::TaskPut& op, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::Status ResolveTaskDelete(const Batch::TaskDelete& op, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::Status ResolveJobCreate(const Batch::JobCreate& op, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::Status ResolveEnqueue(const Batch::EnqueueOp& op, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::Status ResolvePromote(Batch::PromoteOp& op, CommitState& st, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // Writes `job` (its record only).
  absl::Status PutJobLocked(const v1::JobRecord& job, rocksdb::WriteBatch& wb)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // Writes `event` as job_id's next event; returns its seq.
  absl::StatusOr<int64_t> AppendEventLocked(const std::string& job_id, v1::JobEvent event, CommitState& st,
                                            rocksdb::WriteBatch& wb) ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::StatusOr<std::optional<v1::TaskRecord>> LoadTaskLocked(CommitState& st, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  absl::StatusOr<int64_t> NextEventSeqLocked(CommitState& st, const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);

  std::string path_;
  bool sync_writes_ = true;
  std::atomic<bool> resume_needed_{false};  // a write failed with an I/O error
  int64_t min_free_bytes_ = 0;
  std::function<std::optional<int64_t>()> free_bytes_;
  absl::Mutex space_mu_;
  int64_t held_bytes_ ABSL_GUARDED_BY(space_mu_) = 0;  // SpaceHolds alive
  int64_t schema_version_ = 0;
  std::shared_ptr<rocksdb::Env> env_;  // outlives db_
  std::unique_ptr<rocksdb::DB> db_;
  // handles_[cf] for our column families; extra_handles_ for families this
  // build does not know (opened because RocksDB requires all of them).
  std::array<rocksdb::ColumnFamilyHandle*, kNumColumnFamilies> handles_{};
  std::vector<rocksdb::ColumnFamilyHandle*> extra_handles_;

  // Serialises the commits that read stored state before writing (see the
  // header comment), and guards the sequence counters below.
  absl::Mutex commit_mu_;
  // Last committed queue seq.
  int64_t queue_seq_ ABSL_GUARDED_BY(commit_mu_) = 0;
  // Commits that deleted adapter versions (retention, task deletes), bumped
  // under commit_mu_: AdapterStore::PutServingForm refuses a serving form
  // made from bytes read before a deletion (they may be gone, or replaced
  // by a recreated task's version of the same number).
  std::atomic<uint64_t> adapter_deletions_{0};
  // Last committed event seq per job, loaded lazily from job_events (one
  // entry per job that got an event from this process).
  absl::flat_hash_map<std::string, int64_t> last_event_seq_ ABSL_GUARDED_BY(commit_mu_);

  std::unique_ptr<TaskStore> tasks_;
  std::unique_ptr<AdapterStore> adapters_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<DatasetStore> datasets_;
  std::unique_ptr<CheckpointStore> checkpoints_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_DATABASE_H_
