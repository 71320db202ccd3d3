// The adapterctl commands (client/commands.h), called directly with string
// streams, against FakeAdapterd on 127.0.0.1.
#include "client/commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "tests/client/client_test_util.h"
#include "tests/client/fake_adapterd.h"

namespace adapterd::client {
namespace {

using ::adapterd::client::testing::FakeAdapterd;
using ::adapterd::client::testing::FakeServer;
using ::adapterd::client::testing::TempDir;
using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

void SetSelection(v1::EpochMetrics& m, const std::string& field, const std::string& label, double value,
                  bool fraction) {
  v1::SelectionMetric& s = *m.mutable_selection();
  s.set_field(field);
  s.set_label(label);
  s.set_value(value);
  s.set_fraction(fraction);
}

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(server_, FakeServer::Start());
    AdapterdClient::Options options;
    options.server = server_->address();
    options.default_deadline = absl::Seconds(20);
    ASSERT_OK_AND_ASSIGN(client_, AdapterdClient::Create(options));
    env_.client = client_.get();
    env_.out = &out_;
    env_.err = &err_;
    env_.in = &in_;
  }

  FakeAdapterd& fake() { return server_->fake(); }
  std::vector<std::string> ListDatasetIds() { return fake().dataset_ids(); }

  // A job in `state` with some history, as the fake's watch and Get answer it.
  void SetUpJob(v1::JobState final_state, const std::string& error = "") {
    v1::TrainingJob job;
    job.set_job_id("job-42");
    job.set_task_id("sentiment");
    job.set_state(v1::JOB_STATE_QUEUED);
    fake().SetCreatedJob(job);

    v1::WatchTrainingJobResponse first;
    *first.mutable_job() = job;
    auto* created = first.add_events();
    created->set_seq(1);
    created->mutable_state_change()->set_to(v1::JOB_STATE_QUEUED);
    created->mutable_state_change()->set_reason("created");

    v1::WatchTrainingJobResponse running = first;
    running.clear_events();
    running.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
    running.mutable_job()->set_started_at_micros(1'000'000'000);
    running.mutable_job()->set_updated_at_micros(1'000'000'000 + 10'000'000);
    auto* progress = running.mutable_job()->mutable_progress();
    progress->set_epoch(1);
    progress->set_total_epochs(2);
    progress->set_step(5);
    progress->set_total_steps(10);
    auto* started = running.add_events();
    started->set_seq(2);
    started->mutable_state_change()->set_from(v1::JOB_STATE_QUEUED);
    started->mutable_state_change()->set_to(v1::JOB_STATE_RUNNING);
    auto* metrics = running.add_events();
    metrics->set_seq(3);
    metrics->mutable_epoch_metrics()->set_epoch(1);
    metrics->mutable_epoch_metrics()->set_train_loss(0.5);
    metrics->mutable_epoch_metrics()->set_val_loss(0.4);
    metrics->mutable_epoch_metrics()->set_val_accuracy(0.8);
    SetSelection(*metrics->mutable_epoch_metrics(), "val_accuracy", "val accuracy", 0.8, true);
    *running.mutable_job()->mutable_best_metrics() = metrics->epoch_metrics();
    auto* tick = running.add_events();
    tick->set_seq(4);
    tick->set_time_micros(1'000'000'000 + 10'000'000);  // 5 steps in 10 s
    *tick->mutable_progress() = *progress;

    v1::WatchTrainingJobResponse last = running;
    last.clear_events();
    last.mutable_job()->set_state(final_state);
    last.mutable_job()->set_error_message(error);
    if (final_state == v1::JOB_STATE_SUCCEEDED) last.mutable_job()->set_result_version(1);
    auto* done = last.add_events();
    done->set_seq(5);
    done->mutable_state_change()->set_from(v1::JOB_STATE_RUNNING);
    done->mutable_state_change()->set_to(final_state);
    fake().SetWatchResponses({first, running, last});
    fake().AddJob(last.job());
  }

  std::unique_ptr<FakeServer> server_;
  std::unique_ptr<AdapterdClient> client_;
  std::ostringstream out_;
  std::ostringstream err_;
  std::istringstream in_;
  CommandEnv env_;
  TempDir dir_;
};

// --- predict ----------------------------------------------------------------------

TEST_F(CommandsTest, PredictPrintsATable) {
  PredictArgs args;
  args.task_id = "sentiment";
  args.texts = {"a good film", "a dull film"};
  ASSERT_OK(Predict(env_, args));
  const std::vector<std::string> lines = absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << out_.str();
  EXPECT_THAT(lines[0], ::testing::MatchesRegex("TEXT +LABEL +SCORE"));
  EXPECT_THAT(lines[1], ::testing::MatchesRegex("a good film +positive +0\\.8750"));
  EXPECT_THAT(lines[2], ::testing::MatchesRegex("a dull film +negative +0\\.8750"));
  // Columns line up: LABEL starts at the same offset on every line.
  EXPECT_EQ(lines[0].find("LABEL"), lines[1].find("positive"));
  ASSERT_EQ(fake().predict_requests().size(), 1u);
  EXPECT_THAT(fake().predict_requests()[0].texts(), ElementsAre("a good film", "a dull film"));
  EXPECT_FALSE(fake().predict_requests()[0].return_all_scores());
}

TEST_F(CommandsTest, PredictAllScoresAddsAColumnPerLabel) {
  PredictArgs args;
  args.task_id = "sentiment";
  args.all_scores = true;
  args.texts = {"good"};
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(out_.str(), HasSubstr("P(negative)"));
  EXPECT_THAT(out_.str(), HasSubstr("P(positive)"));
  EXPECT_THAT(out_.str(), HasSubstr("0.1250"));
  EXPECT_TRUE(fake().predict_requests().at(0).return_all_scores());
}

TEST_F(CommandsTest, PredictJsonIsValidAndComplete) {
  env_.json = true;
  PredictArgs args;
  args.task_id = "sentiment";
  args.all_scores = true;
  args.texts = {"good \"quoted\" text", "plain"};
  args.pairs = {"p1", "p2"};
  ASSERT_OK(Predict(env_, args));
  const nlohmann::json doc = nlohmann::json::parse(out_.str(), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << out_.str();
  EXPECT_EQ(doc["task_id"], "sentiment");
  EXPECT_EQ(doc["version"], FakeAdapterd::kCurrentVersion);
  ASSERT_EQ(doc["predictions"].size(), 2u);
  const auto& p0 = doc["predictions"][0];
  EXPECT_EQ(p0["text"], "good \"quoted\" text");
  EXPECT_EQ(p0["text_pair"], "p1");
  EXPECT_EQ(p0["label"], "positive");
  EXPECT_EQ(p0["score"].get<double>(), 0.875);
  ASSERT_EQ(p0["all_scores"].size(), 2u);
  EXPECT_EQ(p0["all_scores"][1]["label"], "positive");
  EXPECT_EQ(p0["all_scores"][0]["score"].get<double>(), 0.125);
  EXPECT_EQ(doc["predictions"][1]["label"], "negative");
  EXPECT_THAT(fake().predict_requests().at(0).text_pairs(), ElementsAre("p1", "p2"));
}

// Each task kind reads the way a person reads it: the labels, the value,
// the entities marked in the text, the answer in its context.
TEST_F(CommandsTest, PredictPrintsEachKindReadably) {
  PredictArgs args;
  args.task_id = "multi";
  args.texts = {"a good film"};
  args.threshold = 0.4;
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(out_.str(), ::testing::MatchesRegex("TEXT +LABELS\na good film +positive 0\\.8750, short 0\\.5000\n"));
  EXPECT_FLOAT_EQ(fake().predict_requests().back().threshold(), 0.4f);
  out_.str("");
  args.task_id = "regression";
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(out_.str(), ::testing::MatchesRegex("TEXT +VALUE\na good film +2\\.5\n"));
  out_.str("");
  args.task_id = "ner";
  args.texts = {"Ada met Ada"};
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(out_.str(), ::testing::MatchesRegex("TEXT +ENTITIES +MARKED\nAda met Ada +2 +\\[Ada\\]\\(PER\\) met "
                                                  "\\[Ada\\]\\(PER\\)\n"));
  out_.str("");
  args.task_id = "qa";
  args.texts = {"Who?"};
  args.pairs = {"Ada wrote the first program for the Analytical Engine, which Babbage designed in 1837"};
  args.top_k_answers = 2;
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(out_.str(), HasSubstr("QUESTION"));
  EXPECT_THAT(out_.str(), HasSubstr("IN CONTEXT"));
  EXPECT_THAT(out_.str(), ::testing::MatchesRegex("(.|\n)*Who\\? +Ada +0\\.8750 +\\[Ada\\] wrote the first program "
                                                  "for t\\.\\.\\.\n"));
  EXPECT_EQ(fake().predict_requests().back().top_k_answers(), 2);
}

TEST_F(CommandsTest, PredictJsonCarriesEachKindsFields) {
  env_.json = true;
  PredictArgs args;
  args.task_id = "ner";
  args.texts = {"Ada met Ada"};
  ASSERT_OK(Predict(env_, args));
  nlohmann::json doc = nlohmann::json::parse(out_.str());
  EXPECT_EQ(doc["task_kind"], "TASK_KIND_TOKEN_CLASSIFICATION");
  ASSERT_EQ(doc["predictions"][0]["entities"].size(), 2u);
  EXPECT_EQ(doc["predictions"][0]["entities"][1]["start"], 8);
  EXPECT_EQ(doc["predictions"][0]["entities"][1]["text"], "Ada");
  EXPECT_FALSE(doc["predictions"][0].contains("label"));
  out_.str("");
  args.task_id = "qa";
  args.texts = {"Who?"};
  args.pairs = {"Ada wrote"};
  ASSERT_OK(Predict(env_, args));
  doc = nlohmann::json::parse(out_.str());
  const auto& p = doc["predictions"][0];
  EXPECT_EQ(p["question"], "Who?");
  EXPECT_EQ(p["context"], "Ada wrote");
  ASSERT_EQ(p["answers"].size(), 2u);
  EXPECT_EQ(p["answers"][0]["text"], "Ada");
  EXPECT_EQ(p["answers"][0]["end"], 3);
  EXPECT_EQ(p["answers"][1]["text"], "");
  out_.str("");
  args.task_id = "regression";
  args.pairs.clear();
  ASSERT_OK(Predict(env_, args));
  doc = nlohmann::json::parse(out_.str());
  EXPECT_EQ(doc["predictions"][0]["value"].get<double>(), 2.5);
  out_.str("");
  args.task_id = "multi";
  ASSERT_OK(Predict(env_, args));
  doc = nlohmann::json::parse(out_.str());
  ASSERT_EQ(doc["predictions"][0]["labels"].size(), 2u);
  EXPECT_EQ(doc["predictions"][0]["labels"][1]["label"], "short");
}

TEST_F(CommandsTest, PredictReadsStdinWhenNoTextsAreGiven) {
  in_.str("good one\r\n\nbad one\n  \nlast without newline");
  PredictArgs args;
  args.task_id = "sentiment";
  ASSERT_OK(Predict(env_, args));
  ASSERT_EQ(fake().predict_requests().size(), 1u);
  EXPECT_THAT(fake().predict_requests()[0].texts(), ElementsAre("good one", "bad one", "last without newline"));
}

TEST_F(CommandsTest, PredictReadsAFileOneTextPerLine) {
  PredictArgs args;
  args.task_id = "sentiment";
  args.file = dir_.Write("texts.txt", "first\nsecond\n");
  ASSERT_OK(Predict(env_, args));
  EXPECT_THAT(fake().predict_requests().at(0).texts(), ElementsAre("first", "second"));
  args.texts = {"x"};
  EXPECT_THAT(Predict(env_, args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
}

TEST_F(CommandsTest, PredictNamesATextThatIsNotUtf8WithoutCallingTheServer) {
  PredictArgs args;
  args.task_id = "sentiment";
  args.file = dir_.Write("texts.txt", "first\nsecond \xff\xfe\n");
  EXPECT_THAT(Predict(env_, args),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("text 2 is not valid UTF-8")));
  EXPECT_TRUE(fake().calls().empty());
}

TEST_F(CommandsTest, PredictSplitsLongInputsAndPinsTheVersion) {
  PredictArgs args;
  args.task_id = "sentiment";
  args.batch_size = 2;
  args.texts = {"a", "b", "c", "d", "e"};
  env_.json = true;
  ASSERT_OK(Predict(env_, args));
  const auto requests = fake().predict_requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].version(), 0);
  EXPECT_EQ(requests[1].version(), FakeAdapterd::kCurrentVersion);
  EXPECT_EQ(requests[2].version(), FakeAdapterd::kCurrentVersion);
  EXPECT_THAT(requests[2].texts(), ElementsAre("e"));
  EXPECT_EQ(nlohmann::json::parse(out_.str())["predictions"].size(), 5u);
}

TEST_F(CommandsTest, PredictRejectsBadArgumentsWithoutCallingTheServer) {
  PredictArgs args;
  args.texts = {"x"};
  EXPECT_THAT(Predict(env_, args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--task")));
  args.task_id = "t";
  args.pairs = {"1", "2"};
  EXPECT_THAT(Predict(env_, args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--pair")));
  args.pairs.clear();
  args.texts.clear();  // and stdin is empty
  EXPECT_THAT(Predict(env_, args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no texts")));
  EXPECT_TRUE(fake().calls().empty());
}

TEST_F(CommandsTest, PredictPassesServerErrorsThrough) {
  fake().FailWith("Predict", grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "task t has no ready version"));
  PredictArgs args;
  args.task_id = "t";
  args.texts = {"x"};
  const absl::Status status = Predict(env_, args);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ReportError(env_, status, server_->address()), kExitFailedPrecondition);
  EXPECT_THAT(err_.str(), HasSubstr("adapterctl: task t has no ready version"));
  EXPECT_EQ(out_.str(), "");
}

// --- Errors and exit codes -----------------------------------------------------------

TEST(CommandErrors, ExitCodeForMapsEachCode) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("x")), kExitInvalidArgument);
  EXPECT_EQ(ExitCodeFor(absl::OutOfRangeError("x")), kExitInvalidArgument);
  EXPECT_EQ(ExitCodeFor(absl::NotFoundError("x")), kExitNotFound);
  EXPECT_EQ(ExitCodeFor(absl::AlreadyExistsError("x")), kExitAlreadyExists);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("x")), kExitFailedPrecondition);
  EXPECT_EQ(ExitCodeFor(absl::ResourceExhaustedError("x")), kExitResourceExhausted);
  EXPECT_EQ(ExitCodeFor(absl::UnauthenticatedError("x")), kExitUnauthenticated);
  EXPECT_EQ(ExitCodeFor(absl::PermissionDeniedError("x")), kExitUnauthenticated);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("x")), kExitUnavailable);
  EXPECT_EQ(ExitCodeFor(absl::DeadlineExceededError("x")), kExitDeadlineExceeded);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("x")), kExitError);
  EXPECT_EQ(ExitCodeFor(absl::UnknownError("x")), kExitError);
  EXPECT_EQ(ExitCodeFor(absl::CancelledError("x")), kExitError);  // not a job outcome
  // Every code in the table is listed in the help.
  for (int code : {kExitOk, kExitError, kExitUsage, kExitInvalidArgument, kExitNotFound, kExitAlreadyExists,
                   kExitFailedPrecondition, kExitResourceExhausted, kExitUnauthenticated, kExitUnavailable,
                   kExitDeadlineExceeded, kExitJobFailed, kExitJobCancelled}) {
    EXPECT_THAT(std::string(kExitCodesHelp), HasSubstr(absl::StrCat("\n  ", code, " "))) << code;
  }
}

