#include "storage/job_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/batch.h"
#include "storage/database.h"
#include "storage/keys.h"
#include "storage/record_codec.h"

namespace adapterd::storage {

using v1::JobEvent;
using v1::JobRecord;
using v1::QueueEntry;

namespace {

absl::Status CheckJobKey(const JobRecord& rec, std::string_view key) {
  if (keys::Job(rec.tenant(), rec.job_id()) != key) {
    return CorruptRecordError(ColumnFamily::kJobs, key,
                              absl::StrCat("the record names job '", rec.tenant(), "/", rec.job_id(), "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JobStore::Create(const JobRecord& job) {
  Batch batch;
  RETURN_IF_ERROR(batch.CreateJob(job));
  return db_->Commit(batch);
}

absl::Status JobStore::Put(const JobRecord& job) {
  Batch batch;
  RETURN_IF_ERROR(batch.PutJob(job));
  return db_->Commit(batch);
}

absl::StatusOr<JobRecord> JobStore::Get(std::string_view tenant, std::string_view job_id) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  const std::string key = keys::Job(tenant, job_id);
  JobRecord rec;
  ASSIGN_OR_RETURN(bool found, db_->ReadRecord(ColumnFamily::kJobs, key, &rec));
  if (!found) return absl::NotFoundError(absl::StrCat("job '", key, "' not found"));
  RETURN_IF_ERROR(CheckJobKey(rec, key));
  return rec;
}

absl::StatusOr<JobRecord> JobStore::FindByRequestId(std::string_view tenant, std::string_view request_id) const {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("request_id", request_id));
  const std::string rkey = keys::JobRequest(tenant, request_id);
  ASSIGN_OR_RETURN(std::optional<std::string> job_id, db_->ReadValue(ColumnFamily::kJobRequests, rkey));
  if (!job_id.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("tenant '", std::string(tenant), "' has no job for request_id '", std::string(request_id), "'"));
  }
  if (!ValidateId("job_id", *job_id).ok()) {
    return CorruptRecordError(ColumnFamily::kJobRequests, rkey, "the value is not a job id");
  }
  absl::StatusOr<JobRecord> job = Get(tenant, *job_id);
  if (absl::IsNotFound(job.status())) {
    return CorruptRecordError(ColumnFamily::kJobRequests, rkey,
                              absl::StrCat("names job '", *job_id, "', which does not exist"));
  }
  return job;
}

absl::StatusOr<JobStore::Page> JobStore::List(const ListOptions& options) const {
  if (!options.tenant.empty()) RETURN_IF_ERROR(ValidateId("tenant", options.tenant));
  const std::string prefix = options.tenant.empty() ? std::string() : keys::JobPrefix(options.tenant);
  Page page;
  ASSIGN_OR_RETURN(page.next_page_token,
                   db_->ListPage(ColumnFamily::kJobs, prefix, options.page_token, options.page_size,
                                 [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
                                   JobRecord rec;
                                   RETURN_IF_ERROR(ParseRecord(ColumnFamily::kJobs, key, value, &rec));
                                   RETURN_IF_ERROR(CheckJobKey(rec, key));
                                   if (!options.states.empty() &&
                                       std::find(options.states.begin(), options.states.end(), rec.state()) ==
                                           options.states.end()) {
                                     return false;
                                   }
                                   page.jobs.push_back(std::move(rec));
                                   return true;
                                 }));
  return page;
}

absl::StatusOr<QueueEntry> JobStore::Enqueue(std::string_view tenant, std::string_view job_id,
                                             int64_t enqueued_at_micros) {
  Batch batch;
  RETURN_IF_ERROR(batch.Enqueue(tenant, job_id, enqueued_at_micros));
  RETURN_IF_ERROR(db_->Commit(batch));
  return batch.committed_queue_entries().front();
}

absl::Status JobStore::Dequeue(int64_t queue_seq) {
  Batch batch;
  RETURN_IF_ERROR(batch.Dequeue(queue_seq));
  return db_->Commit(batch);
}

absl::StatusOr<std::vector<QueueEntry>> JobStore::ListQueue() const {
  std::vector<QueueEntry> entries;
  RETURN_IF_ERROR(db_->Scan(
      ColumnFamily::kJobQueue, "", "", [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
        QueueEntry entry;
        RETURN_IF_ERROR(ParseRecord(ColumnFamily::kJobQueue, key, value, &entry));
        if (keys::QueueEntry(entry.seq()) != key) {
          return CorruptRecordError(ColumnFamily::kJobQueue, key, absl::StrCat("the entry has seq ", entry.seq()));
        }
        entries.push_back(std::move(entry));
        return true;
      }));
  return entries;
}

absl::StatusOr<int64_t> JobStore::AppendEvent(std::string_view job_id, const JobEvent& event) {
  Batch batch;
  RETURN_IF_ERROR(batch.AppendEvent(job_id, event));
  RETURN_IF_ERROR(db_->Commit(batch));
  return batch.committed_events().front().event.seq();
}

absl::StatusOr<std::vector<JobEvent>> JobStore::ReadEvents(std::string_view job_id, int64_t from_seq,
                                                           int max_events) const {
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  const std::string prefix = keys::JobEventPrefix(job_id);
  std::vector<JobEvent> events;
  RETURN_IF_ERROR(db_->Scan(
      ColumnFamily::kJobEvents, keys::JobEvent(job_id, std::max<int64_t>(from_seq, 0)), keys::PrefixEnd(prefix),
      [&](std::string_view key, std::string_view value) -> absl::StatusOr<bool> {
        if (max_events > 0 && events.size() == static_cast<size_t>(max_events)) return false;
        JobEvent event;
        RETURN_IF_ERROR(ParseRecord(ColumnFamily::kJobEvents, key, value, &event));
        if (keys::JobEvent(job_id, event.seq()) != key) {
          return CorruptRecordError(ColumnFamily::kJobEvents, key, absl::StrCat("the event has seq ", event.seq()));
        }
        events.push_back(std::move(event));
        return true;
      }));
  return events;
}

absl::StatusOr<int64_t> JobStore::LastEventSeq(std::string_view job_id) const {
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  const std::string prefix = keys::JobEventPrefix(job_id);
  ASSIGN_OR_RETURN(std::optional<std::string> key,
                   db_->LastKey(ColumnFamily::kJobEvents, prefix, keys::PrefixEnd(prefix)));
  if (!key.has_value()) return 0;
  std::optional<int64_t> seq = keys::ParsePaddedNumber(std::string_view(*key).substr(prefix.size()));
  if (!seq.has_value()) {
    return CorruptRecordError(ColumnFamily::kJobEvents, *key, "key has no event seq");
  }
  return *seq;
}

}  // namespace adapterd::storage
