// Helper process for the storage tests (spawned, then SIGKILLed, by them).
//
//   storage_crash_child promote <db> <num_tasks> <keep_versions>
//       Opens the database, prints "ready", then promotes new versions of
//       tasks task0..task<n-1> (tenant "t") round-robin as fast as it can
//       with PromoteAdapterVersion; every fourth job first goes through the
//       queue's write path (create the job RUNNING with its event, write a
//       checkpoint). Never exits.
//   storage_crash_child hold <db>
//       Opens the database, prints "ready", and sleeps until killed.
//
// Any storage error is printed to stderr and exits with status 2.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "storage/database.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using v1::CheckpointRecord;
using v1::JobEvent;
using v1::JobRecord;
using v1::TaskRecord;

[[noreturn]] void Die(const absl::Status& s, const char* what) {
  std::fprintf(stderr, "crash_child: %s: %s\n", what, s.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) Die(s, what);
}

void Ready() {
  std::fputs("ready\n", stdout);
  std::fflush(stdout);
}

JobEvent StateEvent(v1::JobState from, v1::JobState to) {
  JobEvent e;
  e.mutable_state_change()->set_from(from);
  e.mutable_state_change()->set_to(to);
  return e;
}

int Promote(const std::string& path, int num_tasks, int keep) {
  Database::Options options;
  options.path = path;
  options.write_buffer_size = 256 << 10;  // frequent flushes: kills land mid-flush too
  auto db_or = Database::Open(options);
  if (!db_or.ok()) Die(db_or.status(), "open");
  Database& db = **db_or;
  Ready();
  for (uint64_t i = 0;; ++i) {
    const std::string task_id = absl::StrCat("task", i % static_cast<uint64_t>(num_tasks));
    int64_t latest = 0;
    auto task = db.tasks().Get("t", task_id);
    if (task.ok()) {
      latest = task->latest_version();
    } else if (!absl::IsNotFound(task.status())) {
      Die(task.status(), "get task");
    }
    const int64_t version = latest + 1;
    const std::string job_id = absl::StrCat("job-", task_id, "-", version);

    // A previous child may have been killed after creating this job. Only
    // every fourth job goes through create + event + checkpoint first, so
    // that most of the child's time (and so most kills) falls inside
    // promotions.
    const bool full_path = i % 4 == 0;
    auto existing = db.jobs().Get("t", job_id);
    JobRecord job;
    if (existing.ok()) {
      job = *existing;
    } else if (!full_path && absl::IsNotFound(existing.status())) {
      // The promotion's job is stored, as it always is when the job
      // manager promotes.
      job.set_job_id(job_id);
      job.set_tenant("t");
      job.set_task_id(task_id);
      job.set_state(v1::JOB_STATE_RUNNING);
      Check(db.jobs().Create(job), "create job");
    } else if (absl::IsNotFound(existing.status())) {
      job.set_job_id(job_id);
      job.set_tenant("t");
      job.set_task_id(task_id);
      job.set_request_id(job_id);
      job.set_state(v1::JOB_STATE_RUNNING);
      Batch batch;
      Check(batch.CreateJob(job), "batch create job");
      Check(batch.AppendEvent(job_id, StateEvent(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING)), "batch event");
      Check(db.Commit(batch), "create job");
    } else {
      Die(existing.status(), "get job");
    }

    if (full_path) {
      CheckpointRecord checkpoint;
      checkpoint.set_job_id(job_id);
      checkpoint.set_step(static_cast<int64_t>(i));
      checkpoint.set_adapter_bytes(testing::MakeAdapterBytes(task_id, version, 6000));
      Check(db.checkpoints().Put(checkpoint), "put checkpoint");
    }

    Promotion p;
    p.task.set_tenant("t");
    p.task.set_task_id(task_id);
    p.task.add_labels("neg");
    p.task.add_labels("pos");
    // 1 KiB .. 40 KiB: some values inline, most in blob files.
    p.adapter_bytes = testing::MakeAdapterBytes(task_id, version, 1024 + (i * 7919) % (39 * 1024));
    p.expected_version = version;
    p.keep_versions = keep;
    auto result =
        testing::PromoteJobVersion(db, std::move(p), job, StateEvent(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
    if (!result.ok()) Die(result.status(), "promote");
  }
}

int Hold(const std::string& path) {
  Database::Options options;
  options.path = path;
  auto db = Database::Open(options);
  if (!db.ok()) Die(db.status(), "open");
  Ready();
  for (;;) ::pause();
}

}  // namespace
}  // namespace adapterd::storage

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "promote" && argc == 5) {
    return adapterd::storage::Promote(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  }
  if (mode == "hold" && argc == 3) return adapterd::storage::Hold(argv[2]);
  std::fprintf(stderr, "usage: %s promote <db> <num_tasks> <keep> | hold <db>\n", argv[0]);
  return 64;
}
