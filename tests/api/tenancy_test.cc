// Tenancy: a real server with a tenants file. Tenant B cannot see or touch
// tenant A's resources (NOT_FOUND, never PERMISSION_DENIED, so existence does
// not leak); a bad key is UNAUTHENTICATED; every quota gives
// RESOURCE_EXHAUSTED, at the tenant's own value above, below or at the
// server's default.
#include <algorithm>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/api/api_test_util.h"

namespace adapterd::testing {
namespace {

using ::adapterd::storage::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kKeyA[] = "key-of-tenant-a";
constexpr char kKeyB[] = "key-of-tenant-b";
constexpr char kKeyTight[] = "key-of-a-tight-tenant";
constexpr char kKeyDatasets[] = "key-of-a-tenant-with-a-small-dataset-quota";
constexpr char kKeyTokens[] = "key-of-a-tenant-that-uploads-tokens";
constexpr char kKeyQuota[] = "key-of-a-tenant-with-two-tasks-at-most";

class TenancyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(WriteFixtureModel(dir_->Sub("model")));
    std::ofstream(dir_->Sub("tenants.json")) << absl::StrCat(
        R"({"tenants": [
          {"id": "a", "api_key_sha256": ")",
        Sha256Hex(kKeyA), R"("},
          {"id": "b", "api_key_sha256": [")",
        Sha256Hex(kKeyB), R"("]},
          {"id": "tight", "api_key_sha256": ")",
        Sha256Hex(kKeyTight), R"(",
           "max_tasks": 1, "max_queued_jobs": 1, "max_texts_per_predict": 2,
           "max_dataset_bytes": 2000, "predict_rate_per_second": 0.001, "predict_burst": 2},
          {"id": "datasets", "api_key_sha256": ")",
        Sha256Hex(kKeyDatasets), R"(", "max_dataset_bytes": 1500},
          {"id": "tokens", "api_key_sha256": ")",
        Sha256Hex(kKeyTokens), R"(", "max_dataset_bytes": 1500},
          {"id": "quota", "api_key_sha256": ")",
        Sha256Hex(kKeyQuota), R"(", "max_tasks": 2, "max_queued_jobs": 16}
        ]})");
    ServerOptions o = TestServerOptions(dir_->Sub("data"), dir_->Sub("model"));
    o.tenancy.tenants_file = dir_->Sub("tenants.json");
    auto server = Server::Start(o);
    ASSERT_OK(server.status());
    server_ = server->release();
    stub_ = NewStub(server_->grpc_port()).release();
    v1::Dataset ds;
    ASSERT_TRUE(Upload(*stub_, PresenceUpload("data-a", 80, 7, 1, 2), &ds, kKeyA).ok());
    v1::CreateTrainingJobRequest req;
    req.set_task_id("secret");
    req.add_dataset_ids("data-a");
    req.mutable_hyperparameters()->set_epochs(1);
    req.mutable_hyperparameters()->set_batch_size(16);
    req.mutable_hyperparameters()->set_bottleneck_size(8);
    auto job = TrainToEnd(*stub_, req, kKeyA);
    ASSERT_OK(job.status());
    ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error_message();
    job_id_ = new std::string(job->job_id());
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete server_;
    delete job_id_;
    delete dir_;
  }
  static TempDir* dir_;
  static Server* server_;
  static v1::Adapterd::Stub* stub_;
  static std::string* job_id_;
};
TempDir* TenancyTest::dir_ = nullptr;
Server* TenancyTest::server_ = nullptr;
v1::Adapterd::Stub* TenancyTest::stub_ = nullptr;
std::string* TenancyTest::job_id_ = nullptr;

grpc::Status PredictAs(v1::Adapterd::Stub& s, const std::string& key, const std::string& task, int texts = 1) {
  v1::PredictRequest r;
  r.set_task_id(task);
  for (int i = 0; i < texts; ++i) r.add_texts("w1 w7");
  v1::PredictResponse out;
  auto ctx = Ctx(key);
  return s.Predict(ctx.get(), r, &out);
}

