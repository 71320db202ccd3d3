// Typed stores and Batch: round trips, reopen, paging, queue order, event
// sequencing, idempotency index, datasets, checkpoints, id validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "storage/database.h"
#include "tests/storage/storage_test_util.h"

namespace adapterd::storage {
namespace {

using ::adapterd::storage::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using v1::CheckpointRecord;
using v1::DatasetChunk;
using v1::DatasetRecord;
using v1::JobEvent;
using v1::JobRecord;
using v1::JobState;
using v1::QueueEntry;
using v1::TaskRecord;

Database::Options At(const std::string& path) {
  Database::Options o;
  o.path = path;
  return o;
}

JobRecord Job(const std::string& tenant, const std::string& id, JobState state = v1::JOB_STATE_QUEUED) {
  JobRecord j;
  j.set_tenant(tenant);
  j.set_job_id(id);
  j.set_task_id("task");
  j.set_state(state);
  return j;
}

JobEvent Warning(const std::string& text) {
  JobEvent e;
  e.mutable_warning()->set_message(text);
  return e;
}

TEST(TaskStore, PutGetListDeleteRoundTrip) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  TaskRecord t;
  t.set_tenant("acme");
  t.set_task_id("sentiment");
  t.add_labels("neg");
  t.add_labels("pos");
  t.mutable_adapter_config()->set_bottleneck_size(64);
  t.mutable_adapter_config()->set_activation("gelu");
  t.set_created_at_micros(1000);
  ASSERT_OK(db->tasks().Put(t));
  ASSERT_OK_AND_ASSIGN(TaskRecord got, db->tasks().Get("acme", "sentiment"));
  EXPECT_EQ(got.labels_size(), 2);
  EXPECT_EQ(got.adapter_config().bottleneck_size(), 64);
  EXPECT_EQ(got.current_version(), 0);
  EXPECT_EQ(got.state(), v1::TASK_STATE_PENDING);

