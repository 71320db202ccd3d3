// AdapterdClient against a real gRPC server on 127.0.0.1 (port 0) running
// FakeAdapterd: metadata, chunked streams, status mapping, deadlines, health.
#include "client/adapterd_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "tests/client/client_test_util.h"
#include "tests/client/fake_adapterd.h"

namespace adapterd::client {
namespace {

using ::adapterd::client::testing::ClosedPort;
using ::adapterd::client::testing::FakeAdapterd;
using ::adapterd::client::testing::FakeServer;
using ::adapterd::client::testing::RecordedCall;
using ::adapterd::testing::IsOk;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::Optional;

std::vector<v1::Example> MakeExamples(int n) {
  std::vector<v1::Example> examples;
  for (int i = 0; i < n; ++i) {
    v1::Example& e = examples.emplace_back();
    e.set_text(absl::StrCat("example number ", i, " with some padding text"));
    if (i % 3 == 0) e.set_text_pair(absl::StrCat("pair ", i));
    e.set_label(i % 2 == 0 ? "even" : "odd");
  }
  return examples;
}

class AdapterdClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK_AND_ASSIGN(server_, FakeServer::Start()); }

  std::unique_ptr<AdapterdClient> NewClient(AdapterdClient::Options options = {}) {
    options.server = server_->address();
    auto client = AdapterdClient::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(client).value() : nullptr;
  }

  FakeAdapterd& fake() { return server_->fake(); }

  std::unique_ptr<FakeServer> server_;
};

// --- Options ---------------------------------------------------------------------

TEST(AdapterdClientCreate, RejectsBadOptions) {
  auto with = [](auto change) {
    AdapterdClient::Options options;
    change(options);
    return AdapterdClient::Create(std::move(options)).status();
  };
  using O = AdapterdClient::Options;
  EXPECT_THAT(with([](O& o) { o.server = ""; }), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("server")));
  EXPECT_THAT(with([](O& o) { o.default_deadline = absl::ZeroDuration(); }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("deadline")));
  EXPECT_THAT(with([](O& o) { o.default_deadline = -absl::Seconds(1); }), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(with([](O& o) { o.watch_deadline = absl::ZeroDuration(); }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(with([](O& o) { o.upload_chunk_bytes = 0; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("upload_chunk_bytes")));
  EXPECT_THAT(with([](O& o) { o.max_receive_message_bytes = 0; }), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(with([](O& o) { o.max_send_message_bytes = -1; }), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(with([](O& o) { o.api_key = "line\nbreak"; }),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("API key")));
  EXPECT_THAT(with([](O& o) { o.api_key = "caf\xC3\xA9"; }), StatusIs(absl::StatusCode::kInvalidArgument));
  // The defaults, an infinite deadline and a printable key are fine.
  EXPECT_OK(with([](O&) {}));
  EXPECT_OK(with([](O& o) {
    o.default_deadline = absl::InfiniteDuration();
    o.api_key = "key-._~+/=";
  }));
}

TEST(AdapterdClientCreate, StatusConversionKeepsCodeAndMessage) {
  EXPECT_OK(FromGrpcStatus(grpc::Status::OK));
  EXPECT_THAT(FromGrpcStatus(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "quota")),
              StatusIs(absl::StatusCode::kResourceExhausted, Eq("quota")));
  EXPECT_EQ(ServingStatusName(ServingStatus::kServing), "SERVING");
  EXPECT_EQ(ServingStatusName(ServingStatus::kNotServing), "NOT_SERVING");
}

// --- Metadata --------------------------------------------------------------------

TEST_F(AdapterdClientTest, SendsTheTaskIdAsMetadataOnEveryCallWithATask) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  v1::Task task;
  task.set_task_id("t-1");
  fake().AddTask(task);
  fake().SetExport("adapter bytes", 1, 4);

  v1::PredictRequest predict;
  predict.set_task_id("t-1");
  predict.add_texts("good");
  ASSERT_OK(client->Predict(predict).status());
  v1::CreateTrainingJobRequest create;
  create.set_task_id("t-1");
  create.add_dataset_ids("ds");
  ASSERT_OK(client->CreateTrainingJob(create).status());
  ASSERT_OK(client->GetTask("t-1").status());
  ASSERT_OK(client->ExportAdapter("t-1").status());
  ASSERT_OK(client->DeleteTask("t-1"));
  ASSERT_OK(client->ImportAdapter("t-1", "bytes").status());
  v1::ListTrainingJobsRequest list;
  list.set_task_id("t-1");
  ASSERT_OK(client->ListTrainingJobs(list).status());

  for (const char* method : {"Predict", "CreateTrainingJob", "GetTask", "ExportAdapter", "DeleteTask", "ImportAdapter",
                             "ListTrainingJobs"}) {
    const auto calls = fake().CallsOf(method);
    ASSERT_EQ(calls.size(), 1u) << method;
    EXPECT_THAT(calls[0].Metadata("x-task-id"), Optional(Eq("t-1"))) << method;
  }
}

TEST_F(AdapterdClientTest, SendsNoTaskIdWhereThereIsNone) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  (void)client->ListTasks({});
  (void)client->GetDataset("ds");
  (void)client->ListTrainingJobs({});
  (void)client->GetTrainingJob("job-1");
  (void)client->GetTrainingJob("job-1", "hinted");
  v1::PredictRequest bad;
  bad.set_task_id("caf\xC3\xA9");  // not printable ASCII: not sent as metadata
  bad.add_texts("x");
  (void)client->Predict(bad);

  EXPECT_EQ(fake().CallsOf("ListTasks").at(0).Metadata("x-task-id"), std::nullopt);
  EXPECT_EQ(fake().CallsOf("GetDataset").at(0).Metadata("x-task-id"), std::nullopt);
  EXPECT_EQ(fake().CallsOf("ListTrainingJobs").at(0).Metadata("x-task-id"), std::nullopt);
  const auto gets = fake().CallsOf("GetTrainingJob");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[0].Metadata("x-task-id"), std::nullopt);
  EXPECT_THAT(gets[1].Metadata("x-task-id"), Optional(Eq("hinted")));
  ASSERT_EQ(fake().predict_requests().size(), 1u);
  EXPECT_EQ(fake().predict_requests()[0].task_id(), "caf\xC3\xA9");
  EXPECT_EQ(fake().CallsOf("Predict").at(0).Metadata("x-task-id"), std::nullopt);
}