TEST(CommandErrors, DescribeErrorNamesTheServerWhereItHelps) {
  const std::string server = "10.1.2.3:8500";
  // gRPC's own connection failure.
  const std::string refused = DescribeError(
      absl::UnavailableError("failed to connect to all addresses; last error: Connection refused"), server);
  EXPECT_THAT(refused, HasSubstr("cannot reach adapterd at 10.1.2.3:8500"));
  EXPECT_THAT(refused, HasSubstr("Connection refused"));
  // A server that answered UNAVAILABLE itself.
  const std::string draining = DescribeError(absl::UnavailableError("the server is draining"), server);
  EXPECT_THAT(draining, HasSubstr("10.1.2.3:8500"));
  EXPECT_THAT(draining, HasSubstr("the server is draining"));
  // A replica behind a router or a list's fan-out: the address answered, so
  // not "cannot reach", although gRPC's own words say "connect".
  const std::string replica = DescribeError(
      absl::UnavailableError("replica 10.0.0.9:8500 did not answer (failed to connect to all addresses)"), server);
  EXPECT_THAT(replica, HasSubstr("adapterd at 10.1.2.3:8500 answered UNAVAILABLE: replica 10.0.0.9:8500"));
  EXPECT_THAT(replica, Not(HasSubstr("cannot reach")));
  EXPECT_THAT(DescribeError(absl::DeadlineExceededError("Deadline Exceeded"), server), HasSubstr("10.1.2.3:8500"));
  EXPECT_THAT(DescribeError(absl::UnauthenticatedError("unknown key"), server), HasSubstr("ADAPTERD_API_KEY"));
  EXPECT_THAT(DescribeError(absl::NotFoundError("task x"), server), HasSubstr("not found: task x"));
  EXPECT_THAT(DescribeError(absl::ResourceExhaustedError("quota"), server), HasSubstr("quota"));
  EXPECT_EQ(DescribeError(absl::InvalidArgumentError("d.csv: line 3: empty text"), server),
            "d.csv: line 3: empty text");
}

