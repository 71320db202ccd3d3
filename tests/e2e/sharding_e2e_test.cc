// Scale-out through one address (docs/DEPLOYMENT.md, "Scale-out"): three real
// adapterd replicas with --peers, and Debian's nginx running the repository's
// router configuration (deploy/k8s/router/adapterd-router.conf, laid out by
// tests/deploy/k8s/render_router.sh), all on 127.0.0.1. Every step of the
// README walkthrough goes through the router's single address with the real
// adapterctl; each task lives on exactly one replica; a stopped replica's
// tasks answer UNAVAILABLE while the others serve, and serve again after a
// restart; a task moves between replicas with export/import. Each replica's
// REST gateway calls through the router (--http_grpc_target), so an HTTP
// call made to any replica reaches the replica of its task.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"
#include "tests/e2e/server_fixture.h"

namespace adapterd::e2e {
namespace {

using ::testing::HasSubstr;

constexpr int kReplicas = 3;
constexpr int kTasks = 12;
constexpr int kExitNotFound = 4;  // adapterctl's exit codes (client/commands.h)
constexpr int kExitUnavailable = 9;
const char kNginx[] = "/usr/sbin/nginx";

std::string TaskName(int i) { return absl::StrFormat("task-%02d", i); }

// A raw call straight to a replica (bypassing the router), with exactly the
// metadata given: what a client that does not set x-task-id sends.
std::unique_ptr<v1::Adapterd::Stub> StubAt(int port) {
  return v1::Adapterd::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
}

std::unique_ptr<grpc::ClientContext> Context(const std::map<std::string, std::string>& metadata) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  for (const auto& [k, v] : metadata) ctx->AddMetadata(k, v);
  return ctx;
}

class ShardingTest : public ServerProcessTest {
 protected:
  void SetUp() override {
    for (int i = 0; i < kReplicas; ++i) {
      absl::StatusOr<int> port = PickFreePort();
      ASSERT_TRUE(port.ok()) << port.status();
      ports_.push_back(*port);
      peers_.push_back(absl::StrCat("127.0.0.1:", *port));
    }
    // The replicas' shared secret, private as a key file must be.
    secret_file_ = dir_.Sub("peer-secret");
    {
      std::ofstream f(secret_file_);
      f << "shard-secret-of-this-test-0123456789\n";
    }
    ASSERT_EQ(::chmod(secret_file_.c_str(), 0600), 0);
    // The router's port first: the replicas' HTTP gateways call through it.
    absl::StatusOr<int> router_port = PickFreePort();
    ASSERT_TRUE(router_port.ok()) << router_port.status();
    router_port_ = *router_port;
    replicas_.resize(kReplicas);
    http_ports_.resize(kReplicas);
    for (int i = 0; i < kReplicas; ++i) ASSERT_NO_FATAL_FAILURE(StartReplica(i));
    ASSERT_NO_FATAL_FAILURE(StartRouter());
    // A small, balanced dataset: the test is about where calls go, not accuracy.
    std::ifstream in(Example("sentiment_train.csv"));
    std::ofstream out(dir_.Sub("small.csv"));
    std::string line;
    for (int n = 0; n < 61 && std::getline(in, line); ++n) out << line << "\n";
  }

  void StartReplica(int i) {
    std::vector<std::string> argv = {kAdapterd,
                                     "--listen",
                                     peers_[i],
                                     "--metrics_listen",
                                     "127.0.0.1:0",
                                     "--data_dir",
                                     dir_.Sub(absl::StrCat("replica-", i)),
                                     "--model_dir",
                                     model_root_->Sub("model"),
                                     "--threads",
                                     "1",
                                     "--max_queue_delay_us",
                                     "500",
                                     "--peers",
                                     absl::StrJoin(peers_, ","),
                                     "--peer_secret_file",
                                     secret_file_,
                                     "--http_listen",
                                     "127.0.0.1:0",
                                     "--http_grpc_target",
                                     absl::StrCat("127.0.0.1:", router_port_)};
    auto p = Process::Start(argv, dir_.Sub(absl::StrCat("replica-", i, ".", ++starts_, ".log")));
    ASSERT_TRUE(p.ok()) << p.status();
    replicas_[i] = std::make_unique<Process>(*std::move(p));
    Process& r = *replicas_[i];
    const bool up = PollUntil([&] { return !r.running() || r.Log().find("SERVING on port") != std::string::npos; },
                              absl::Minutes(3));
    ASSERT_TRUE(up && r.running()) << "replica " << i << " did not start:\n" << r.Log();
    http_ports_[i] = PortFromLog(r.Log(), "HTTP");
    ASSERT_NE(http_ports_[i], 0) << r.Log();
  }