TEST_F(AdapterdClientTest, RoutesCallsNamingAMintedIdToTheTaskTheIdCarries) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const std::string job = "job-18c2f3a4b5c6d0a0b0c.sentiment";
  (void)client->GetTrainingJob(job);
  (void)client->CancelTrainingJob(job);
  v1::WatchTrainingJobRequest watch;
  watch.set_job_id(job);
  (void)client->WatchTrainingJob(watch, [](const v1::WatchTrainingJobResponse&) { return false; });
  (void)client->GetDataset("ds-18c2f3a4b5c6d0a0b0c.topics");
  (void)client->GetDataset("my-dataset", "hinted");
  (void)client->UploadDataset({}, MakeExamples(1), "uploaded-for");
  (void)client->GetTrainingJob(job, "explicit-hint-wins");

  const auto gets = fake().CallsOf("GetTrainingJob");
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_THAT(gets[0].Metadata("x-task-id"), Optional(Eq("sentiment")));
  EXPECT_THAT(gets[1].Metadata("x-task-id"), Optional(Eq("explicit-hint-wins")));
  EXPECT_THAT(fake().CallsOf("CancelTrainingJob").at(0).Metadata("x-task-id"), Optional(Eq("sentiment")));
  EXPECT_THAT(fake().CallsOf("WatchTrainingJob").at(0).Metadata("x-task-id"), Optional(Eq("sentiment")));
  const auto datasets = fake().CallsOf("GetDataset");
  ASSERT_EQ(datasets.size(), 2u);
  EXPECT_THAT(datasets[0].Metadata("x-task-id"), Optional(Eq("topics")));
  EXPECT_THAT(datasets[1].Metadata("x-task-id"), Optional(Eq("hinted")));
  EXPECT_THAT(fake().CallsOf("UploadDataset").at(0).Metadata("x-task-id"), Optional(Eq("uploaded-for")));
}

TEST_F(AdapterdClientTest, SendsTheBearerKeyOnEveryCallOnlyWhenSet) {
  AdapterdClient::Options with_key;
  with_key.api_key = "s3cret-key";
  auto keyed = NewClient(with_key);
  auto anonymous = NewClient();
  ASSERT_NE(keyed, nullptr);
  ASSERT_NE(anonymous, nullptr);
  v1::PredictRequest predict;
  predict.set_task_id("t");
  predict.add_texts("x");

  ASSERT_OK(keyed->Predict(predict).status());
  ASSERT_OK(keyed->ListTasks({}).status());
  ASSERT_OK(keyed->UploadDataset({}, MakeExamples(2)).status());
  ASSERT_OK(keyed->Health().status());  // the health service sees it too, but is not recorded
  const auto keyed_calls = fake().calls();
  ASSERT_EQ(keyed_calls.size(), 3u);
  for (const RecordedCall& call : keyed_calls) {
    EXPECT_THAT(call.Metadata("authorization"), Optional(Eq("Bearer s3cret-key"))) << call.method;
  }

  ASSERT_OK(anonymous->Predict(predict).status());
  ASSERT_OK(anonymous->ListTasks({}).status());
  const auto all = fake().calls();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 3; i < all.size(); ++i) {
    EXPECT_EQ(all[i].Metadata("authorization"), std::nullopt) << all[i].method;
  }
}