TEST_F(TenancyTest, OwnerCanUseItsTask) { EXPECT_TRUE(PredictAs(*stub_, kKeyA, "secret").ok()); }

TEST_F(TenancyTest, AnotherTenantSeesNothing) {
  using C = grpc::StatusCode;
  EXPECT_EQ(PredictAs(*stub_, kKeyB, "secret").error_code(), C::NOT_FOUND);
  {
    v1::GetTaskRequest r;
    r.set_task_id("secret");
    v1::Task out;
    auto ctx = Ctx(kKeyB);
    EXPECT_EQ(stub_->GetTask(ctx.get(), r, &out).error_code(), C::NOT_FOUND);
  }
  {
    v1::ListTasksResponse out;
    auto ctx = Ctx(kKeyB);
    ASSERT_TRUE(stub_->ListTasks(ctx.get(), v1::ListTasksRequest(), &out).ok());
    EXPECT_EQ(out.tasks_size(), 0);
  }
  {
    v1::ListTrainingJobsResponse out;
    auto ctx = Ctx(kKeyB);
    ASSERT_TRUE(stub_->ListTrainingJobs(ctx.get(), v1::ListTrainingJobsRequest(), &out).ok());
    EXPECT_EQ(out.jobs_size(), 0);
  }
  {
    v1::GetTrainingJobRequest r;
    r.set_job_id(*job_id_);
    v1::TrainingJob out;
    auto ctx = Ctx(kKeyB);
    EXPECT_EQ(stub_->GetTrainingJob(ctx.get(), r, &out).error_code(), C::NOT_FOUND);
  }
  {
    v1::ExportAdapterRequest r;
    r.set_task_id("secret");
    auto ctx = Ctx(kKeyB);
    auto reader = stub_->ExportAdapter(ctx.get(), r);
    v1::ExportAdapterResponse m;
    int got = 0;
    while (reader->Read(&m)) ++got;
    EXPECT_EQ(reader->Finish().error_code(), C::NOT_FOUND);
    EXPECT_EQ(got, 0);
  }
  {
    v1::DeleteTaskRequest r;
    r.set_task_id("secret");
    v1::DeleteTaskResponse out;
    auto ctx = Ctx(kKeyB);
    EXPECT_EQ(stub_->DeleteTask(ctx.get(), r, &out).error_code(), C::NOT_FOUND);
  }
  {
    v1::GetDatasetRequest r;
    r.set_dataset_id("data-a");
    v1::Dataset out;
    auto ctx = Ctx(kKeyB);
    EXPECT_EQ(stub_->GetDataset(ctx.get(), r, &out).error_code(), C::NOT_FOUND);
  }
  // B training on A's dataset id finds no such dataset.
  {
    v1::CreateTrainingJobRequest r;
    r.set_task_id("steal");
    r.add_dataset_ids("data-a");
    v1::TrainingJob out;
    auto ctx = Ctx(kKeyB);
    EXPECT_EQ(stub_->CreateTrainingJob(ctx.get(), r, &out).error_code(), C::NOT_FOUND);
  }
  // ... and A's task is intact.
  EXPECT_TRUE(PredictAs(*stub_, kKeyA, "secret").ok());
}

TEST_F(TenancyTest, BadKeysAreUnauthenticated) {
  using C = grpc::StatusCode;
  EXPECT_EQ(PredictAs(*stub_, "", "secret").error_code(), C::UNAUTHENTICATED);
  EXPECT_EQ(PredictAs(*stub_, "wrong-key", "secret").error_code(), C::UNAUTHENTICATED);
  v1::PredictRequest r;
  r.set_task_id("secret");
  r.add_texts("w1");
  v1::PredictResponse out;
  auto ctx = Ctx();
  ctx->AddMetadata("authorization", std::string("Basic ") + kKeyA);
  EXPECT_EQ(stub_->Predict(ctx.get(), r, &out).error_code(), C::UNAUTHENTICATED);
}