  void StartRouter() {
    grpc_port_ = router_port_;  // Ctl() goes through the router
    std::vector<std::string> render = {kSourceDir + "/tests/deploy/k8s/render_router.sh", dir_.Sub("router"),
                                       absl::StrCat(router_port_)};
    render.insert(render.end(), peers_.begin(), peers_.end());
    absl::StatusOr<CommandResult> r = RunCommand(render, absl::Seconds(30));
    ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
    auto p = Process::Start(
        {kNginx, "-c", dir_.Sub("router/nginx.conf"), "-e", dir_.Sub("router/error.log"), "-g", "daemon off;"},
        dir_.Sub("nginx.log"));
    ASSERT_TRUE(p.ok()) << p.status();
    router_ = std::make_unique<Process>(*std::move(p));
    const bool up = PollUntil([&] { return !router_->running() || Ctl({"health"}).exit_code == 0; }, absl::Seconds(30),
                              absl::Milliseconds(200));
    ASSERT_TRUE(up && router_->running()) << "router did not start:\n" << router_->Log();
  }

  // nginx's master must stop gracefully (SIGQUIT): SIGKILLed alone, it would
  // leave its worker listening.
  void TearDown() override {
    // A failed test says what became of each replica: a list that a replica
    // "did not answer" is either a replica that exited or one its peers had
    // not reconnected to, and the logs are gone with the test's directory.
    if (HasFailure()) {
      for (size_t i = 0; i < replicas_.size(); ++i) {
        if (!replicas_[i]) continue;
        const std::string log = replicas_[i]->Log();
        std::cerr << "replica " << i << " (" << peers_[i] << ") is "
                  << (replicas_[i]->running() ? "running" : "NOT running") << "; the end of its log:\n"
                  << log.substr(log.size() > 3000 ? log.size() - 3000 : 0) << "\n";
      }
    }
    if (router_) {
      router_->Signal(SIGQUIT);
      EXPECT_TRUE(router_->Wait(absl::Seconds(15)).ok()) << "nginx did not stop";
    }
    for (auto& r : replicas_) {
      if (r && r->running()) r->Signal(SIGTERM);
    }
    for (auto& r : replicas_) {
      if (r) (void)r->Wait(absl::Seconds(30));
    }
  }

  // The replica that holds `task` (asked directly, bypassing the router);
  // fails unless exactly one does.
  int OwnerOf(const std::string& task) {
    int owner = -1;
    for (int i = 0; i < kReplicas; ++i) {
      const CommandResult r = CtlAt(ports_[i], {"tasks", "get", task});
      if (r.exit_code == 0) {
        EXPECT_EQ(owner, -1) << task << " is on replicas " << owner << " and " << i;
        owner = i;
      } else {
        EXPECT_EQ(r.exit_code, kExitNotFound) << task << " on replica " << i << ": " << r.err;
      }
    }
    EXPECT_NE(owner, -1) << task << " is on no replica";
    return owner;
  }

  std::vector<int> ports_;
  std::vector<std::string> peers_;
  std::string secret_file_;
  std::vector<std::unique_ptr<Process>> replicas_;
  // A REST call to replica `i`'s HTTP port: its JSON, after checking the
  // status.
  nlohmann::json Http(int i, const std::string& method, const std::string& path, const std::string& body = "",
                      int status = 200, const HttpHeaders& headers = {{"Content-Type", "application/json"}}) {
    absl::StatusOr<HttpResponse> r = HttpRequest(http_ports_[i], method, path, body, headers, absl::Minutes(2));
    EXPECT_TRUE(r.ok()) << method << " " << path << ": " << r.status();
    if (!r.ok()) return nlohmann::json();
    EXPECT_EQ(r->status, status) << method << " " << path << " on replica " << i << ": " << r->body;
    return nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  }