TEST_F(CommandsTest, ReportErrorPrintsOnlyFailures) {
  EXPECT_EQ(ReportError(env_, absl::OkStatus(), "s"), kExitOk);
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(ReportError(env_, absl::NotFoundError("task t"), "s"), kExitNotFound);
  EXPECT_EQ(err_.str(), "adapterctl: not found: task t\n");
}

// --- datasets ----------------------------------------------------------------------------

// The file goes to the server as it is; the server's reader (the fake reads
// with the same one) names the bad line, and nothing is stored.
TEST_F(CommandsTest, DatasetsUploadReportsTheReadersLineErrors) {
  DatasetsUploadArgs args;
  args.file = dir_.Write("bad.csv", "text,label\ngood,x\n\"unterminated,y\n");
  const absl::Status status = DatasetsUpload(env_, args);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad.csv: line 3: ")));
  EXPECT_EQ(ReportError(env_, status, server_->address()), kExitInvalidArgument);
  EXPECT_THAT(err_.str(), HasSubstr("line 3"));
  EXPECT_EQ(fake().CallsOf("UploadDataset").size(), 1u);
  // A file that cannot be read calls nothing.
  args.file = dir_.Sub("missing.csv");
  EXPECT_THAT(DatasetsUpload(env_, args), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(fake().CallsOf("UploadDataset").size(), 1u);
  EXPECT_THAT(ListDatasetIds(), ::testing::IsEmpty());
}

TEST_F(CommandsTest, DatasetsUploadUploadsAndPrintsTheDataset) {
  DatasetsUploadArgs args;
  args.file = dir_.Write("reviews.jsonl",
                         "{\"text\":\"a\",\"label\":\"pos\"}\n{\"text\":\"b\",\"label\":\"neg\"}\n"
                         "{\"text\":\"c\",\"label\":\"pos\"}\n");
  args.dataset_id = "reviews";
  ASSERT_OK(DatasetsUpload(env_, args));
  EXPECT_THAT(out_.str(), HasSubstr("reviews"));
  EXPECT_THAT(out_.str(), HasSubstr("neg=1 pos=2"));
  const auto uploads = fake().uploads();
  ASSERT_EQ(uploads.size(), 1u);
  EXPECT_EQ(uploads[0][0].metadata().dataset_id(), "reviews");
  EXPECT_EQ(uploads[0][0].metadata().display_name(), "reviews.jsonl");  // the base name
  // JSON output parses and keeps the proto field names.
  out_.str("");
  env_.json = true;
  ASSERT_OK(DatasetsGet(env_, "reviews"));
  const nlohmann::json doc = nlohmann::json::parse(out_.str());
  EXPECT_EQ(doc["dataset_id"], "reviews");
  EXPECT_EQ(doc["num_examples"], "3");  // int64 is a string in proto JSON
}

TEST_F(CommandsTest, DatasetsListFollowsPagesAndDeleteRemovesOne) {
  for (const char* id : {"a", "b", "c", "ds-00000000000000000ab.sentiment"}) {
    v1::Dataset d;
    d.set_dataset_id(id);
    d.set_num_examples(3);
    fake().AddDataset(d);
  }
  env_.json = true;
  ASSERT_OK(DatasetsList(env_));
  const nlohmann::json doc = nlohmann::json::parse(out_.str());
  ASSERT_EQ(doc["datasets"].size(), 4u) << out_.str();  // two pages of two
  EXPECT_EQ(doc["datasets"][3]["dataset_id"], "ds-00000000000000000ab.sentiment");
  out_.str("");
  env_.json = false;
  ASSERT_OK(DatasetsDelete(env_, "ds-00000000000000000ab.sentiment"));
  EXPECT_THAT(out_.str(), HasSubstr("deleted dataset ds-00000000000000000ab.sentiment"));
  // The minted id's task went along as the routing header.
  const auto calls = fake().calls();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().method, "DeleteDataset");
  EXPECT_EQ(calls.back().Metadata("x-task-id"), "sentiment");
  EXPECT_THAT(DatasetsDelete(env_, "ds-00000000000000000ab.sentiment"), StatusIs(absl::StatusCode::kNotFound));
  out_.str("");
  ASSERT_OK(DatasetsList(env_));
  EXPECT_THAT(out_.str(), Not(HasSubstr("sentiment")));
  EXPECT_THAT(out_.str(), HasSubstr("EXAMPLES"));
}