// --- Streams ---------------------------------------------------------------------

TEST(PlanChunks, CoversEveryExampleInOrderWithinTheBound) {
  const std::vector<v1::Example> examples = MakeExamples(50);
  for (size_t bound : {size_t{1}, size_t{60}, size_t{200}, size_t{1000}, size_t{1} << 20}) {
    const auto ranges = PlanChunks(examples, bound);
    ASSERT_FALSE(ranges.empty());
    size_t next = 0;
    for (const auto& [begin, end] : ranges) {
      EXPECT_EQ(begin, next) << bound;
      EXPECT_LT(begin, end) << bound;
      v1::DatasetChunk chunk;
      for (size_t i = begin; i < end; ++i) *chunk.add_examples() = examples[i];
      if (end - begin > 1) {
        EXPECT_LE(chunk.ByteSizeLong(), bound) << bound;
      }
      next = end;
    }
    EXPECT_EQ(next, examples.size()) << bound;
    if (bound == 1) {
      EXPECT_EQ(ranges.size(), examples.size());
    }
    if (bound == size_t{1} << 20) {
      EXPECT_EQ(ranges.size(), 1u);
    }
  }
  EXPECT_TRUE(PlanChunks({}, 100).empty());
}

TEST_F(AdapterdClientTest, UploadSendsMetadataFirstThenSmallChunksInOrder) {
  AdapterdClient::Options options;
  options.upload_chunk_bytes = 300;
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  std::vector<v1::Example> examples = MakeExamples(200);
  examples[77].set_text(std::string(1000, 'x'));  // larger than a chunk: goes alone
  v1::UploadDatasetRequest::Metadata metadata;
  metadata.set_dataset_id("my-data");
  metadata.set_display_name("train.csv");

  ASSERT_OK_AND_ASSIGN(const v1::Dataset dataset, client->UploadDataset(metadata, examples));
  EXPECT_EQ(dataset.dataset_id(), "my-data");
  EXPECT_EQ(dataset.num_examples(), 200);
  EXPECT_EQ(dataset.label_counts().at("even"), 100);

  const auto uploads = fake().uploads();
  ASSERT_EQ(uploads.size(), 1u);
  const auto& messages = uploads[0];
  ASSERT_GE(messages.size(), 2u);
  ASSERT_TRUE(messages[0].has_metadata());
  EXPECT_EQ(messages[0].metadata().dataset_id(), "my-data");
  EXPECT_EQ(messages[0].metadata().display_name(), "train.csv");
  EXPECT_GT(messages.size(), 20u);  // 200 examples of ~50 bytes in 300-byte chunks
  std::vector<v1::Example> received;
  for (size_t i = 1; i < messages.size(); ++i) {
    ASSERT_TRUE(messages[i].has_chunk()) << i;
    const auto& chunk = messages[i].chunk();
    ASSERT_GT(chunk.examples_size(), 0) << i;
    if (chunk.examples_size() > 1) {
      EXPECT_LE(chunk.ByteSizeLong(), 300u) << i;
    }
    for (const auto& e : chunk.examples()) received.push_back(e);
  }
  ASSERT_EQ(received.size(), examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    EXPECT_EQ(received[i].SerializeAsString(), examples[i].SerializeAsString()) << i;
  }
}