  std::unique_ptr<Process> router_;
  int router_port_ = 0;
  std::vector<int> http_ports_;
};

TEST_F(ShardingTest, EveryWalkthroughStepWorksThroughOneAddress) {
  // Train 12 tasks through the router: the upload carries the task, the job
  // is created on the task's replica, and each job id carries its task, so
  // `jobs watch` and `jobs get` reach the right replica too.
  std::map<std::string, std::string> job_of;
  for (int i = 0; i < kTasks; ++i) {
    const nlohmann::json job = CtlJson(
        {"train", "--detach", "--task", TaskName(i), "--data", dir_.Sub("small.csv"), "--epochs", "1", "--seed", "3"});
    ASSERT_TRUE(job.contains("job_id")) << job.dump();
    job_of[TaskName(i)] = job["job_id"].get<std::string>();
  }
  for (const auto& [task, job_id] : job_of) {
    const CommandResult watch = Ctl({"jobs", "watch", job_id}, "", 600);
    ASSERT_EQ(watch.exit_code, 0) << task << ": " << watch.err << watch.out;
    const nlohmann::json job = CtlJson({"jobs", "get", job_id});
    EXPECT_EQ(job["state"], "JOB_STATE_SUCCEEDED") << job.dump();
    EXPECT_EQ(job["task_id"], task);
  }

  // Each task lives on exactly one replica, and the tasks are spread.
  std::map<std::string, int> owner;
  std::set<int> used;
  for (int i = 0; i < kTasks; ++i) {
    owner[TaskName(i)] = OwnerOf(TaskName(i));
    used.insert(owner[TaskName(i)]);
  }
  EXPECT_GE(used.size(), 2u) << "12 tasks hashed to one replica";

  std::map<std::string, nlohmann::json> scores;
  for (int i = 0; i < kTasks; ++i) {
    scores[TaskName(i)] = CtlJson(PredictArgs(TaskName(i)))["predictions"];
    ASSERT_EQ(scores[TaskName(i)].size(), 2u);
  }

  // Lists answer for every replica, through any of them, with paging.
  const nlohmann::json tasks = CtlJson({"tasks", "list"});
  std::set<std::string> listed;
  for (const auto& t : tasks["tasks"]) listed.insert(t["task_id"].get<std::string>());
  EXPECT_EQ(listed.size(), static_cast<size_t>(kTasks)) << tasks.dump();
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_EQ(CtlJsonAt(ports_[i], {"tasks", "list"})["tasks"].size(), static_cast<size_t>(kTasks)) << i;
  }
  const nlohmann::json jobs = CtlJson({"jobs", "list", "--all", "--page-size", "5"});
  std::vector<std::string> job_ids;
  for (const auto& j : jobs["jobs"]) job_ids.push_back(j["job_id"].get<std::string>());
  EXPECT_EQ(job_ids.size(), static_cast<size_t>(kTasks)) << jobs.dump();
  EXPECT_TRUE(std::is_sorted(job_ids.begin(), job_ids.end())) << "merged pages are in id (creation) order";
  EXPECT_EQ(std::set<std::string>(job_ids.begin(), job_ids.end()).size(), job_ids.size()) << "a job listed twice";
  const CommandResult first_page = Ctl({"jobs", "list", "--page-size", "5"});
  EXPECT_THAT(first_page.err, HasSubstr("--page-token"));

  // A dataset uploaded for a task gets an id that carries the task: `datasets
  // get` with just the id reaches the task's replica.
  const nlohmann::json ds = CtlJson({"datasets", "upload", "--task", TaskName(5), dir_.Sub("small.csv")});
  const std::string ds_id = ds["dataset_id"].get<std::string>();
  EXPECT_THAT(ds_id, HasSubstr(TaskName(5)));
  EXPECT_EQ(CtlJson({"datasets", "get", ds_id})["dataset_id"], ds_id);
  EXPECT_EQ(CtlAt(ports_[owner[TaskName(5)]], {"datasets", "get", ds_id}).exit_code, 0) << "stored on the owner";