// API keys never reach the server's output: not for good keys, wrong keys or
// malformed authorization metadata. The server shares this
// process, so its stderr is captured around the calls.
TEST_F(TenancyTest, KeysAreNeverLogged) {
  const std::string wrong = "wrong-key-that-must-not-be-logged";
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(PredictAs(*stub_, kKeyA, "secret").ok());
  EXPECT_EQ(PredictAs(*stub_, kKeyB, "secret").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(PredictAs(*stub_, wrong, "secret").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::PredictRequest r;
  r.set_task_id("secret");
  r.add_texts("w1");
  v1::PredictResponse out;
  auto ctx = Ctx();
  ctx->AddMetadata("authorization", "Basic " + wrong);
  EXPECT_EQ(stub_->Predict(ctx.get(), r, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const std::string& key : {std::string(kKeyA), std::string(kKeyB), wrong}) {
    EXPECT_EQ(log.find(key), std::string::npos) << "the server's output holds key '" << key << "':\n" << log;
  }
}

TEST_F(TenancyTest, EachQuotaIsResourceExhausted) {
  using C = grpc::StatusCode;
  // Dataset bytes: 2000 bytes of text at most.
  v1::Dataset ds;
  EXPECT_EQ(Upload(*stub_, PresenceUpload("too-big", 400, 7, 2, 4), &ds, kKeyTight).error_code(),
            C::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("small", 40, 7, 3, 1), &ds, kKeyTight).ok());
  // Tasks: one at most. Queued jobs: one at most.
  v1::CreateTrainingJobRequest r;
  r.set_task_id("t1");
  r.add_dataset_ids("small");
  r.mutable_hyperparameters()->set_epochs(1);
  r.mutable_hyperparameters()->set_batch_size(8);
  r.mutable_hyperparameters()->set_bottleneck_size(8);
  auto job = TrainToEnd(*stub_, r, kKeyTight);
  ASSERT_OK(job.status());
  ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error_message();
  r.set_task_id("t2");
  v1::TrainingJob out;
  {
    auto ctx = Ctx(kKeyTight);
    EXPECT_EQ(stub_->CreateTrainingJob(ctx.get(), r, &out).error_code(), C::RESOURCE_EXHAUSTED);
  }
  // Texts per Predict: 2 at most.
  EXPECT_EQ(PredictAs(*stub_, kKeyTight, "t1", 3).error_code(), C::RESOURCE_EXHAUSTED);
  // Predict rate: a burst of 2, refilled at 0.001/s: the third call in a row
  // is refused (the failed call above took no token).
  EXPECT_TRUE(PredictAs(*stub_, kKeyTight, "t1").ok());
  EXPECT_TRUE(PredictAs(*stub_, kKeyTight, "t1").ok());
  EXPECT_EQ(PredictAs(*stub_, kKeyTight, "t1").error_code(), C::RESOURCE_EXHAUSTED);
}

// The dataset quota covers all of a tenant's datasets together, not each
// one alone, and deleting one gives its bytes back.
TEST_F(TenancyTest, TheDatasetQuotaCoversAllOfATenantsDatasets) {
  using C = grpc::StatusCode;
  v1::Dataset first;
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("q1", 40, 7, 5, 2), &first, kKeyDatasets).ok());
  ASSERT_GT(first.num_bytes() * 2, 1500) << "two such datasets must not fit in 1500 bytes";
  v1::Dataset out;
  const grpc::Status over = Upload(*stub_, PresenceUpload("q2", 40, 7, 6, 2), &out, kKeyDatasets);
  EXPECT_EQ(over.error_code(), C::RESOURCE_EXHAUSTED);
  EXPECT_THAT(over.error_message(), HasSubstr("DeleteDataset"));
  // Nothing of the refused upload stays, and other tenants are unaffected.
  {
    v1::GetDatasetRequest g;
    g.set_dataset_id("q2");
    auto ctx = Ctx(kKeyDatasets);
    EXPECT_EQ(stub_->GetDataset(ctx.get(), g, &out).error_code(), C::NOT_FOUND);
  }
  EXPECT_TRUE(Upload(*stub_, PresenceUpload("q2", 40, 7, 6, 2), &out, kKeyB).ok());
  // Deleting the first frees its bytes.
  {
    v1::DeleteDatasetRequest d;
    d.set_dataset_id("q1");
    v1::DeleteDatasetResponse dr;
    auto ctx = Ctx(kKeyDatasets);
    ASSERT_TRUE(stub_->DeleteDataset(ctx.get(), d, &dr).ok());
  }
  EXPECT_TRUE(Upload(*stub_, PresenceUpload("q2", 40, 7, 6, 2), &out, kKeyDatasets).ok());
  // Another tenant's dataset of that name is not this one's to delete.
  v1::DeleteDatasetRequest d;
  d.set_dataset_id("data-a");
  v1::DeleteDatasetResponse dr;
  auto ctx = Ctx(kKeyDatasets);
  EXPECT_EQ(stub_->DeleteDataset(ctx.get(), d, &dr).error_code(), C::NOT_FOUND);
}

