#include "storage/batch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/keys.h"
#include "storage/record_codec.h"

namespace adapterd::storage {

using v1::CheckpointRecord;
using v1::JobEvent;
using v1::JobRecord;
using v1::TaskRecord;

const char* ColumnFamilyName(ColumnFamily cf) {
  switch (cf) {
    case ColumnFamily::kTasks:
      return "tasks";
    case ColumnFamily::kAdapters:
      return "adapters";
    case ColumnFamily::kJobs:
      return "jobs";
    case ColumnFamily::kJobRequests:
      return "job_requests";
    case ColumnFamily::kJobQueue:
      return "job_queue";
    case ColumnFamily::kJobEvents:
      return "job_events";
    case ColumnFamily::kDatasets:
      return "datasets";
    case ColumnFamily::kCheckpoints:
      return "checkpoints";
    case ColumnFamily::kMeta:
      return "meta";
  }
  return "?";
}

namespace {

absl::Status ValidateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateId("job_id", job.job_id()));
  RETURN_IF_ERROR(ValidateId("tenant", job.tenant()));
  RETURN_IF_ERROR(ValidateId("task_id", job.task_id()));
  if (!job.request_id().empty()) RETURN_IF_ERROR(ValidateId("request_id", job.request_id()));
  if (job.state() == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat("job '", job.job_id(), "' has no state"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Batch::PutTask(const TaskRecord& task) {
  RETURN_IF_ERROR(ValidateId("tenant", task.tenant()));
  RETURN_IF_ERROR(ValidateId("task_id", task.task_id()));
  AddResolved(TaskPut{task});
  return absl::OkStatus();
}

absl::Status Batch::DeleteTask(std::string_view tenant, std::string_view task_id) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("task_id", task_id));
  AddResolved(TaskDelete{std::string(tenant), std::string(task_id)});
  return absl::OkStatus();
}

absl::Status Batch::CreateJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  AddResolved(JobCreate{job});
  return absl::OkStatus();
}

absl::Status Batch::PutJob(const JobRecord& job) {
  RETURN_IF_ERROR(ValidateJob(job));
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(job, &value));
  AddResolved(RawPut{ColumnFamily::kJobs, keys::Job(job.tenant(), job.job_id()), std::move(value)});
  return absl::OkStatus();
}

absl::Status Batch::AppendEvent(std::string_view job_id, const JobEvent& event) {
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  AddResolved(EventAppend{std::string(job_id), event});
  return absl::OkStatus();
}

absl::Status Batch::Enqueue(std::string_view tenant, std::string_view job_id, int64_t enqueued_at_micros) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  v1::QueueEntry entry;
  entry.set_tenant(std::string(tenant));
  entry.set_job_id(std::string(job_id));
  entry.set_enqueued_at_micros(enqueued_at_micros);
  AddResolved(EnqueueOp{std::move(entry)});
  return absl::OkStatus();
}

absl::Status Batch::Dequeue(int64_t queue_seq) {
  if (queue_seq <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid queue seq ", queue_seq));
  }
  AddRaw(RawDelete{ColumnFamily::kJobQueue, keys::QueueEntry(queue_seq)});
  return absl::OkStatus();
}

absl::Status Batch::PutCheckpoint(const CheckpointRecord& checkpoint) {
  RETURN_IF_ERROR(ValidateId("job_id", checkpoint.job_id()));
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(checkpoint, &value));
  AddRaw(RawPut{ColumnFamily::kCheckpoints, keys::Checkpoint(checkpoint.job_id()), std::move(value)});
  return absl::OkStatus();
}

absl::Status Batch::DeleteCheckpoint(std::string_view job_id) {
  RETURN_IF_ERROR(ValidateId("job_id", job_id));
  AddRaw(RawDelete{ColumnFamily::kCheckpoints, keys::Checkpoint(job_id)});
  return absl::OkStatus();
}

absl::Status Batch::PutDatasetRecord(const v1::DatasetRecord& record) {
  RETURN_IF_ERROR(ValidateId("tenant", record.tenant()));
  RETURN_IF_ERROR(ValidateId("dataset_id", record.dataset_id()));
  if (record.num_chunks() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("invalid num_chunks ", record.num_chunks()));
  }
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(record, &value));
  AddRaw(RawPut{ColumnFamily::kDatasets, keys::DatasetMeta(record.tenant(), record.dataset_id()), std::move(value)});
  return absl::OkStatus();
}

absl::Status Batch::PutDatasetChunk(std::string_view tenant, std::string_view dataset_id, int64_t index,
                                    const v1::DatasetChunk& chunk) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("dataset_id", dataset_id));
  if (index < 0) return absl::InvalidArgumentError(absl::StrCat("invalid chunk index ", index));
  std::string value;
  RETURN_IF_ERROR(SerializeRecord(chunk, &value));
  AddRaw(RawPut{ColumnFamily::kDatasets, keys::DatasetChunk(tenant, dataset_id, index), std::move(value)});
  return absl::OkStatus();
}

absl::Status Batch::DeleteDataset(std::string_view tenant, std::string_view dataset_id) {
  RETURN_IF_ERROR(DeleteDatasetChunks(tenant, dataset_id));
  AddRaw(RawDelete{ColumnFamily::kDatasets, keys::DatasetMeta(tenant, dataset_id)});
  return absl::OkStatus();
}

absl::Status Batch::DeleteDatasetChunks(std::string_view tenant, std::string_view dataset_id) {
  RETURN_IF_ERROR(ValidateId("tenant", tenant));
  RETURN_IF_ERROR(ValidateId("dataset_id", dataset_id));
  const std::string prefix = keys::DatasetChunkPrefix(tenant, dataset_id);
  AddRaw(RawDeleteRange{ColumnFamily::kDatasets, prefix, keys::PrefixEnd(prefix)});
  return absl::OkStatus();
}

absl::Status Batch::Promote(Promotion p) {
  RETURN_IF_ERROR(ValidateId("tenant", p.task.tenant()));
  RETURN_IF_ERROR(ValidateId("task_id", p.task.task_id()));
  if (p.adapter_bytes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("promotion of task '", p.task.tenant(), "/", p.task.task_id(), "' has no adapter bytes"));
  }
  if (p.keep_versions < 1) {
    return absl::InvalidArgumentError(absl::StrCat("keep_versions must be >= 1, got ", p.keep_versions));
  }
  if (p.expected_version < 0) {
    return absl::InvalidArgumentError(absl::StrCat("expected_version must be >= 0, got ", p.expected_version));
  }
  AddResolved(PromoteOp{std::move(p)});
  return absl::OkStatus();
}

}  // namespace adapterd::storage
