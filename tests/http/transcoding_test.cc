// The REST/JSON mapping (server/http/transcoding.h): the route table covers
// every RPC once, paths and methods match as gRPC transcoding has them,
// query parameters and JSON bodies fill requests by the protobuf JSON
// mapping, and errors carry the standard HTTP status and a google.rpc.Status.
#include "server/http/transcoding.h"

#include <gmock/gmock.h>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "proto/adapterd/v1/adapterd_service.pb.h"

namespace adapterd::http {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

TEST(Routes, EveryRpcHasExactlyOneRoute) {
  const auto* service = v1::PredictRequest::descriptor()->file()->FindServiceByName("Adapterd");
  ASSERT_NE(service, nullptr);
  std::map<std::string, int> routes_of;
  for (const Route& r : Routes()) ++routes_of[r.rpc];
  ASSERT_EQ(routes_of.size(), static_cast<size_t>(service->method_count()));
  for (int i = 0; i < service->method_count(); ++i) {
    const auto* m = service->method(i);
    EXPECT_EQ(routes_of[m->name()], 1) << m->name();
    // Streaming shapes agree with the route's body and response kinds.
    for (const Route& r : Routes()) {
      if (r.rpc != m->name()) continue;
      EXPECT_EQ(m->client_streaming(), r.body == BodyKind::kDataset || r.body == BodyKind::kBytes) << r.rpc;
      EXPECT_EQ(m->server_streaming(), r.response != ResponseKind::kJson) << r.rpc;
      // The gateway serves every unary route generically from the method's
      // descriptor; its two server-stream handlers are typed for one method
      // each.
      if (r.response == ResponseKind::kEventStream) {
        EXPECT_STREQ(r.rpc, "WatchTrainingJob");
      }
      if (r.response == ResponseKind::kDownload) {
        EXPECT_STREQ(r.rpc, "ExportAdapter");
      }
    }
  }
}

TEST(Routes, NoTwoRoutesShareAMethodAndPattern) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const Route& r : Routes()) EXPECT_TRUE(seen.insert({r.method, r.pattern}).second) << r.pattern;
}

TEST(MatchRoute, PathVariablesAndCustomMethods) {
  RouteMatch m = MatchRoute("POST", "/v1/tasks/sentiment-2:predict");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->rpc, "Predict");
  EXPECT_THAT(m.variables, ElementsAre(Pair("task_id", "sentiment-2")));

  m = MatchRoute("GET", "/v1/tasks/sentiment-2");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->rpc, "GetTask");

  m = MatchRoute("DELETE", "/v1/tasks/sentiment-2");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->rpc, "DeleteTask");

  m = MatchRoute("GET", "/v1/trainingJobs/job-0123.t1:watch");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->rpc, "WatchTrainingJob");
  EXPECT_THAT(m.variables, ElementsAre(Pair("job_id", "job-0123.t1")));

  m = MatchRoute("GET", "/v1/tasks");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->rpc, "ListTasks");
  EXPECT_TRUE(m.variables.empty());
}

TEST(MatchRoute, WrongMethodsListWhatThePathAllows) {
  RouteMatch m = MatchRoute("GET", "/v1/tasks/t:predict");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allowed_methods, "POST");
  m = MatchRoute("PUT", "/v1/tasks/t");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allowed_methods, "GET, HEAD, DELETE");
  m = MatchRoute("DELETE", "/v1/datasets");
  EXPECT_EQ(m.allowed_methods, "POST, GET, HEAD");
  m = MatchRoute("HEAD", "/v1/tasks/t:predict");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.allowed_methods, "POST");
}

TEST(MatchRoute, HeadMatchesEveryGetRouteAndNoOther) {
  for (const Route& route : Routes()) {
    std::string path(route.pattern);
    for (size_t open; (open = path.find('{')) != std::string::npos;) path.replace(open, path.find('}') - open + 1, "x");
    const RouteMatch m = MatchRoute("HEAD", path);
    if (std::string_view(route.method) == "GET") {
      EXPECT_EQ(m.route, &route) << route.pattern;
    } else {
      EXPECT_NE(m.route, &route) << route.pattern;
    }
  }
}

TEST(MatchRoute, UnknownPathsMatchNothing) {
  for (const char* path : {"/v1/tasks/t:unknownverb", "/v1/tasks/", "/v1/tasks/a/b", "/v1/task", "/v2/tasks",
                           "/v1/tasks/:predict", "/v1/tasks/a:b:predict", "", "/"}) {
    RouteMatch m = MatchRoute("POST", path);
    EXPECT_EQ(m.route, nullptr) << path;
    m = MatchRoute("GET", path);
    EXPECT_EQ(m.route, nullptr) << path;
    EXPECT_EQ(m.allowed_methods, "") << path;
  }
}