// --- train and jobs ---------------------------------------------------------------------

TEST_F(CommandsTest, TrainUploadsCreatesAndWatchesTheJobToSuccess) {
  SetUpJob(v1::JOB_STATE_SUCCEEDED);
  TrainArgs args;
  args.task_id = "sentiment";
  args.data_file = dir_.Write("train.csv", "text,label\ngood,pos\nbad,neg\n");
  args.validation_file = dir_.Write("val.jsonl", "{\"text\":\"fine\",\"label\":\"pos\"}\n");
  args.hyperparameters.set_epochs(2);
  ASSERT_OK(Train(env_, args));

  const auto uploads = fake().uploads();
  ASSERT_EQ(uploads.size(), 2u);
  const auto creates = fake().create_requests();
  ASSERT_EQ(creates.size(), 1u);
  const v1::CreateTrainingJobRequest& create = creates[0];
  EXPECT_EQ(create.task_id(), "sentiment");
  ASSERT_EQ(create.dataset_ids_size(), 1);
  EXPECT_EQ(create.dataset_ids(0), uploads[0][0].metadata().dataset_id());
  EXPECT_EQ(create.validation_dataset_id(), uploads[1][0].metadata().dataset_id());
  EXPECT_EQ(create.hyperparameters().epochs(), 2);
  EXPECT_FALSE(create.hyperparameters().has_learning_rate());
  EXPECT_EQ(create.request_id(), DefaultRequestId(create));
  EXPECT_EQ(create.task_kind(), v1::TASK_KIND_UNSPECIFIED);  // no --kind: the task's, or classification
  // The file goes as its bytes, under the id its SHA-256 gives.
  ASSERT_OK_AND_ASSIGN(const std::string train_bytes, ReadFileToString(args.data_file));
  EXPECT_EQ(create.dataset_ids(0), DatasetIdForFile(train_bytes));
  EXPECT_EQ(create.dataset_ids(0), absl::StrCat("data-", Sha256Hex(train_bytes).substr(0, 40)));
  EXPECT_EQ(uploads[0][0].metadata().file_format(), v1::DATASET_FORMAT_AUTO);
  std::string sent;
  for (size_t i = 1; i < uploads[0].size(); ++i) sent += uploads[0][i].file_bytes();
  EXPECT_EQ(sent, train_bytes);

  const auto watches = fake().CallsOf("WatchTrainingJob");
  ASSERT_EQ(watches.size(), 1u);
  EXPECT_EQ(watches[0].Metadata("x-task-id"), std::optional<std::string>("sentiment"));
  EXPECT_EQ(fake().watch_requests().at(0).job_id(), "job-42");
  const std::string out = out_.str();
  EXPECT_THAT(out, HasSubstr("state QUEUED (created)"));
  EXPECT_THAT(out, HasSubstr("epoch 1: train loss 0.5000, val loss 0.4000, val accuracy 80.0%"));
  EXPECT_THAT(out, HasSubstr("job job-42 SUCCEEDED: task sentiment version 1"));
  EXPECT_THAT(out, Not(HasSubstr("\r")));  // no live line when not a terminal
}