  // Export, import and delete through the router.
  const std::string file = dir_.Sub("task-00.safetensors");
  ASSERT_EQ(Ctl({"tasks", "export", TaskName(0), "--out", file}).exit_code, 0);
  ASSERT_EQ(Ctl({"tasks", "import", "task-00-copy", file}).exit_code, 0);
  EXPECT_EQ(CtlJson(PredictArgs("task-00-copy"))["predictions"], scores[TaskName(0)]);
  ASSERT_EQ(Ctl({"tasks", "delete", "task-00-copy"}).exit_code, 0);
  EXPECT_EQ(Ctl({"tasks", "get", "task-00-copy"}).exit_code, kExitNotFound);

  // A replica dies: its tasks answer UNAVAILABLE (never NOT_FOUND from
  // another replica), the others keep serving, lists refuse to be partial.
  const int dead = owner[TaskName(0)];
  replicas_[dead]->Signal(SIGKILL);
  ASSERT_TRUE(replicas_[dead]->Wait(absl::Seconds(30)).ok());
  for (int i = 0; i < kTasks; ++i) {
    const std::string task = TaskName(i);
    std::vector<std::string> args = PredictArgs(task);
    args.insert(args.begin(), "--json");
    const CommandResult r = Ctl(args);
    if (owner[task] == dead) {
      EXPECT_EQ(r.exit_code, kExitUnavailable) << task << ": " << r.err << r.out;
    } else {
      ASSERT_EQ(r.exit_code, 0) << task << ": " << r.err;
      EXPECT_EQ(nlohmann::json::parse(r.out)["predictions"], scores[task]) << task;
    }
  }
  const CommandResult partial = Ctl({"tasks", "list"});
  EXPECT_EQ(partial.exit_code, kExitUnavailable) << partial.out;
  EXPECT_THAT(partial.err, HasSubstr("did not answer"));

  // It comes back on its volume: its tasks serve the same scores again, and
  // lists are whole again once the other replicas have reconnected to it
  // (their reconnect backoff is capped at 1 s).
  ASSERT_NO_FATAL_FAILURE(StartReplica(dead));
  for (int i = 0; i < kTasks; ++i) {
    EXPECT_EQ(CtlJson(PredictArgs(TaskName(i)))["predictions"], scores[TaskName(i)]) << TaskName(i);
  }
  EXPECT_TRUE(PollUntil(
      [&] {
        return Ctl({"tasks", "list"}).exit_code == 0;
      },
      absl::Seconds(30), absl::Milliseconds(250)));
  EXPECT_EQ(CtlJson({"tasks", "list"})["tasks"].size(), static_cast<size_t>(kTasks));