  EXPECT_THAT(db->tasks().Get("acme", "nope"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/nope")));
  EXPECT_THAT(db->tasks().Get("other", "sentiment"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("other/sentiment")));

  ASSERT_OK_AND_ASSIGN(auto page, db->tasks().List("acme", 0, ""));
  ASSERT_EQ(page.tasks.size(), 1u);
  EXPECT_EQ(page.next_page_token, "");

  ASSERT_OK(db->tasks().Delete("acme", "sentiment"));
  EXPECT_THAT(db->tasks().Get("acme", "sentiment"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("sentiment")));
  EXPECT_THAT(db->tasks().Delete("acme", "sentiment"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/sentiment")));
}

TEST(TaskStore, PutCannotChangeVersionFieldsOrCreationTime) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  Promotion p;
  p.task.set_tenant("acme");
  p.task.set_task_id("x");
  p.task.set_created_at_micros(5);
  p.adapter_bytes = "v1";
  ASSERT_OK(db->PromoteAdapterVersion(p).status());

  TaskRecord t;
  t.set_tenant("acme");
  t.set_task_id("x");
  t.add_labels("a");
  t.set_current_version(99);
  t.set_latest_version(99);
  t.add_versions(99);
  t.set_created_at_micros(77);
  t.set_state(v1::TASK_STATE_PENDING);
  ASSERT_OK(db->tasks().Put(t));
  ASSERT_OK_AND_ASSIGN(TaskRecord got, db->tasks().Get("acme", "x"));
  EXPECT_THAT(got.labels(), ElementsAre("a"));
  EXPECT_EQ(got.current_version(), 1);
  EXPECT_EQ(got.latest_version(), 1);
  EXPECT_THAT(got.versions(), ElementsAre(1));
  EXPECT_EQ(got.created_at_micros(), 5);
  EXPECT_EQ(got.state(), v1::TASK_STATE_READY);
}

TEST(TaskStore, ListPagesInTaskIdOrder) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  for (int i = 0; i < 7; ++i) {
    TaskRecord t;
    t.set_tenant("acme");
    t.set_task_id(absl::StrCat("t", i));
    ASSERT_OK(db->tasks().Put(t));
  }
  TaskRecord other;
  other.set_tenant("acmf");  // sorts right after "acme/"
  other.set_task_id("t0");
  ASSERT_OK(db->tasks().Put(other));
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    ASSERT_OK_AND_ASSIGN(auto page, db->tasks().List("acme", 3, token));
    EXPECT_LE(page.tasks.size(), 3u);
    for (const auto& t : page.tasks) seen.push_back(t.task_id());
    token = page.next_page_token;
    ASSERT_LT(++pages, 10);
  } while (!token.empty());
  EXPECT_THAT(seen, ElementsAre("t0", "t1", "t2", "t3", "t4", "t5", "t6"));
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(db->tasks().List("acme", 3, std::string("x\0y", 3)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token")));
}

TEST(Stores, InvalidIdsAreRejectedEverywhere) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(db->tasks().Get("", "x"), StatusIs(kInvalid, HasSubstr("tenant")));
  EXPECT_THAT(db->tasks().Get("a/b", "x"), StatusIs(kInvalid, HasSubstr("tenant")));
  TaskRecord t;
  t.set_tenant("a");
  t.set_task_id("x/y");
  EXPECT_THAT(db->tasks().Put(t), StatusIs(kInvalid, HasSubstr("task_id")));
  EXPECT_THAT(db->jobs().Create(Job("a", "j/1")), StatusIs(kInvalid, HasSubstr("job_id")));
  JobRecord bad_request = Job("a", "j1");
  bad_request.set_request_id("r/1");
  EXPECT_THAT(db->jobs().Create(bad_request), StatusIs(kInvalid, HasSubstr("request_id")));
  EXPECT_THAT(db->jobs().Create(Job("a", "j1", v1::JOB_STATE_UNSPECIFIED)), StatusIs(kInvalid, HasSubstr("no state")));
  EXPECT_THAT(db->jobs().AppendEvent("", Warning("w")), StatusIs(kInvalid, HasSubstr("job_id")));
  EXPECT_THAT(db->jobs().Enqueue("a", "", 0), StatusIs(kInvalid, HasSubstr("job_id")));
  EXPECT_THAT(db->datasets().Get("a", std::string(300, 'd')), StatusIs(kInvalid, HasSubstr("dataset_id")));
  CheckpointRecord c;
  c.set_job_id("x/y");
  EXPECT_THAT(db->checkpoints().Put(c), StatusIs(kInvalid, HasSubstr("job_id")));
  EXPECT_THAT(db->adapters().Get("a", "x", 0), StatusIs(kInvalid, HasSubstr("version")));
  Promotion p;
  p.task.set_tenant("a");
  p.task.set_task_id("x");
  EXPECT_THAT(db->PromoteAdapterVersion(p), StatusIs(kInvalid, HasSubstr("no adapter bytes")));
  p.adapter_bytes = "b";
  p.keep_versions = 0;
  EXPECT_THAT(db->PromoteAdapterVersion(p), StatusIs(kInvalid, HasSubstr("keep_versions")));
}

TEST(JobStore, CreateGetPutRoundTrip) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  JobRecord j = Job("acme", "j1", v1::JOB_STATE_VALIDATING);
  j.mutable_hyperparameters()->set_learning_rate(3e-4);
  j.mutable_hyperparameters()->set_weight_decay(0.0);  // explicit zero survives
  j.add_dataset_ids("d1");
  ASSERT_OK(db->jobs().Create(j));
  EXPECT_THAT(db->jobs().Create(j), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("acme/j1")));
  ASSERT_OK_AND_ASSIGN(JobRecord got, db->jobs().Get("acme", "j1"));
  EXPECT_EQ(got.state(), v1::JOB_STATE_VALIDATING);
  EXPECT_TRUE(got.hyperparameters().has_weight_decay());
  EXPECT_FALSE(got.hyperparameters().has_epochs());
  got.set_state(v1::JOB_STATE_QUEUED);
  ASSERT_OK(db->jobs().Put(got));
  ASSERT_OK_AND_ASSIGN(got, db->jobs().Get("acme", "j1"));
  EXPECT_EQ(got.state(), v1::JOB_STATE_QUEUED);
  // Another tenant cannot see it.
  EXPECT_THAT(db->jobs().Get("evil", "j1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("evil/j1")));
}

TEST(JobStore, RequestIdIsUniquePerTenantAndFindsTheJob) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  JobRecord a = Job("acme", "j1");
  a.set_request_id("req-1");
  a.set_request_fingerprint("fp");
  ASSERT_OK(db->jobs().Create(a));
  JobRecord dup = Job("acme", "j2");
  dup.set_request_id("req-1");
  EXPECT_THAT(db->jobs().Create(dup),
              StatusIs(absl::StatusCode::kAlreadyExists, AllOf(HasSubstr("j1"), HasSubstr("req-1"))));
  EXPECT_THAT(db->jobs().Get("acme", "j2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("j2")));
  ASSERT_OK_AND_ASSIGN(JobRecord found, db->jobs().FindByRequestId("acme", "req-1"));
  EXPECT_EQ(found.job_id(), "j1");
  EXPECT_EQ(found.request_fingerprint(), "fp");
  EXPECT_THAT(db->jobs().FindByRequestId("acme", "req-2"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("req-2")));
  // The same request id in another tenant is a different request.
  JobRecord other = Job("globex", "j3");
  other.set_request_id("req-1");
  ASSERT_OK(db->jobs().Create(other));
  ASSERT_OK_AND_ASSIGN(found, db->jobs().FindByRequestId("globex", "req-1"));
  EXPECT_EQ(found.job_id(), "j3");
  // Two creates with one request id in one batch: the second fails, nothing is written.
  Batch b;
  JobRecord x = Job("acme", "j4");
  x.set_request_id("req-4");
  JobRecord y = Job("acme", "j5");
  y.set_request_id("req-4");
  ASSERT_OK(b.CreateJob(x));
  ASSERT_OK(b.CreateJob(y));
  EXPECT_THAT(db->Commit(b), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("req-4")));
  EXPECT_THAT(db->jobs().Get("acme", "j4"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("j4")));
}

TEST(JobStore, ListPagesWithStateFilterAndAcrossTenants) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  const JobState kStates[] = {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED,
                              v1::JOB_STATE_FAILED};
  std::set<std::string> want_active;
  for (int i = 0; i < 25; ++i) {
    JobState s = kStates[i % 4];
    std::string id = absl::StrCat("j", i < 10 ? "0" : "", i);
    ASSERT_OK(db->jobs().Create(Job("a", id, s)));
    if (s == v1::JOB_STATE_QUEUED || s == v1::JOB_STATE_RUNNING) {
      want_active.insert(id);
    }
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(db->jobs().Create(Job("b", absl::StrCat("k", i), v1::JOB_STATE_QUEUED)));
  }

  JobStore::ListOptions opts;
  opts.tenant = "a";
  opts.states = {v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING};
  opts.page_size = 4;
  std::vector<std::string> got;
  int pages = 0;
  do {
    ASSERT_OK_AND_ASSIGN(auto page, db->jobs().List(opts));
    EXPECT_LE(page.jobs.size(), 4u);
    for (const auto& j : page.jobs) {
      EXPECT_EQ(j.tenant(), "a");
      got.push_back(j.job_id());
    }
    opts.page_token = page.next_page_token;
    ASSERT_LT(++pages, 20);
  } while (!opts.page_token.empty());
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want_active);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(got.size(), want_active.size());  // no duplicates across pages