TEST(SetFieldFromText, ProtoAndJsonNamesScalarsEnumsAndNesting) {
  v1::ListTrainingJobsRequest list;
  ASSERT_OK(SetFieldFromText(list, "pageSize", "7"));
  ASSERT_OK(SetFieldFromText(list, "page_token", "abc"));
  ASSERT_OK(SetFieldFromText(list, "state", "JOB_STATE_RUNNING"));
  ASSERT_OK(SetFieldFromText(list, "taskId", "t1"));
  EXPECT_EQ(list.page_size(), 7);
  EXPECT_EQ(list.page_token(), "abc");
  EXPECT_EQ(list.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(list.task_id(), "t1");
  ASSERT_OK(SetFieldFromText(list, "state", "4"));  // by number
  EXPECT_EQ(list.state(), v1::JOB_STATE_SUCCEEDED);

  v1::CreateTrainingJobRequest create;
  ASSERT_OK(SetFieldFromText(create, "hyperparameters.epochs", "3"));
  ASSERT_OK(SetFieldFromText(create, "hyperparameters.learningRate", "0.001"));
  ASSERT_OK(SetFieldFromText(create, "datasetIds", "a"));
  ASSERT_OK(SetFieldFromText(create, "dataset_ids", "b"));  // repeated: added
  EXPECT_EQ(create.hyperparameters().epochs(), 3);
  EXPECT_TRUE(create.hyperparameters().has_epochs());
  EXPECT_DOUBLE_EQ(create.hyperparameters().learning_rate(), 0.001);
  EXPECT_THAT(create.dataset_ids(), ElementsAre("a", "b"));

  v1::PredictRequest predict;
  ASSERT_OK(SetFieldFromText(predict, "returnAllScores", "true"));
  ASSERT_OK(SetFieldFromText(predict, "threshold", "0.25"));
  EXPECT_TRUE(predict.return_all_scores());
  EXPECT_FLOAT_EQ(predict.threshold(), 0.25f);
}

TEST(SetFieldFromText, ErrorsNameTheParameter) {
  v1::ListTasksRequest list;
  EXPECT_THAT(SetFieldFromText(list, "pageSise", "7"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown parameter 'pageSise'")));
  EXPECT_THAT(SetFieldFromText(list, "pageSize", "seven"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'pageSize': 'seven' is not a 32-bit integer")));
  EXPECT_THAT(SetFieldFromText(list, "pageSize", "99999999999"), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::ListTrainingJobsRequest jobs;
  EXPECT_THAT(SetFieldFromText(jobs, "state", "RUNNING"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a value of JobState")));
  v1::CreateTrainingJobRequest create;
  EXPECT_THAT(SetFieldFromText(create, "hyperparameters", "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names a message")));
  EXPECT_THAT(SetFieldFromText(create, "taskId.x", "1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a message field")));
  v1::PredictRequest predict;
  EXPECT_THAT(SetFieldFromText(predict, "returnAllScores", "yes"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SetFieldFromText(predict, "texts", "bad \xff utf-8"), StatusIs(absl::StatusCode::kInvalidArgument));
  v1::Dataset dataset;  // a map field cannot be set from text
  EXPECT_THAT(SetFieldFromText(dataset, "labelCounts", "1"), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(Json, BodiesFollowTheProtobufMappingAndRefuseUnknownFields) {
  v1::PredictRequest request;
  ASSERT_OK(ParseJsonBody(R"({"texts": ["a", "b"], "text_pairs": ["c"], "topKAnswers": 3})", request));
  EXPECT_THAT(request.texts(), ElementsAre("a", "b"));
  EXPECT_THAT(request.text_pairs(), ElementsAre("c"));
  EXPECT_EQ(request.top_k_answers(), 3);
  EXPECT_THAT(
      ParseJsonBody(R"({"txts": ["a"]})", request),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("invalid JSON body for adapterd.v1.PredictRequest")));
  EXPECT_THAT(ParseJsonBody(R"({"topKAnswers": "many"})", request), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseJsonBody(R"({"texts": [)", request), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseJsonBody("{\"texts\": [\"\xc3\x28\"]}", request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not valid UTF-8")));
}

// What protobuf's own parser accepts and the API does not: a scalar for a
// repeated field ({"texts": "x"} is not ["x"]), here and in nested
// messages, and nesting past 32 levels (a 100,000-deep array is refused,
// not read as empty texts), counted outside strings, at N and N+1.
TEST(Json, RepeatedFieldsTakeArraysAndNestingIsBounded) {
  v1::PredictRequest request;
  EXPECT_THAT(ParseJsonBody(R"({"texts": "x"})", request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'texts' must be an array")));
  EXPECT_THAT(ParseJsonBody(R"({"text_pairs": 3, "texts": ["a"]})", request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'text_pairs' must be an array")));
  v1::CreateTrainingJobRequest job;
  EXPECT_THAT(ParseJsonBody(R"({"taskId": "t", "datasetIds": "d"})", job),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'datasetIds' must be an array")));
  ASSERT_OK(ParseJsonBody(R"({"taskId": "t", "datasetIds": ["d"], "hyperparameters": {"epochs": 2}})", job));
  auto nested = [](int depth) {
    return absl::StrCat(R"({"texts": ["[[[ not nesting inside a string"], "x": )", std::string(depth - 1, '['),
                        std::string(depth - 1, ']'), "}");
  };
  // 32 levels (the object and 31 arrays): refused by protobuf as an unknown
  // field, not by the depth bound; 33: the bound.
  EXPECT_THAT(ParseJsonBody(nested(32), request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("for adapterd")));
  EXPECT_THAT(ParseJsonBody(nested(33), request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper than 32")));
  EXPECT_THAT(
      ParseJsonBody(absl::StrCat(R"({"texts": )", std::string(100000, '['), std::string(100000, ']'), "}"), request),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested deeper than 32")));
}

TEST(Json, ResponsesPrintDefaultsInt64AsStringsAndEnumsByName) {
  v1::TrainingJob job;
  job.set_job_id("j");
  job.set_result_version(12);
  job.set_state(v1::JOB_STATE_RUNNING);
  const nlohmann::json j = nlohmann::json::parse(ToJson(job));
  EXPECT_EQ(j["jobId"], "j");
  EXPECT_EQ(j["resultVersion"], "12");
  EXPECT_EQ(j["state"], "JOB_STATE_RUNNING");
  EXPECT_EQ(j["errorMessage"], "");  // a default, printed
  EXPECT_EQ(j["attempts"], 0);
  // And it reads back as the same message.
  v1::TrainingJob back;
  ASSERT_OK(ParseJsonBody(ToJson(job), back));
  EXPECT_EQ(back.SerializeAsString(), job.SerializeAsString());
}

TEST(GrpcTimeout, GrpcsFormatOnly) {
  const auto parsed = [](const char* value) {
    const absl::StatusOr<absl::Duration> d = ParseGrpcTimeout(value);
    EXPECT_TRUE(d.ok()) << value << ": " << d.status();
    return d.value_or(absl::ZeroDuration());
  };
  EXPECT_EQ(parsed("30S"), absl::Seconds(30));
  EXPECT_EQ(parsed("1500m"), absl::Milliseconds(1500));
  EXPECT_EQ(parsed("2H"), absl::Hours(2));
  EXPECT_EQ(parsed("5M"), absl::Minutes(5));
  EXPECT_EQ(parsed("7u"), absl::Microseconds(7));
  EXPECT_EQ(parsed("99999999n"), absl::Nanoseconds(99999999));
  for (const char* bad : {"", "S", "30", "30s", "-1S", "1.5S", "123456789S", " 30S", "30 S"}) {
    EXPECT_THAT(ParseGrpcTimeout(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

TEST(Errors, StandardHttpStatusOfEveryCode) {
  const std::map<absl::StatusCode, int> want = {
      {absl::StatusCode::kOk, 200},
      {absl::StatusCode::kCancelled, 499},
      {absl::StatusCode::kUnknown, 500},
      {absl::StatusCode::kInvalidArgument, 400},
      {absl::StatusCode::kDeadlineExceeded, 504},
      {absl::StatusCode::kNotFound, 404},
      {absl::StatusCode::kAlreadyExists, 409},
      {absl::StatusCode::kPermissionDenied, 403},
      {absl::StatusCode::kResourceExhausted, 429},
      {absl::StatusCode::kFailedPrecondition, 400},
      {absl::StatusCode::kAborted, 409},
      {absl::StatusCode::kOutOfRange, 400},
      {absl::StatusCode::kUnimplemented, 501},
      {absl::StatusCode::kInternal, 500},
      {absl::StatusCode::kUnavailable, 503},
      {absl::StatusCode::kDataLoss, 500},
      {absl::StatusCode::kUnauthenticated, 401},
  };
  for (const auto& [code, status] : want) EXPECT_EQ(HttpStatusFor(code), status) << absl::StatusCodeToString(code);
}

TEST(Errors, StatusJsonIsAGoogleRpcStatusInValidUtf8) {
  const nlohmann::json j = nlohmann::json::parse(StatusJson(absl::NotFoundError("task 'x\xff' not found")));
  EXPECT_EQ(j["code"], 5);
  EXPECT_EQ(j["message"], "task 'x\xef\xbf\xbd' not found");  // U+FFFD
  EXPECT_TRUE(j["details"].is_array());
  EXPECT_EQ(j.size(), 3u);
}

}  // namespace
}  // namespace adapterd::http