  // Straight to the replicas: a call about a task without its x-task-id (or
  // with another task's) is refused by every replica, saying what the header
  // must be, so that it cannot act on whichever replica it reached (an import
  // copied onto each, a job training task A on B's replica).
  const std::string file00 = dir_.Sub("task-00.safetensors");
  std::string adapter;
  {
    std::ifstream in(file00, std::ios::binary);
    adapter.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(adapter.empty());
  for (int i = 0; i < kReplicas; ++i) {
    auto stub = StubAt(ports_[i]);
    for (const std::map<std::string, std::string>& md :
         {std::map<std::string, std::string>{}, std::map<std::string, std::string>{{"x-task-id", "other"}}}) {
      auto ctx = Context(md);
      v1::Task task;
      auto writer = stub->ImportAdapter(ctx.get(), &task);
      v1::ImportAdapterRequest m;
      m.mutable_metadata()->set_task_id("split-x");
      writer->Write(m);
      m.set_chunk(adapter);
      writer->Write(m);
      writer->WritesDone();
      const grpc::Status s = writer->Finish();
      EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << i << ": " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr("x-task-id: split-x"));
    }
    v1::PredictRequest p;
    p.set_task_id(TaskName(2));
    p.add_texts("a fine film");
    v1::PredictResponse pr;
    auto ctx = Context({});
    EXPECT_EQ(stub->Predict(ctx.get(), p, &pr).error_code(), grpc::StatusCode::FAILED_PRECONDITION) << i;
    v1::CreateTrainingJobRequest c;
    c.set_task_id(TaskName(3));
    c.add_dataset_ids(ds_id);
    v1::TrainingJob job;
    auto cctx = Context({{"x-task-id", TaskName(4)}});
    EXPECT_EQ(stub->CreateTrainingJob(cctx.get(), c, &job).error_code(), grpc::StatusCode::FAILED_PRECONDITION) << i;
    v1::GetTrainingJobRequest g;
    g.set_job_id(job_of[TaskName(3)]);
    auto gctx = Context({});
    EXPECT_EQ(stub->GetTrainingJob(gctx.get(), g, &job).error_code(), grpc::StatusCode::FAILED_PRECONDITION) << i;
    // An upload must say which task it is for.
    v1::Dataset uploaded;
    auto uctx = Context({});
    auto up = stub->UploadDataset(uctx.get(), &uploaded);
    v1::UploadDatasetRequest um;
    um.mutable_metadata()->set_display_name("no task");
    up->Write(um);
    up->WritesDone();
    EXPECT_EQ(up->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION) << i;
  }
  for (int i = 0; i < kReplicas; ++i) {
    EXPECT_EQ(CtlAt(ports_[i], {"tasks", "get", "split-x"}).exit_code, kExitNotFound) << "a copy on replica " << i;
  }
  // The shard-local header, from an outside client without the replicas'
  // secret, is ignored: the list is the whole one, never one shard's.
  for (const char* forged : {"1", "shard-secret-of-this-test-0123456788"}) {
    auto stub = StubAt(ports_[0]);
    v1::ListTasksRequest lr;
    lr.set_page_size(100);
    v1::ListTasksResponse lt;
    auto ctx = Context({{"x-adapterd-shard-local", forged}});
    ASSERT_TRUE(stub->ListTasks(ctx.get(), lr, &lt).ok());
    EXPECT_EQ(lt.tasks_size(), kTasks) << forged;
  }
  // Datasets are listed across replicas too, and deleted through the router.
  const nlohmann::json datasets = CtlJson({"datasets", "list"});
  std::set<std::string> dataset_ids;
  for (const auto& d : datasets["datasets"]) dataset_ids.insert(d["dataset_id"].get<std::string>());
  EXPECT_TRUE(dataset_ids.count(ds_id)) << datasets.dump();
  ASSERT_EQ(Ctl({"datasets", "delete", ds_id}).exit_code, 0);
  EXPECT_EQ(Ctl({"datasets", "get", ds_id}).exit_code, kExitNotFound);

  // Move a task between replicas (rebalancing): export from its owner,
  // import into another, delete from the owner; the scores move with it.
  const std::string moved = TaskName(1);
  const int from = owner[moved];
  const int to = (from + 1) % kReplicas;
  const std::string moved_file = dir_.Sub("moved.safetensors");
  ASSERT_EQ(CtlAt(ports_[from], {"tasks", "export", moved, "--out", moved_file}).exit_code, 0);
  ASSERT_EQ(CtlAt(ports_[to], {"tasks", "import", moved, moved_file}).exit_code, 0);
  ASSERT_EQ(CtlAt(ports_[from], {"tasks", "delete", moved}).exit_code, 0);
  EXPECT_EQ(OwnerOf(moved), to);
  EXPECT_EQ(CtlJsonAt(ports_[to], PredictArgs(moved))["predictions"], scores[moved]);
  EXPECT_EQ(CtlJson({"tasks", "list"})["tasks"].size(), static_cast<size_t>(kTasks)) << "listed once, after the move";
}