  // Every tenant, no filter (restart recovery's view).
  JobStore::ListOptions all;
  all.page_size = 7;
  int total = 0;
  std::string last;
  do {
    ASSERT_OK_AND_ASSIGN(auto page, db->jobs().List(all));
    for (const auto& j : page.jobs) {
      std::string key = j.tenant() + "/" + j.job_id();
      EXPECT_LT(last, key);
      last = key;
      ++total;
    }
    all.page_token = page.next_page_token;
  } while (!all.page_token.empty());
  EXPECT_EQ(total, 30);
}

TEST(JobStore, QueueIsFifoAndKeepsOrderAndSeqsAcrossReopen) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  std::vector<int64_t> seqs;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    for (int i = 0; i < 5; ++i) {
      ASSERT_OK_AND_ASSIGN(QueueEntry e, db->jobs().Enqueue(i % 2 ? "b" : "a", absl::StrCat("j", i), 100 + i));
      EXPECT_EQ(e.job_id(), absl::StrCat("j", i));
      seqs.push_back(e.seq());
    }
    EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
    ASSERT_OK(db->jobs().Dequeue(seqs[1]));
  }
  int64_t max_seq = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    ASSERT_OK_AND_ASSIGN(auto queue, db->jobs().ListQueue());
    std::vector<std::string> ids;
    for (const auto& e : queue) ids.push_back(e.job_id());
    EXPECT_THAT(ids, ElementsAre("j0", "j2", "j3", "j4"));
    EXPECT_EQ(queue[1].tenant(), "a");
    EXPECT_EQ(queue[1].enqueued_at_micros(), 102);
    ASSERT_OK_AND_ASSIGN(QueueEntry e, db->jobs().Enqueue("a", "j5", 0));
    EXPECT_GT(e.seq(), seqs.back());
    max_seq = e.seq();
    // Drain the queue entirely.
    ASSERT_OK_AND_ASSIGN(queue, db->jobs().ListQueue());
    for (const auto& q : queue) ASSERT_OK(db->jobs().Dequeue(q.seq()));
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK_AND_ASSIGN(auto queue, db->jobs().ListQueue());
  EXPECT_TRUE(queue.empty());
  // Seqs are never reused, even after the queue drained and the process restarted.
  ASSERT_OK_AND_ASSIGN(QueueEntry e, db->jobs().Enqueue("a", "j6", 0));
  EXPECT_GT(e.seq(), max_seq);
}