TEST_F(CommandsTest, TrainSendsTheKindAndItsNamesGoBothWays) {
  SetUpJob(v1::JOB_STATE_SUCCEEDED);
  TrainArgs args;
  args.task_id = "squad";
  args.data_file = dir_.Write("train.csv", "text,label\ngood,pos\nbad,neg\n");
  args.kind = v1::TASK_KIND_EXTRACTIVE_QA;
  ASSERT_OK(Train(env_, args));
  ASSERT_EQ(fake().create_requests().size(), 1u);
  EXPECT_EQ(fake().create_requests()[0].task_kind(), v1::TASK_KIND_EXTRACTIVE_QA);
  for (const auto& [name, kind] : kTaskKindFlags) EXPECT_EQ(TaskKindFlag(kind), name);
  EXPECT_EQ(TaskKindFlag(v1::TASK_KIND_UNSPECIFIED), "classification");
}

TEST_F(CommandsTest, TrainTwiceReusesTheUploadedDataAndTheRequestId) {
  SetUpJob(v1::JOB_STATE_SUCCEEDED);
  TrainArgs args;
  args.task_id = "sentiment";
  args.data_file = dir_.Write("train.csv", "text,label\ngood,pos\nbad,neg\n");
  args.detach = true;
  ASSERT_OK(Train(env_, args));
  ASSERT_OK(Train(env_, args));  // the fake now answers ALREADY_EXISTS for the dataset
  EXPECT_THAT(err_.str(), HasSubstr("already uploaded as dataset data-"));
  const auto creates = fake().create_requests();
  ASSERT_EQ(creates.size(), 2u);
  EXPECT_EQ(creates[0].request_id(), creates[1].request_id());
  EXPECT_EQ(creates[0].dataset_ids(0), creates[1].dataset_ids(0));
  EXPECT_THAT(out_.str(), HasSubstr("adapterctl jobs watch job-42"));
  EXPECT_TRUE(fake().CallsOf("WatchTrainingJob").empty());
  // Different hyperparameters are a different request.
  args.hyperparameters.set_seed(9);
  ASSERT_OK(Train(env_, args));
  EXPECT_NE(fake().create_requests().at(2).request_id(), creates[0].request_id());
}