TEST_F(ShardingTest, HttpCallsReachTheTasksReplicaThroughAnyReplica) {
  // Each task is uploaded, trained, watched and predicted over HTTP, each
  // step through a different replica's gateway: the path's task id, the
  // task in a minted job or dataset id, a job's task_id or the X-Task-Id
  // header goes on as x-task-id, and the router sends the call to the task's
  // replica.
  constexpr int kHttpTasks = 6;
  std::ifstream in(dir_.Sub("small.csv"));
  const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> job_of;
  for (int t = 0; t < kHttpTasks; ++t) {
    const std::string task = absl::StrCat("http-", t);
    const nlohmann::json ds =
        Http(t % kReplicas, "POST", "/v1/datasets", csv, 200, {{"Content-Type", "text/csv"}, {"X-Task-Id", task}});
    const std::string ds_id = ds.value("datasetId", "");
    EXPECT_THAT(ds_id, HasSubstr(task));
    // The dataset by its id alone, through another replica.
    EXPECT_EQ(Http((t + 1) % kReplicas, "GET", "/v1/datasets/" + ds_id).value("datasetId", ""), ds_id);
    const nlohmann::json job = Http(
        (t + 1) % kReplicas, "POST", "/v1/trainingJobs",
        nlohmann::json({{"taskId", task}, {"datasetIds", {ds_id}}, {"hyperparameters", {{"epochs", 1}, {"seed", "3"}}}})
            .dump());
    job_of[task] = job.value("jobId", "");
  }
  for (const auto& [task, job_id] : job_of) {
    const bool done = PollUntil(
        [&] {
          const nlohmann::json job = Http(2, "GET", "/v1/trainingJobs/" + job_id);
          return job.value("state", "") == "JOB_STATE_SUCCEEDED" || job.value("state", "") == "JOB_STATE_FAILED";
        },
        absl::Minutes(5), absl::Milliseconds(100));
    ASSERT_TRUE(done) << job_id;
    EXPECT_EQ(Http(0, "GET", "/v1/trainingJobs/" + job_id).value("state", ""), "JOB_STATE_SUCCEEDED");
  }
  std::set<int> used;
  for (const auto& [task, job_id] : job_of) used.insert(OwnerOf(task));
  EXPECT_GE(used.size(), 2u) << "6 tasks hashed to one replica";

  // Every replica answers every task, identically; lists cover all replicas.
  const std::string texts = R"({"texts": ["a wonderful film", "a dull film"], "returnAllScores": true})";
  for (const auto& [task, job_id] : job_of) {
    const nlohmann::json want = Http(0, "POST", "/v1/tasks/" + task + ":predict", texts);
    EXPECT_EQ(want["predictions"].size(), 2u) << want.dump();
    for (int i = 1; i < kReplicas; ++i) EXPECT_EQ(Http(i, "POST", "/v1/tasks/" + task + ":predict", texts), want);
  }
  std::set<std::string> listed;
  const nlohmann::json tasks = Http(1, "GET", "/v1/tasks?pageSize=100");
  for (const auto& t : tasks["tasks"]) listed.insert(t["taskId"].get<std::string>());
  for (const auto& [task, job_id] : job_of) EXPECT_TRUE(listed.contains(task)) << task << " in " << tasks.dump();

  // Export through one replica, import under a new id through another: it
  // lands on its own replica, and answers as the original.
  absl::StatusOr<HttpResponse> file =
      HttpRequest(http_ports_[0], "GET", "/v1/tasks/http-0:export", "", {}, absl::Minutes(1));
  ASSERT_TRUE(file.ok() && file->status == 200) << (file.ok() ? file->body : file.status().ToString());
  Http(1, "POST", "/v1/tasks/http-0-copy:import", file->body, 200, {{"Content-Type", "application/octet-stream"}});
  OwnerOf("http-0-copy");
  EXPECT_EQ(Http(2, "POST", "/v1/tasks/http-0-copy:predict", texts),
            Http(2, "POST", "/v1/tasks/http-0:predict", texts));
  Http(2, "DELETE", "/v1/tasks/http-0-copy", "", 200, {});
  Http(0, "GET", "/v1/tasks/http-0-copy", "", 404, {});
}

}  // namespace
}  // namespace adapterd::e2e