TEST(JobStore, EventSeqsAreMonotonicAcrossReopenAndReadFromSeq) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    EXPECT_EQ(db->jobs().LastEventSeq("j1").value_or(-1), 0);
    for (int i = 1; i <= 3; ++i) {
      JobEvent e = Warning(absl::StrCat("w", i));
      e.set_seq(1000);  // ignored: storage assigns seqs
      ASSERT_OK_AND_ASSIGN(int64_t seq, db->jobs().AppendEvent("j1", e));
      EXPECT_EQ(seq, i);
    }
    ASSERT_OK_AND_ASSIGN(int64_t other, db->jobs().AppendEvent("j10", Warning("x")));
    EXPECT_EQ(other, 1);  // "j10" shares a prefix with "j1" but not a log
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  EXPECT_EQ(db->jobs().LastEventSeq("j1").value_or(-1), 3);
  ASSERT_OK_AND_ASSIGN(int64_t seq, db->jobs().AppendEvent("j1", Warning("w4")));
  EXPECT_EQ(seq, 4);
  ASSERT_OK_AND_ASSIGN(auto events, db->jobs().ReadEvents("j1", 2));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].seq(), 2);
  EXPECT_EQ(events[0].warning().message(), "w2");
  EXPECT_EQ(events[2].seq(), 4);
  ASSERT_OK_AND_ASSIGN(events, db->jobs().ReadEvents("j1", 0, 2));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].seq(), 2);
  ASSERT_OK_AND_ASSIGN(events, db->jobs().ReadEvents("nobody", 1));
  EXPECT_TRUE(events.empty());
}

TEST(JobStore, ConcurrentAppendsGetDistinctContiguousSeqs) {
  TempDir dir;
  Database::Options o = At(dir.Sub("db"));
  o.sync_writes = false;  // the sequencing is the point here, not fsync
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
  constexpr int kThreads = 4;
  constexpr int kEach = 50;
  std::vector<std::vector<int64_t>> seqs(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        auto seq = db->jobs().AppendEvent("job", Warning(absl::StrCat(t, ":", i)));
        if (seq.ok()) seqs[t].push_back(*seq);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<int64_t> all;
  for (const auto& s : seqs) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));  // per-thread order is commit order
    all.insert(all.end(), s.begin(), s.end());
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kEach));
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], static_cast<int64_t>(i + 1));
  ASSERT_OK_AND_ASSIGN(auto events, db->jobs().ReadEvents("job", 1));
  EXPECT_EQ(events.size(), all.size());
}

