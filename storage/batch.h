// storage::Batch: several record changes committed atomically (one RocksDB
// WriteBatch, synced WAL) by Database::Commit.
//
// A Batch only describes changes; nothing is read or written until Commit.
// Operations that depend on stored state are resolved at commit time, under
// the database's commit lock, in the order they were added:
//   - PutTask keeps the stored version fields (only promotions change them);
//   - DeleteTask / CreateJob check existence (NOT_FOUND / ALREADY_EXISTS);
//   - AppendEvent assigns the job's next event seq, Enqueue the next queue seq;
//   - Promote assigns the task's next version and applies retention.
// If any check fails, Commit writes nothing and returns that error.
//
// Example (the queue persisting a transition together with its event):
//   storage::Batch b;
//   RETURN_IF_ERROR(b.PutJob(job));             // job.state() == RUNNING
//   RETURN_IF_ERROR(b.AppendEvent(job.job_id(), running_event));
//   RETURN_IF_ERROR(b.Dequeue(entry.seq()));
//   RETURN_IF_ERROR(db.Commit(b));
//   Publish(b.committed_events());              // seqs are now assigned
//
// Thread safety: thread-compatible (one thread builds and commits a Batch).
// A Batch can be committed once; its results are readable after that.
// Errors: the Add methods return INVALID_ARGUMENT for malformed ids/records.
#ifndef ADAPTERD_STORAGE_BATCH_H_
#define ADAPTERD_STORAGE_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace adapterd::storage {

// Column families of the database (see storage/keys.h for their keys).
enum class ColumnFamily : int {
  kTasks = 0,
  kAdapters,
  kJobs,
  kJobRequests,
  kJobQueue,
  kJobEvents,
  kDatasets,
  kCheckpoints,
  kMeta,
};
inline constexpr int kNumColumnFamilies = 9;
// "tasks", "adapters", "jobs", "job_requests", "job_queue", "job_events",
// "datasets", "checkpoints", "meta".
const char* ColumnFamilyName(ColumnFamily cf);

// Default number of adapter versions a task keeps (the current one included).
inline constexpr int kDefaultKeepVersions = 2;

// One atomic promotion of a new adapter version (docs/ARCHITECTURE.md,
// "storage/"): the adapter bytes of version N+1, the TaskRecord pointing at
// N+1, and versions older than the last `keep_versions` deleted. Storage
// knows nothing of the job that produced it: a caller that records one
// (training::JobManager::Complete) adds the job's update, its event and its
// checkpoint's removal to the same Batch, so all commit together or not at
// all.
struct Promotion {
  // The task's metadata for the new version: tenant, task_id, labels,
  // adapter_config, encoder_fingerprint, current_job_id, timestamps. Its
  // version fields and state are ignored and computed; created_at_micros of
  // an existing task is kept. The task is created if it does not exist.
  v1::TaskRecord task;
  // The adapter set's bytes (safetensors layout); must be non-empty.
  std::string adapter_bytes;
  // 0: promote whatever the next version is. Otherwise the version the caller
  // expects to create (e.g. written into the bytes' metadata); if the task's
  // next version differs, FAILED_PRECONDITION and nothing is written.
  int64_t expected_version = 0;
  // How many versions to keep, the new one included (>= 1).
  int keep_versions = kDefaultKeepVersions;
};

// What a committed Promotion did.
struct PromotionResult {
  std::string tenant;
  std::string task_id;
  // The version now current.
  int64_t version = 0;
  // Versions whose bytes retention deleted, ascending.
  std::vector<int64_t> removed_versions;
};

// A job event as committed, with its seq assigned.
struct CommittedEvent {
  std::string job_id;
  v1::JobEvent event;
};

class Batch {
 public:
  Batch() = default;
  Batch(Batch&&) = default;
  Batch& operator=(Batch&&) = default;
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Upserts a task's metadata. Version fields, current_job_id and state are
  // kept from the stored record (zero/PENDING for a new task), as is an
  // existing created_at_micros.
  absl::Status PutTask(const v1::TaskRecord& task);
  // Deletes a task and every adapter version it has. NOT_FOUND at commit if
  // the task does not exist.
  absl::Status DeleteTask(std::string_view tenant, std::string_view task_id);