// Every stored string counts against the quota, not only text, text_pair
// and label: a dataset of `tokens` and `tags` alone has its bytes counted.
TEST_F(TenancyTest, TheDatasetQuotaCountsEveryStoredString) {
  auto tagged = [](const std::string& id, int n) {
    std::vector<v1::UploadDatasetRequest> msgs(2);
    msgs[0].mutable_metadata()->set_dataset_id(id);
    for (int i = 0; i < n; ++i) {
      v1::Example* e = msgs[1].mutable_chunk()->add_examples();
      for (const char* w : {"Ada", "Lovelace", "met", "Babbage"}) e->add_tokens(w);
      for (const char* t : {"B-PER", "I-PER", "O", "B-PER"}) e->add_tags(t);
    }
    return msgs;
  };
  v1::Dataset out;
  ASSERT_TRUE(Upload(*stub_, tagged("tokens1", 30), &out, kKeyTokens).ok());
  // 30 x (3 + 8 + 3 + 7 bytes of words, 5 + 5 + 1 + 5 of tags).
  EXPECT_EQ(out.num_bytes(), 30 * (21 + 16));
  // The 1500-byte quota holds 1110; another 1110 would pass it.
  EXPECT_EQ(Upload(*stub_, tagged("tokens2", 30), &out, kKeyTokens).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

// max_tasks counts the tasks whose first job has not finished, and is
// checked atomically: with one first job admitted, of six concurrent new
// tasks, four first jobs and two imports, exactly one more is admitted. The
// first jobs' tasks are PENDING in GetTask and ListTasks, a Predict on one
// is FAILED_PRECONDITION, not NOT_FOUND, and an import of one is
// ALREADY_EXISTS.
TEST_F(TenancyTest, TheTaskQuotaCountsTasksBeingCreatedAndHoldsUnderConcurrency) {
  using C = grpc::StatusCode;
  std::string adapter;  // tenant a's trained task, to import
  {
    v1::ExportAdapterRequest r;
    r.set_task_id("secret");
    auto ctx = Ctx(kKeyA);
    auto reader = stub_->ExportAdapter(ctx.get(), r);
    v1::ExportAdapterResponse m;
    while (reader->Read(&m)) adapter += m.chunk();
    ASSERT_TRUE(reader->Finish().ok());
  }
  auto import = [&](const std::string& task_id) {
    auto ctx = Ctx(kKeyQuota);
    v1::Task task;
    auto writer = stub_->ImportAdapter(ctx.get(), &task);
    v1::ImportAdapterRequest m;
    m.mutable_metadata()->set_task_id(task_id);
    m.mutable_metadata()->set_total_bytes(static_cast<int64_t>(adapter.size()));
    bool ok = writer->Write(m);
    m.clear_metadata();
    m.set_chunk(adapter);
    if (ok) ok = writer->Write(m);
    if (ok) writer->WritesDone();
    return writer->Finish().error_code();
  };
  v1::Dataset ds;
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("quota-data", 40, 7, 9, 1), &ds, kKeyQuota).ok());
  // codes[0] and job_ids[0]: the first job, alone; then 1-4 jobs and 5-6
  // imports at once.
  std::vector<grpc::StatusCode> codes(7);
  std::vector<std::string> job_ids(5);
  auto submit = [&](int i) {
    v1::CreateTrainingJobRequest r;
    r.set_task_id(absl::StrCat("new", i));
    r.add_dataset_ids("quota-data");
    r.mutable_hyperparameters()->set_epochs(1000);  // still unfinished when checked; cancelled below
    r.mutable_hyperparameters()->set_batch_size(8);
    v1::TrainingJob job;
    auto ctx = Ctx(kKeyQuota);
    codes[i] = stub_->CreateTrainingJob(ctx.get(), r, &job).error_code();
    job_ids[i] = job.job_id();
  };
  submit(0);
  ASSERT_EQ(codes[0], C::OK);
  std::vector<std::thread> threads;
  for (int i = 1; i < 5; ++i) threads.emplace_back(submit, i);
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] { codes[5 + i] = import(absl::StrCat("imported", i)); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::count(codes.begin() + 1, codes.end(), C::OK), 1);
  EXPECT_EQ(std::count(codes.begin() + 1, codes.end(), C::RESOURCE_EXHAUSTED), 5);
  // What was admitted is listed: two tasks, READY (imported) or PENDING (a first job).
  v1::ListTasksRequest list;
  list.set_page_size(1);  // pending and stored tasks merge across pages
  std::vector<std::string> listed;
  do {
    v1::ListTasksResponse page;
    auto ctx = Ctx(kKeyQuota);
    ASSERT_TRUE(stub_->ListTasks(ctx.get(), list, &page).ok());
    for (const v1::Task& t : page.tasks()) listed.push_back(t.task_id());
    list.set_page_token(page.next_page_token());
  } while (!list.page_token().empty());
  EXPECT_EQ(listed.size(), 2u) << absl::StrJoin(listed, ",");
  EXPECT_TRUE(std::is_sorted(listed.begin(), listed.end()));
  for (int i = 0; i < 5; ++i) {
    if (codes[i] != C::OK) continue;
    v1::GetTaskRequest g;
    g.set_task_id(absl::StrCat("new", i));
    v1::Task t;
    auto ctx = Ctx(kKeyQuota);
    ASSERT_TRUE(stub_->GetTask(ctx.get(), g, &t).ok());
    EXPECT_EQ(t.state(), v1::TASK_STATE_PENDING);
    EXPECT_EQ(t.current_version(), 0);
    v1::PredictRequest p;
    p.set_task_id(g.task_id());
    p.add_texts("w1");
    v1::PredictResponse out;
    auto pctx = Ctx(kKeyQuota);
    const grpc::Status predicted = stub_->Predict(pctx.get(), p, &out);
    EXPECT_EQ(predicted.error_code(), C::FAILED_PRECONDITION) << predicted.error_message();
    EXPECT_THAT(predicted.error_message(), HasSubstr("has no version yet"));
    // An import of a task a first job is creating is not a new task.
    EXPECT_EQ(import(g.task_id()), C::ALREADY_EXISTS);
    v1::CancelTrainingJobRequest cancel;
    cancel.set_job_id(job_ids[i]);
    v1::TrainingJob cancelled;
    auto cctx = Ctx(kKeyQuota);
    ASSERT_TRUE(stub_->CancelTrainingJob(cctx.get(), cancel, &cancelled).ok());
  }
}

