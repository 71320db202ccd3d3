// JobStore: training jobs (`jobs`, `job_requests`), the durable FIFO of
// pending jobs (`job_queue`) and each job's append-only event log
// (`job_events`).
//
// Each method here commits on its own. To persist a state transition together
// with its event (and queue change) atomically, build a storage::Batch and
// Database::Commit it.
//
// Job ids must be unique across tenants (the server generates them): events
// and checkpoints are keyed by job_id alone. Job records, the request index
// and listings are per tenant.
//
// The store does not enforce the job state machine, nor serialise writers of
// one job: server/training's job manager, the only writer of job records,
// does both.
//
// Thread safety: thread-safe. Event seqs and queue seqs are assigned under the
// database's commit lock, so they are strictly increasing in commit order.
// Ownership: owned by its Database; get it with Database::jobs().
// Errors: see storage/database.h.
#ifndef ADAPTERD_STORAGE_JOB_STORE_H_
#define ADAPTERD_STORAGE_JOB_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/adapterd/storage/v1/records.pb.h"

namespace adapterd::storage {

class Database;

class JobStore {
 public:
  explicit JobStore(Database* db) : db_(db) {}

  // --- Jobs ---------------------------------------------------------------
  // Writes a new job. ALREADY_EXISTS if the job id exists or the tenant
  // already has a job with the same non-empty request_id (the message names
  // it; look it up with FindByRequestId to answer idempotently).
  absl::Status Create(const v1::JobRecord& job);
  // Overwrites a job record, blindly (last writer wins).
  absl::Status Put(const v1::JobRecord& job);
  // NOT_FOUND "job 'tenant/job_id' not found" (also for another tenant's job).
  absl::StatusOr<v1::JobRecord> Get(std::string_view tenant, std::string_view job_id) const;
  // The tenant's job created with `request_id`; NOT_FOUND if none.
  absl::StatusOr<v1::JobRecord> FindByRequestId(std::string_view tenant, std::string_view request_id) const;

  struct ListOptions {
    // Whose jobs; "" = every tenant's (for restart recovery).
    std::string tenant;
    // Only jobs in one of these states; empty = all states.
    std::vector<v1::JobState> states;
    // <= 0: kDefaultPageSize; capped at kMaxPageSize.
    int page_size = 0;
    // "" or a previous next_page_token.
    std::string page_token;
  };
  struct Page {
    std::vector<v1::JobRecord> jobs;
    // "" when there are no more jobs. A filtered listing can return a short
    // (even empty) page with a non-empty token; keep paging until it is "".
    std::string next_page_token;
  };
  // Jobs in (tenant, job_id) order. INVALID_ARGUMENT for a malformed token
  // or one from another tenant's listing.
  absl::StatusOr<Page> List(const ListOptions& options) const;

  // --- Queue ----------------------------------------------------------------
  // Appends the job to the FIFO; returns the entry with its seq.
  absl::StatusOr<v1::QueueEntry> Enqueue(std::string_view tenant, std::string_view job_id, int64_t enqueued_at_micros);
  // Removes an entry by seq; OK if absent.
  absl::Status Dequeue(int64_t queue_seq);
  // Every entry, oldest first (arrival order, kept across restarts).
  absl::StatusOr<std::vector<v1::QueueEntry>> ListQueue() const;

  // --- Events ---------------------------------------------------------------
  // Appends an event; returns its seq (the job's last seq + 1).
  absl::StatusOr<int64_t> AppendEvent(std::string_view job_id, const v1::JobEvent& event);
  // Events with seq >= from_seq in seq order, at most max_events (<= 0: all).
  absl::StatusOr<std::vector<v1::JobEvent>> ReadEvents(std::string_view job_id, int64_t from_seq,
                                                       int max_events = 0) const;
  // The seq of the job's last event; 0 if it has none.
  absl::StatusOr<int64_t> LastEventSeq(std::string_view job_id) const;

 private:
  Database* db_;
};

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_JOB_STORE_H_