TEST(Batch, TransitionEventAndDequeueCommitTogetherOrNotAtAll) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  JobRecord job = Job("acme", "j1", v1::JOB_STATE_QUEUED);
  ASSERT_OK(db->jobs().Create(job));
  ASSERT_OK_AND_ASSIGN(QueueEntry entry, db->jobs().Enqueue("acme", "j1", 0));

  // A failing batch (its CreateJob collides) writes none of its changes.
  Batch bad;
  job.set_state(v1::JOB_STATE_RUNNING);
  ASSERT_OK(bad.PutJob(job));
  ASSERT_OK(bad.AppendEvent("j1", Warning("x")));
  ASSERT_OK(bad.Dequeue(entry.seq()));
  ASSERT_OK(bad.CreateJob(Job("acme", "j1")));
  EXPECT_THAT(db->Commit(bad), StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("acme/j1")));
  EXPECT_FALSE(bad.committed());
  ASSERT_OK_AND_ASSIGN(JobRecord stored, db->jobs().Get("acme", "j1"));
  EXPECT_EQ(stored.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(db->jobs().LastEventSeq("j1").value_or(-1), 0);
  ASSERT_OK_AND_ASSIGN(auto queue, db->jobs().ListQueue());
  EXPECT_EQ(queue.size(), 1u);

  Batch good;
  ASSERT_OK(good.PutJob(job));
  JobEvent running;
  running.mutable_state_change()->set_from(v1::JOB_STATE_QUEUED);
  running.mutable_state_change()->set_to(v1::JOB_STATE_RUNNING);
  ASSERT_OK(good.AppendEvent("j1", running));
  ASSERT_OK(good.Dequeue(entry.seq()));
  ASSERT_OK(db->Commit(good));
  ASSERT_EQ(good.committed_events().size(), 1u);
  EXPECT_EQ(good.committed_events()[0].job_id, "j1");
  EXPECT_EQ(good.committed_events()[0].event.seq(), 1);  // the failed batch consumed no seq
  ASSERT_OK_AND_ASSIGN(stored, db->jobs().Get("acme", "j1"));
  EXPECT_EQ(stored.state(), v1::JOB_STATE_RUNNING);
  ASSERT_OK_AND_ASSIGN(queue, db->jobs().ListQueue());
  EXPECT_TRUE(queue.empty());
  EXPECT_THAT(db->Commit(good), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already")));
}

TEST(DatasetStore, ManyChunksRoundTripThroughBlobFilesAndReopen) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  constexpr int kChunks = 300;
  constexpr int kPerChunk = 20;
  auto text = [](int c, int e) {
    return absl::StrCat("chunk ", c, " example ", e, " ", std::string(static_cast<size_t>(e * 13), 'w'));
  };
  {
    Database::Options o = At(path);
    o.write_buffer_size = 256 << 10;  // several flushes; chunks land in blob files
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(o));
    DatasetRecord rec;
    rec.set_tenant("acme");
    rec.set_dataset_id("train");
    for (int c = 0; c < kChunks; ++c) {
      DatasetChunk chunk;
      for (int e = 0; e < kPerChunk; ++e) {
        auto* ex = chunk.add_examples();
        ex->set_text(text(c, e));
        ex->set_label(e % 2 ? "pos" : "neg");
        if (e % 3 == 0) ex->set_text_pair("pair");
      }
      ASSERT_OK(db->datasets().PutChunk("acme", "train", c, chunk));
    }
    // Not visible until its record is written.
    EXPECT_THAT(db->datasets().Get("acme", "train"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("acme/train")));
    rec.set_num_chunks(kChunks);
    rec.set_num_examples(kChunks * kPerChunk);
    rec.add_labels("neg");
    rec.add_labels("pos");
    (*rec.mutable_label_counts())["neg"] = kChunks * kPerChunk / 2;
    ASSERT_OK(db->datasets().PutRecord(rec));
    ASSERT_OK(db->Flush());
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK_AND_ASSIGN(DatasetRecord rec, db->datasets().Get("acme", "train"));
  EXPECT_EQ(rec.num_examples(), kChunks * kPerChunk);
  EXPECT_EQ(rec.label_counts().at("neg"), kChunks * kPerChunk / 2);
  int64_t expected = 0;
  ASSERT_OK(db->datasets().ForEachChunk("acme", "train", [&](int64_t index, const DatasetChunk& chunk) -> absl::Status {
    EXPECT_EQ(index, expected++);
    EXPECT_EQ(chunk.examples_size(), kPerChunk);
    for (int e = 0; e < chunk.examples_size(); ++e) {
      EXPECT_EQ(chunk.examples(e).text(), text(static_cast<int>(index), e));
    }
    return absl::OkStatus();
  }));
  EXPECT_EQ(expected, kChunks);
  ASSERT_OK_AND_ASSIGN(DatasetChunk c7, db->datasets().GetChunk("acme", "train", 7));
  EXPECT_EQ(c7.examples(3).text(), text(7, 3));
  EXPECT_EQ(c7.examples(3).text_pair(), "pair");
  // fn's error stops the iteration and is returned.
  int calls = 0;
  EXPECT_THAT(db->datasets().ForEachChunk("acme", "train",
                                          [&](int64_t, const DatasetChunk&) -> absl::Status {
                                            return ++calls == 3 ? absl::CancelledError("stop") : absl::OkStatus();
                                          }),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("stop")));
  EXPECT_EQ(calls, 3);

  ASSERT_OK_AND_ASSIGN(auto page, db->datasets().List("acme", 10, ""));
  ASSERT_EQ(page.datasets.size(), 1u);
  EXPECT_EQ(page.datasets[0].dataset_id(), "train");

  ASSERT_OK(db->datasets().Delete("acme", "train"));
  EXPECT_THAT(db->datasets().Get("acme", "train"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("train")));
  EXPECT_THAT(db->datasets().GetChunk("acme", "train", 0), StatusIs(absl::StatusCode::kNotFound, HasSubstr("chunk 0")));
  EXPECT_THAT(db->datasets().Delete("acme", "train"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("train")));
}