  // Writes a new job (and its request_id index entry). ALREADY_EXISTS at
  // commit if the job id exists, or the tenant already has a job with this
  // request_id (the message names that job). state must be set.
  absl::Status CreateJob(const v1::JobRecord& job);
  // Overwrites (or creates) a job record, blindly. Does not touch the request
  // index: create jobs with CreateJob.
  absl::Status PutJob(const v1::JobRecord& job);
  // Appends an event to a job's log; its seq is assigned at commit (the
  // job's last seq + 1, in commit order).
  absl::Status AppendEvent(std::string_view job_id, const v1::JobEvent& event);

  // Adds a job to the end of the durable FIFO; the seq is assigned at commit.
  absl::Status Enqueue(std::string_view tenant, std::string_view job_id, int64_t enqueued_at_micros);
  // Removes a queue entry (no-op if absent).
  absl::Status Dequeue(int64_t queue_seq);

  absl::Status PutCheckpoint(const v1::CheckpointRecord& checkpoint);
  // No-op if absent.
  absl::Status DeleteCheckpoint(std::string_view job_id);

  // Dataset metadata (makes the dataset visible) and chunks; see
  // storage/dataset_store.h.
  absl::Status PutDatasetRecord(const v1::DatasetRecord& record);
  absl::Status PutDatasetChunk(std::string_view tenant, std::string_view dataset_id, int64_t index,
                               const v1::DatasetChunk& chunk);
  // Removes the record and every chunk (no-op for what is absent).
  absl::Status DeleteDataset(std::string_view tenant, std::string_view dataset_id);
  // Removes every chunk of a dataset id and leaves its record (if any).
  absl::Status DeleteDatasetChunks(std::string_view tenant, std::string_view dataset_id);

  // See Promotion. Validated here (ids, non-empty bytes, keep_versions >= 1,
  // the job's tenant/task); the version is assigned at commit.
  absl::Status Promote(Promotion promotion);

  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  bool committed() const { return committed_; }

  // After a successful Commit: what was assigned, in the order added.
  const std::vector<CommittedEvent>& committed_events() const { return committed_events_; }
  const std::vector<v1::QueueEntry>& committed_queue_entries() const { return committed_queue_entries_; }
  const std::vector<PromotionResult>& committed_promotions() const { return committed_promotions_; }

 private:
  friend class Database;

  struct RawPut {
    ColumnFamily cf;
    std::string key;
    std::string value;
  };
  struct RawDelete {
    ColumnFamily cf;
    std::string key;
  };
  struct RawDeleteRange {
    ColumnFamily cf;
    std::string begin;
    std::string end;
  };
  struct TaskPut {
    v1::TaskRecord task;
  };
  struct TaskDelete {
    std::string tenant;
    std::string task_id;
  };
  struct JobCreate {
    v1::JobRecord job;
  };
  struct EventAppend {
    std::string job_id;
    v1::JobEvent event;
  };
  struct EnqueueOp {
    v1::QueueEntry entry;
  };
  struct PromoteOp {
    Promotion promotion;
  };
  using Op = std::variant<RawPut, RawDelete, RawDeleteRange, TaskPut, TaskDelete, JobCreate, EventAppend, EnqueueOp,
                          PromoteOp>;

  // Operations that need neither commit-time resolution nor the commit lock.
  void AddRaw(Op op) { ops_.push_back(std::move(op)); }
  // Operations resolved (or at least written) under the commit lock.
  void AddResolved(Op op) {
    ops_.push_back(std::move(op));
    needs_lock_ = true;
  }

  std::vector<Op> ops_;
  bool needs_lock_ = false;
  bool committed_ = false;
  std::vector<CommittedEvent> committed_events_;
  std::vector<v1::QueueEntry> committed_queue_entries_;
  std::vector<PromotionResult> committed_promotions_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_BATCH_H_