TEST_F(CommandsTest, TrainNotesWhenTheDerivedRequestIdReplaysAFinishedJob) {
  v1::TrainingJob failed;
  failed.set_job_id("job-1");
  failed.set_state(v1::JOB_STATE_FAILED);
  fake().SetCreatedJob(failed);
  TrainArgs args;
  args.task_id = "sentiment";
  args.data_file = dir_.Write("train.csv", "text,label\ngood,pos\n");
  args.detach = true;
  ASSERT_OK(Train(env_, args));
  EXPECT_THAT(err_.str(), HasSubstr("already ran as job job-1 (FAILED); pass --request-id"));
  err_.str("");
  args.request_id = "mine";
  ASSERT_OK(Train(env_, args));
  EXPECT_THAT(err_.str(), Not(HasSubstr("--request-id")));
  EXPECT_EQ(fake().create_requests().at(1).request_id(), "mine");
}

TEST_F(CommandsTest, TrainWithABadFileCreatesNoJob) {
  TrainArgs args;
  args.task_id = "sentiment";
  args.data_file = dir_.Write("train.csv", "text,label\ngood,pos\nbad\n");
  EXPECT_THAT(Train(env_, args), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("train.csv: line 3: ")));
  EXPECT_TRUE(fake().create_requests().empty());
  EXPECT_THAT(ListDatasetIds(), ::testing::IsEmpty());
}