TEST(DatasetStore, AtomicPutAndMissingChunkIsDataLoss) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  DatasetRecord rec;
  rec.set_tenant("acme");
  rec.set_dataset_id("small");
  rec.set_num_chunks(3);
  std::vector<DatasetChunk> chunks(2);
  chunks[0].add_examples()->set_text("a");
  chunks[1].add_examples()->set_text("b");
  EXPECT_THAT(db->datasets().Put(rec, chunks), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("3 chunks")));
  rec.set_num_chunks(2);
  ASSERT_OK(db->datasets().Put(rec, chunks));
  int n = 0;
  ASSERT_OK(db->datasets().ForEachChunk("acme", "small", [&](int64_t, const DatasetChunk&) {
    ++n;
    return absl::OkStatus();
  }));
  EXPECT_EQ(n, 2);
  // A record that promises more chunks than are stored.
  rec.set_num_chunks(3);
  ASSERT_OK(db->datasets().PutRecord(rec));
  EXPECT_THAT(
      db->datasets().ForEachChunk("acme", "small", [](int64_t, const DatasetChunk&) { return absl::OkStatus(); }),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("3 chunks"), HasSubstr("m/acme/small"))));
}

// Bytes of the files under `dir` whose names end in `suffix`.
uintmax_t BytesOfFiles(const std::string& dir, const std::string& suffix) {
  uintmax_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().string().ends_with(suffix)) total += e.file_size();
  }
  return total;
}

DatasetChunk BigChunk(int c, size_t bytes) {
  DatasetChunk chunk;
  auto* ex = chunk.add_examples();
  ex->set_text(std::string(bytes, static_cast<char>('a' + c % 26)));
  ex->set_label("x");
  return chunk;
}

// An upload of "d" in 3 chunks cut short by SIGKILL after 2: Open removes
// its chunks with their space, so a later 1-chunk upload under the same id
// never reads them as its own (which would be DATA_LOSS, "expected chunk 1
// of 1").
TEST(DatasetStore, ChunksOfAnUploadCutShortAreRemovedAtOpenWithTheirSpace) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  constexpr size_t kChunkBytes = 2 << 20;
  uintmax_t blob_bytes_before = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    for (int c = 0; c < 8; ++c) ASSERT_OK(db->datasets().PutChunk("acme", "d", c, BigChunk(c, kChunkBytes)));
    // A committed dataset beside it, which must stay whole.
    ASSERT_OK(db->datasets().PutChunk("acme", "keep", 0, BigChunk(1, 1000)));
    DatasetRecord keep;
    keep.set_tenant("acme");
    keep.set_dataset_id("keep");
    keep.set_num_chunks(1);
    keep.set_num_examples(1);
    ASSERT_OK(db->datasets().PutRecord(keep));
    ASSERT_OK(db->Flush());
    blob_bytes_before = BytesOfFiles(path, ".blob");
    ASSERT_GT(blob_bytes_before, 8 * kChunkBytes);
    // The process dies here: no record for "d".
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK(db->Close());
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> left, testing::RawKeys(path, "datasets", "c/acme/d/"));
  EXPECT_THAT(left, ::testing::IsEmpty());
  EXPECT_LT(BytesOfFiles(path, ".blob"), blob_bytes_before / 4) << "the dead upload's blobs were not reclaimed";

  ASSERT_OK_AND_ASSIGN(db, Database::Open(At(path)));
  int n = 0;
  ASSERT_OK(db->datasets().ForEachChunk("acme", "keep", [&](int64_t, const DatasetChunk& c) {
    EXPECT_EQ(c.examples(0).text().size(), 1000u);
    ++n;
    return absl::OkStatus();
  }));
  EXPECT_EQ(n, 1);
  // A new upload under the dead one's id reads back only its own chunk.
  ASSERT_OK(db->datasets().ClearChunks("acme", "d"));
  ASSERT_OK(db->datasets().PutChunk("acme", "d", 0, BigChunk(3, 10)));
  DatasetRecord d;
  d.set_tenant("acme");
  d.set_dataset_id("d");
  d.set_num_chunks(1);
  ASSERT_OK(db->datasets().PutRecord(d));
  n = 0;
  ASSERT_OK(db->datasets().ForEachChunk("acme", "d", [&](int64_t, const DatasetChunk&) {
    ++n;
    return absl::OkStatus();
  }));
  EXPECT_EQ(n, 1);
}