TEST_F(AdapterdClientTest, ExportConcatenatesChunksAndChecksTheSize) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>(i * 7 % 256));
  fake().SetExport(bytes, 4, 7);
  ASSERT_OK_AND_ASSIGN(const ExportedAdapter exported, client->ExportAdapter("t", 0));
  EXPECT_EQ(exported.version, 4);
  EXPECT_EQ(exported.bytes, bytes);

  fake().SetExport(bytes, 4, 7, /*announced_total=*/1001);
  EXPECT_THAT(client->ExportAdapter("t", 0).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("1001")));
  fake().SetExport("", 4, 7);
  EXPECT_THAT(client->ExportAdapter("t", 0).status(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(AdapterdClientTest, ImportSendsMetadataThenTheFileInChunks) {
  AdapterdClient::Options options;
  options.upload_chunk_bytes = 64;
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  const std::string bytes(1000, 'a');
  ASSERT_OK_AND_ASSIGN(const v1::Task task, client->ImportAdapter("copy", bytes));
  EXPECT_EQ(task.task_id(), "copy");
  EXPECT_EQ(task.adapter_bytes(), 1000);
  const auto imports = fake().imports();
  ASSERT_EQ(imports.size(), 1u);
  ASSERT_TRUE(imports[0].at(0).has_metadata());
  EXPECT_EQ(imports[0][0].metadata().task_id(), "copy");
  EXPECT_EQ(imports[0].size(), 1u + 16u);  // ceil(1000 / 64) chunks
  std::string received;
  for (size_t i = 1; i < imports[0].size(); ++i) {
    EXPECT_LE(imports[0][i].chunk().size(), 64u);
    received += imports[0][i].chunk();
  }
  EXPECT_EQ(received, bytes);
}

v1::WatchTrainingJobResponse WatchMessage(v1::JobState state, std::vector<int64_t> seqs) {
  v1::WatchTrainingJobResponse response;
  response.mutable_job()->set_job_id("job-7");
  response.mutable_job()->set_state(state);
  for (int64_t seq : seqs) {
    v1::JobEvent* event = response.add_events();
    event->set_seq(seq);
    event->mutable_progress()->set_step(seq);
  }
  return response;
}

TEST_F(AdapterdClientTest, WatchDeliversEveryMessageInOrderAndEnds) {
  AdapterdClient::Options options;
  options.default_deadline = absl::Milliseconds(1);  // must not apply to the watch
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  fake().SetWatchResponses({WatchMessage(v1::JOB_STATE_QUEUED, {1, 2}), WatchMessage(v1::JOB_STATE_RUNNING, {3}),
                            WatchMessage(v1::JOB_STATE_RUNNING, {4}), WatchMessage(v1::JOB_STATE_SUCCEEDED, {5})});
  v1::WatchTrainingJobRequest request;
  request.set_job_id("job-7");
  request.set_after_seq(0);
  std::vector<int64_t> seqs;
  std::vector<v1::JobState> states;
  ASSERT_OK(client->WatchTrainingJob(
      request,
      [&](const v1::WatchTrainingJobResponse& r) {
        states.push_back(r.job().state());
        for (const auto& e : r.events()) seqs.push_back(e.seq());
        return true;
      },
      "task-a"));
  EXPECT_THAT(seqs, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(states,
              ElementsAre(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
  const auto calls = fake().CallsOf("WatchTrainingJob");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_THAT(calls[0].Metadata("x-task-id"), Optional(Eq("task-a")));
  EXPECT_EQ(calls[0].deadline_left, absl::InfiniteDuration());
  ASSERT_EQ(fake().watch_requests().size(), 1u);
  EXPECT_EQ(fake().watch_requests()[0].job_id(), "job-7");
}

TEST_F(AdapterdClientTest, WatchStopsWhenTheCallbackSaysSo) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  fake().SetWatchResponses({WatchMessage(v1::JOB_STATE_RUNNING, {1}), WatchMessage(v1::JOB_STATE_RUNNING, {2}),
                            WatchMessage(v1::JOB_STATE_SUCCEEDED, {3})});
  int messages = 0;
  v1::WatchTrainingJobRequest request;
  request.set_job_id("job-7");
  EXPECT_OK(client->WatchTrainingJob(request, [&](const v1::WatchTrainingJobResponse&) {
    ++messages;
    return false;
  }));
  EXPECT_EQ(messages, 1);
}

TEST_F(AdapterdClientTest, WatchReportsTheStreamError) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  fake().FailWith("WatchTrainingJob", grpc::Status(grpc::StatusCode::NOT_FOUND, "no job job-9"));
  v1::WatchTrainingJobRequest request;
  request.set_job_id("job-9");
  EXPECT_THAT(client->WatchTrainingJob(request, [](const v1::WatchTrainingJobResponse&) { return true; }),
              StatusIs(absl::StatusCode::kNotFound, Eq("no job job-9")));
}

// --- Errors and deadlines -------------------------------------------------------------

TEST_F(AdapterdClientTest, ServerErrorsKeepTheirCodeAndMessage) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const grpc::StatusCode codes[] = {grpc::StatusCode::INVALID_ARGUMENT,   grpc::StatusCode::NOT_FOUND,
                                    grpc::StatusCode::ALREADY_EXISTS,     grpc::StatusCode::FAILED_PRECONDITION,
                                    grpc::StatusCode::RESOURCE_EXHAUSTED, grpc::StatusCode::UNAUTHENTICATED,
                                    grpc::StatusCode::PERMISSION_DENIED,  grpc::StatusCode::UNAVAILABLE,
                                    grpc::StatusCode::INTERNAL,           grpc::StatusCode::DEADLINE_EXCEEDED};
  v1::PredictRequest predict;
  predict.set_task_id("t");
  predict.add_texts("x");
  for (const grpc::StatusCode code : codes) {
    const std::string message = absl::StrCat("message for code ", static_cast<int>(code));
    fake().FailWith("", grpc::Status(code, message));
    const auto expected = static_cast<absl::StatusCode>(code);
    EXPECT_THAT(client->Predict(predict).status(), StatusIs(expected, Eq(message)));
    EXPECT_THAT(client->GetTask("t").status(), StatusIs(expected, Eq(message)));
    EXPECT_THAT(client->DeleteTask("t"), StatusIs(expected, Eq(message)));
    EXPECT_THAT(client->UploadDataset({}, MakeExamples(3)).status(), StatusIs(expected, Eq(message)));
    EXPECT_THAT(client->ImportAdapter("t", "abc").status(), StatusIs(expected, Eq(message)));
    EXPECT_THAT(client->ExportAdapter("t").status(), StatusIs(expected, Eq(message)));
  }
}

TEST_F(AdapterdClientTest, EveryCallCarriesTheDefaultDeadline) {
  AdapterdClient::Options options;
  options.default_deadline = absl::Seconds(7);
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  v1::PredictRequest predict;
  predict.set_task_id("t");
  predict.add_texts("x");
  (void)client->Predict(predict);
  (void)client->GetTask("t");
  (void)client->UploadDataset({}, MakeExamples(1));
  (void)client->ExportAdapter("t");
  (void)client->ListTrainingJobs({});
  const auto calls = fake().calls();
  ASSERT_EQ(calls.size(), 5u);
  for (const RecordedCall& call : calls) {
    // gRPC rounds the grpc-timeout header up a little.
    EXPECT_LE(call.deadline_left, absl::Milliseconds(7500)) << call.method;
    EXPECT_GT(call.deadline_left, absl::Seconds(1)) << call.method;
  }
}

TEST_F(AdapterdClientTest, AStalledServerRunsIntoTheDeadline) {
  AdapterdClient::Options options;
  options.default_deadline = absl::Milliseconds(300);
  auto client = NewClient(options);
  ASSERT_NE(client, nullptr);
  fake().StallPredict();
  v1::PredictRequest predict;
  predict.set_task_id("t");
  predict.add_texts("x");
  const absl::Time start = absl::Now();
  EXPECT_THAT(client->Predict(predict).status(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  const absl::Duration elapsed = absl::Now() - start;
  EXPECT_GE(elapsed, absl::Milliseconds(250));
  EXPECT_LT(elapsed, absl::Seconds(10));  // the fake would hold it for 20 s
  EXPECT_EQ(fake().predict_requests().size(), 1u);
}

TEST(AdapterdClientUnreachable, ARefusedConnectionIsUnavailable) {
  ClosedPort closed;
  ASSERT_NE(closed.port(), 0);
  AdapterdClient::Options options;
  options.server = absl::StrCat("127.0.0.1:", closed.port());
  options.default_deadline = absl::Seconds(10);
  ASSERT_OK_AND_ASSIGN(auto client, AdapterdClient::Create(options));
  const absl::Time start = absl::Now();
  EXPECT_THAT(client->GetTask("t").status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(client->Health().status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(client->UploadDataset({}, MakeExamples(5)).status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // fails fast, not at the deadline
}

// --- Health -----------------------------------------------------------------------------

TEST_F(AdapterdClientTest, HealthFollowsTheServersHealthService) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto health = [&] {
    const absl::StatusOr<ServingStatus> status = client->Health();
    EXPECT_OK(status.status());
    return std::string(ServingStatusName(status.value_or(ServingStatus::kUnknown)));
  };
  EXPECT_EQ(health(), "SERVING");
  server_->SetServing(false);
  EXPECT_EQ(health(), "NOT_SERVING");
  server_->SetServing(true);
  EXPECT_EQ(health(), "SERVING");
  // gRPC's default health service does not know other services.
  EXPECT_THAT(client->Health("no.such.Service").status(), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace adapterd::client