TEST_F(TenancyTest, QueuedJobQuota) {
  // The tight tenant may have one job waiting. A long job of tenant a keeps
  // the single trainer busy (or waits ahead in the queue), so the tight
  // tenant's first job waits and its second is refused.
  v1::CreateTrainingJobRequest longjob;
  longjob.set_task_id("long");
  longjob.add_dataset_ids("data-a");
  longjob.mutable_hyperparameters()->set_epochs(200);
  v1::TrainingJob running;
  {
    auto ctx = Ctx(kKeyA);
    ASSERT_TRUE(stub_->CreateTrainingJob(ctx.get(), longjob, &running).ok());
  }
  v1::Dataset ds;
  // Small: the tenant's 2000 bytes cover "small" (EachQuotaIsResourceExhausted) too.
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("small-q", 20, 7, 4, 1), &ds, kKeyTight).ok());
  v1::CreateTrainingJobRequest r;
  r.set_task_id("t1");  // the tight tenant's only task (new or retrained)
  r.add_dataset_ids("small-q");
  r.mutable_hyperparameters()->set_epochs(1);
  r.mutable_hyperparameters()->set_batch_size(8);
  r.mutable_hyperparameters()->set_bottleneck_size(8);
  v1::TrainingJob first, second;
  {
    auto ctx = Ctx(kKeyTight);
    grpc::Status s = stub_->CreateTrainingJob(ctx.get(), r, &first);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(first.state(), v1::JOB_STATE_QUEUED);
  }
  {
    r.mutable_hyperparameters()->set_seed(2);
    auto ctx = Ctx(kKeyTight);
    EXPECT_EQ(stub_->CreateTrainingJob(ctx.get(), r, &second).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Cancel both so the suite ends quickly.
  for (const auto& [job, key] : {std::pair{running.job_id(), kKeyA}, std::pair{first.job_id(), kKeyTight}}) {
    v1::CancelTrainingJobRequest c;
    c.set_job_id(job);
    v1::TrainingJob cancelled;
    auto ctx = Ctx(key);
    EXPECT_TRUE(stub_->CancelTrainingJob(ctx.get(), c, &cancelled).ok());
  }
}

// Every per-tenant quota against the server's default: a tenant whose quota
// is above the default gets its own quota, not the default (every layer
// checks the tenant's, none the server's), one below it gets its own, one
// equal to it and one
// that sets none get the default. Server defaults here: 2 tasks, 2 jobs
// waiting, 2 texts per Predict, 3,000 bytes of datasets, a Predict burst of 2
// refilled at 0.001/s.
class QuotaVsServerDefaultTest : public ::testing::Test {
 protected:
  struct Case {
    std::string tenant, key;
    int64_t tasks, queued, texts, bytes, burst;
  };
  static std::vector<Case> Cases() {
    return {{"above", "key-above", 3, 4, 4, 6000, 4},
            {"below", "key-below", 1, 1, 1, 1500, 1},
            {"equal", "key-equal", 2, 2, 2, 3000, 2},
            {"unset", "key-unset", 2, 2, 2, 3000, 2}};
  }
  static constexpr char kBlockerKey[] = "key-of-the-blocker";

  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_OK(WriteFixtureModel(dir_->Sub("model")));
    std::string tenants = absl::StrCat(R"({"tenants": [{"id": "blocker", "api_key_sha256": ")", Sha256Hex(kBlockerKey),
                                       R"(", "max_dataset_bytes": 1000000})");
    for (const Case& c : Cases()) {
      absl::StrAppend(&tenants, R"(, {"id": ")", c.tenant, R"(", "api_key_sha256": ")", Sha256Hex(c.key), R"(")");
      if (c.tenant != "unset") {
        absl::StrAppend(&tenants, R"(, "max_tasks": )", c.tasks, R"(, "max_queued_jobs": )", c.queued,
                        R"(, "max_texts_per_predict": )", c.texts, R"(, "max_dataset_bytes": )", c.bytes,
                        R"(, "predict_burst": )", c.burst);
      }
      absl::StrAppend(&tenants, "}");
    }
    std::ofstream(dir_->Sub("tenants.json")) << tenants << "]}";
    ServerOptions o = TestServerOptions(dir_->Sub("data"), dir_->Sub("model"));
    o.tenancy.tenants_file = dir_->Sub("tenants.json");
    o.tenancy.defaults.max_tasks = 2;
    o.tenancy.defaults.max_queued_jobs = 2;
    o.tenancy.defaults.max_texts_per_predict = 2;
    o.tenancy.defaults.max_dataset_bytes = 3000;
    o.tenancy.defaults.predict_rate_per_second = 0.001;
    o.tenancy.defaults.predict_burst = 2;
    auto server = Server::Start(o);
    ASSERT_OK(server.status());
    server_ = server->release();
    stub_ = NewStub(server_->grpc_port()).release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete server_;
    delete dir_;
  }

  static v1::CreateTrainingJobRequest Job(const std::string& task, const std::string& dataset, int epochs, int seed) {
    v1::CreateTrainingJobRequest r;
    r.set_task_id(task);
    r.add_dataset_ids(dataset);
    r.mutable_hyperparameters()->set_epochs(epochs);
    r.mutable_hyperparameters()->set_batch_size(8);
    r.mutable_hyperparameters()->set_bottleneck_size(8);
    r.mutable_hyperparameters()->set_seed(seed);
    return r;
  }
  static grpc::Status Create(const std::string& key, const v1::CreateTrainingJobRequest& r, v1::TrainingJob* out) {
    auto ctx = Ctx(key);
    return stub_->CreateTrainingJob(ctx.get(), r, out);
  }

  static TempDir* dir_;
  static Server* server_;
  static v1::Adapterd::Stub* stub_;
};
TempDir* QuotaVsServerDefaultTest::dir_ = nullptr;
Server* QuotaVsServerDefaultTest::server_ = nullptr;
v1::Adapterd::Stub* QuotaVsServerDefaultTest::stub_ = nullptr;