// Without a restart in between (an upload abandoned while the process
// lives): the next upload under the id starts from an empty range.
TEST(DatasetStore, ClearChunksGivesANewUploadACleanRange) {
  TempDir dir;
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(dir.Sub("db"))));
  for (int c = 0; c < 3; ++c) ASSERT_OK(db->datasets().PutChunk("acme", "d", c, BigChunk(c, 100)));
  ASSERT_OK(db->datasets().PutChunk("acme", "d", 0, BigChunk(9, 10)));
  DatasetRecord d;
  d.set_tenant("acme");
  d.set_dataset_id("d");
  d.set_num_chunks(1);
  ASSERT_OK(db->datasets().PutRecord(d));
  // Without the clear, the stale chunks 1 and 2 are read as this dataset's.
  EXPECT_THAT(db->datasets().ForEachChunk("acme", "d", [](int64_t, const DatasetChunk&) { return absl::OkStatus(); }),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("expected chunk 1 of 1")));
  ASSERT_OK(db->datasets().Delete("acme", "d"));
  for (int c = 0; c < 3; ++c) ASSERT_OK(db->datasets().PutChunk("acme", "d", c, BigChunk(c, 100)));
  ASSERT_OK(db->datasets().ClearChunks("acme", "d"));
  ASSERT_OK(db->datasets().PutChunk("acme", "d", 0, BigChunk(9, 10)));
  ASSERT_OK(db->datasets().PutRecord(d));
  EXPECT_OK(db->datasets().ForEachChunk("acme", "d", [](int64_t, const DatasetChunk&) { return absl::OkStatus(); }));
}

TEST(CheckpointStore, LargeCheckpointRoundTripsAcrossReopenAndDeletes) {
  TempDir dir;
  const std::string path = dir.Sub("db");
  CheckpointRecord c;
  c.set_job_id("j1");
  c.set_step(1234);
  c.set_epoch(2);
  c.set_adapter_bytes(testing::MakeAdapterBytes("x", 1, 1 << 20));
  c.set_optimizer_state(std::string(2 << 20, '\x01'));
  c.set_rng_state("rng");
  c.mutable_best_metrics()->set_val_accuracy(0.9);
  {
    ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
    ASSERT_OK(db->checkpoints().Put(c));
    c.set_step(1300);  // replaces
    ASSERT_OK(db->checkpoints().Put(c));
  }
  ASSERT_OK_AND_ASSIGN(auto db, Database::Open(At(path)));
  ASSERT_OK_AND_ASSIGN(CheckpointRecord got, db->checkpoints().Get("j1"));
  EXPECT_EQ(got.step(), 1300);
  EXPECT_EQ(got.optimizer_state().size(), 2u << 20);
  EXPECT_OK(testing::CheckAdapterBytes(got.adapter_bytes(), "x", 1));
  EXPECT_DOUBLE_EQ(got.best_metrics().val_accuracy(), 0.9);
  ASSERT_OK(db->checkpoints().Delete("j1"));
  ASSERT_OK(db->checkpoints().Delete("j1"));  // absent is fine
  EXPECT_THAT(db->checkpoints().Get("j1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("j1")));
}

}  // namespace
}  // namespace adapterd::storage