TEST_F(CommandsTest, WatchingAFailedOrCancelledJobGivesItsExitCode) {
  SetUpJob(v1::JOB_STATE_FAILED, "out of memory");
  absl::Status failed = JobsWatch(env_, "job-42");
  EXPECT_EQ(ExitCodeFor(failed), kExitJobFailed);
  EXPECT_THAT(DescribeError(failed, "s"), HasSubstr("job job-42 FAILED: out of memory"));

  SetUpJob(v1::JOB_STATE_CANCELLED, "cancelled by the user");
  absl::Status cancelled = JobsWatch(env_, "job-42");
  EXPECT_EQ(ExitCodeFor(cancelled), kExitJobCancelled);
  EXPECT_THAT(DescribeError(cancelled, "s"), HasSubstr("job job-42 was CANCELLED"));

  SetUpJob(v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(ExitCodeFor(JobsWatch(env_, "job-42")), kExitOk);
}

TEST_F(CommandsTest, WatchDrawsALiveProgressLineOnATerminal) {
  SetUpJob(v1::JOB_STATE_SUCCEEDED);
  env_.tty = true;
  ASSERT_OK(JobsWatch(env_, "job-42"));
  const std::string out = out_.str();
  EXPECT_THAT(out,
              HasSubstr("\r\x1b[KRUNNING  epoch 1/2  step 5/10 (50.0%)  loss 0.5000  val accuracy 80.0%  ETA 10s"));
  EXPECT_THAT(out, HasSubstr("SUCCEEDED"));
}

// The client shows the selection metric the server names, whatever it is:
// it keeps no table of kinds.
TEST(ProgressLine, ShowsTheSelectionMetricTheServerNames) {
  v1::EpochMetrics m;
  m.set_epoch(3);
  m.set_train_loss(0.5);
  m.set_val_loss(0.25);
  m.set_val_accuracy(0.75);  // not this kind's metric: not shown
  SetSelection(m, "kendall_tau", "val Kendall tau", -0.125, false);
  EXPECT_EQ(FormatEpochMetrics(m), "epoch 3: train loss 0.5000, val loss 0.2500, val Kendall tau -0.1250");
  SetSelection(m, "f1", "val SQuAD F1", 0.5, true);
  EXPECT_EQ(FormatEpochMetrics(m), "epoch 3: train loss 0.5000, val loss 0.2500, val SQuAD F1 50.0%");
}

TEST(ProgressLine, ShowsEpochStepLossAccuracyAndEta) {
  v1::TrainingJob job;
  job.set_state(v1::JOB_STATE_RUNNING);
  EXPECT_EQ(FormatProgressLine(job, 0.1, 0), "RUNNING");  // no progress yet
  job.set_started_at_micros(100'000'000);
  auto* p = job.mutable_progress();
  p->set_epoch(2);
  p->set_total_epochs(3);
  p->set_step(30);
  p->set_total_steps(90);
  // 30 steps in 60 s: 60 steps left take 120 s.
  EXPECT_EQ(FormatProgressLine(job, std::numeric_limits<double>::quiet_NaN(), 160'000'000),
            "RUNNING  epoch 2/3  step 30/90 (33.3%)  ETA 2m00s");
  job.mutable_best_metrics()->set_epoch(1);
  job.mutable_best_metrics()->set_train_loss(0.25);
  job.mutable_best_metrics()->set_val_accuracy(0.9);
  SetSelection(*job.mutable_best_metrics(), "val_accuracy", "val accuracy", 0.9, true);
  EXPECT_EQ(FormatProgressLine(job, 0.125, 160'000'000),
            "RUNNING  epoch 2/3  step 30/90 (33.3%)  loss 0.1250  val accuracy 90.0%  ETA 2m00s");
  EXPECT_EQ(FormatProgressLine(job, std::numeric_limits<double>::quiet_NaN(), 160'000'000),
            "RUNNING  epoch 2/3  step 30/90 (33.3%)  loss 0.2500  val accuracy 90.0%  ETA 2m00s");
}

TEST_F(CommandsTest, JobsListFollowsPagesWithAll) {
  std::vector<std::vector<v1::TrainingJob>> pages(3);
  for (int i = 0; i < 5; ++i) {
    v1::TrainingJob job;
    job.set_job_id(absl::StrCat("job-", i));
    job.set_task_id("t");
    job.set_state(v1::JOB_STATE_SUCCEEDED);
    pages[static_cast<size_t>(i) / 2].push_back(job);
  }
  fake().SetJobPages(pages);
  JobsListArgs args;
  ASSERT_OK(ParseJobState("succeeded").status());
  args.state = ParseJobState("succeeded").value();
  args.task_id = "t";
  ASSERT_OK(JobsList(env_, args));
  EXPECT_THAT(out_.str(), HasSubstr("job-1"));
  EXPECT_THAT(out_.str(), Not(HasSubstr("job-2")));
  EXPECT_THAT(err_.str(), HasSubstr("--page-token page-1"));

  out_.str("");
  args.all = true;
  ASSERT_OK(JobsList(env_, args));
  for (int i = 0; i < 5; ++i) EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("job-", i)));
  const auto requests = fake().list_jobs_requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_EQ(requests[1].page_token(), "");
  EXPECT_EQ(requests[2].page_token(), "page-1");
  EXPECT_EQ(requests[3].page_token(), "page-2");
  EXPECT_EQ(requests[3].state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(requests[3].task_id(), "t");
}