TEST_F(QuotaVsServerDefaultTest, EachTenantGetsItsOwnQuotaAboveBelowOrAtTheDefault) {
  using C = grpc::StatusCode;
  for (const Case& c : Cases()) {
    SCOPED_TRACE("tenant " + c.tenant);
    // Dataset bytes: copies of one dataset until the next would pass the
    // tenant's bytes; as many fit as the quota holds.
    v1::Dataset first;
    ASSERT_TRUE(Upload(*stub_, PresenceUpload(c.tenant + "-0", 32, 7, 1, 1), &first, c.key).ok());
    const int64_t size = first.num_bytes();
    ASSERT_GT(size, 0);
    ASSERT_LE(size, 1500) << "the smallest quota must hold one copy";
    int64_t fitted = 1;
    for (;; ++fitted) {
      v1::Dataset ds;
      const grpc::Status s =
          Upload(*stub_, PresenceUpload(absl::StrCat(c.tenant, "-", fitted), 32, 7, 1, 1), &ds, c.key);
      if (!s.ok()) {
        EXPECT_EQ(s.error_code(), C::RESOURCE_EXHAUSTED) << s.error_message();
        break;
      }
      ASSERT_LT(fitted, 100) << "no dataset quota";
    }
    EXPECT_EQ(fitted, c.bytes / size) << size << " bytes each";

    // Tasks: as many as the quota, then a new one is refused.
    for (int64_t t = 0; t < c.tasks; ++t) {
      auto job = TrainToEnd(*stub_, Job(absl::StrCat("t", t), first.dataset_id(), 1, 1), c.key);
      ASSERT_OK(job.status());
      ASSERT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED) << job->error_message();
    }
    v1::TrainingJob refused;
    const grpc::Status task_over = Create(c.key, Job(absl::StrCat("t", c.tasks), first.dataset_id(), 1, 1), &refused);
    EXPECT_EQ(task_over.error_code(), C::RESOURCE_EXHAUSTED);
    EXPECT_THAT(task_over.error_message(), HasSubstr(absl::StrCat("maximum of ", c.tasks, " tasks")));

    // Texts per Predict (a refused call takes no token), then the burst.
    v1::PredictRequest p;
    p.set_task_id("t0");
    for (int64_t i = 0; i <= c.texts; ++i) p.add_texts("w1 w7");
    v1::PredictResponse out;
    {
      auto ctx = Ctx(c.key);
      const grpc::Status s = stub_->Predict(ctx.get(), p, &out);
      EXPECT_EQ(s.error_code(), C::RESOURCE_EXHAUSTED);
      EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("the limit is ", c.texts)));
    }
    p.mutable_texts()->RemoveLast();
    for (int64_t i = 0; i < c.burst; ++i) {
      auto ctx = Ctx(c.key);
      const grpc::Status s = stub_->Predict(ctx.get(), p, &out);
      ASSERT_TRUE(s.ok()) << "call " << i << ": " << s.error_message();
      EXPECT_EQ(out.predictions_size(), c.texts);
    }
    auto ctx = Ctx(c.key);
    EXPECT_EQ(stub_->Predict(ctx.get(), p, &out).error_code(), C::RESOURCE_EXHAUSTED) << "the burst is " << c.burst;
  }

  // Jobs waiting: the blocker's long job holds the one trainer, so every
  // job of these tenants waits; each may have its quota waiting, no more.
  v1::Dataset blocker_data;
  ASSERT_TRUE(Upload(*stub_, PresenceUpload("blocker-data", 80, 7, 1, 2), &blocker_data, kBlockerKey).ok());
  v1::TrainingJob blocker;
  ASSERT_TRUE(Create(kBlockerKey, Job("long", "blocker-data", 200, 1), &blocker).ok());
  for (int i = 0; i < 600 && blocker.state() != v1::JOB_STATE_RUNNING; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    v1::GetTrainingJobRequest g;
    g.set_job_id(blocker.job_id());
    auto ctx = Ctx(kBlockerKey);
    ASSERT_TRUE(stub_->GetTrainingJob(ctx.get(), g, &blocker).ok());
  }
  ASSERT_EQ(blocker.state(), v1::JOB_STATE_RUNNING);
  std::vector<std::pair<std::string, std::string>> to_cancel = {{blocker.job_id(), kBlockerKey}};
  for (const Case& c : Cases()) {
    SCOPED_TRACE("tenant " + c.tenant);
    int64_t accepted = 0;
    for (int seed = 2;; ++seed) {
      v1::TrainingJob job;
      const grpc::Status s = Create(c.key, Job("t0", c.tenant + "-0", 1, seed), &job);
      if (!s.ok()) {
        EXPECT_EQ(s.error_code(), C::RESOURCE_EXHAUSTED) << s.error_message();
        EXPECT_THAT(s.error_message(), HasSubstr(absl::StrCat("its limit is ", c.queued)));
        break;
      }
      EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
      to_cancel.emplace_back(job.job_id(), c.key);
      ASSERT_LT(++accepted, 100) << "no queue quota";
    }
    EXPECT_EQ(accepted, c.queued);
  }
  for (const auto& [job, key] : to_cancel) {
    v1::CancelTrainingJobRequest r;
    r.set_job_id(job);
    v1::TrainingJob cancelled;
    auto ctx = Ctx(key);
    EXPECT_TRUE(stub_->CancelTrainingJob(ctx.get(), r, &cancelled).ok());
  }
}

}  // namespace
}  // namespace adapterd::testing