TEST(ParseJobStateTest, AcceptsShortAndFullNames) {
  EXPECT_EQ(ParseJobState("queued").value_or(v1::JOB_STATE_UNSPECIFIED), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(ParseJobState("RUNNING").value_or(v1::JOB_STATE_UNSPECIFIED), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(ParseJobState("JOB_STATE_CANCELLED").value_or(v1::JOB_STATE_UNSPECIFIED), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(ParseJobState("unspecified").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseJobState("done").status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("done")));
}

TEST_F(CommandsTest, JobsCancelAndGet) {
  ASSERT_OK(JobsCancel(env_, "job-9"));
  EXPECT_EQ(out_.str(), "job job-9 is CANCELLING\n");
  EXPECT_THAT(JobsGet(env_, "job-9"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("job-9")));
}

// --- tasks -------------------------------------------------------------------------------

TEST_F(CommandsTest, TasksExportWritesTheFileAndImportReadsIt) {
  const std::string bytes = std::string("\x00\x01safetensors\xff", 14);
  fake().SetExport(bytes, 2, 3);
  TasksExportArgs args;
  args.task_id = "sentiment";
  args.out_file = dir_.Sub("a.safetensors");
  ASSERT_OK(TasksExport(env_, args));
  std::ifstream in(args.out_file, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, bytes);
  EXPECT_THAT(err_.str(), HasSubstr("version 2 (14 bytes)"));

  ASSERT_OK(TasksImport(env_, {.task_id = "copy", .path = args.out_file}));
  const auto imports = fake().imports();
  ASSERT_EQ(imports.size(), 1u);
  std::string received;
  for (size_t i = 1; i < imports[0].size(); ++i) received += imports[0][i].chunk();
  EXPECT_EQ(received, bytes);
  EXPECT_THAT(out_.str(), HasSubstr("copy"));

  ASSERT_OK(TasksDelete(env_, "copy"));
  EXPECT_THAT(out_.str(), HasSubstr("deleted task copy"));
  EXPECT_THAT(TasksDelete(env_, "copy"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(CommandsTest, TasksListPrintsATableOrJson) {
  for (const char* id : {"alpha", "beta"}) {
    v1::Task task;
    task.set_task_id(id);
    task.set_state(v1::TASK_STATE_READY);
    task.add_labels("x");
    task.add_labels("y");
    task.set_current_version(2);
    fake().AddTask(task);
  }
  ASSERT_OK(TasksList(env_));
  EXPECT_THAT(out_.str(), ::testing::StartsWith("TASK "));
  EXPECT_THAT(out_.str(), HasSubstr("alpha"));
  EXPECT_THAT(out_.str(), HasSubstr("READY"));
  out_.str("");
  env_.json = true;
  ASSERT_OK(TasksList(env_));
  const nlohmann::json doc = nlohmann::json::parse(out_.str());
  ASSERT_EQ(doc["tasks"].size(), 2u);
  EXPECT_EQ(doc["tasks"][1]["task_id"], "beta");
}

// --- health ----------------------------------------------------------------------------

TEST_F(CommandsTest, HealthIsOkOnlyWhenServing) {
  ASSERT_OK(Health(env_));
  EXPECT_EQ(out_.str(), "SERVING\n");
  out_.str("");
  server_->SetServing(false);
  const absl::Status status = Health(env_);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("NOT_SERVING")));
  EXPECT_EQ(ExitCodeFor(status), kExitError);
  EXPECT_EQ(out_.str(), "NOT_SERVING\n");
}

}  // namespace
}  // namespace adapterd::client
