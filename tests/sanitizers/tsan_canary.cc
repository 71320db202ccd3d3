// tsan_canary: a deliberate data race in adapterd-shaped code, for the
// ThreadSanitizer run (scripts/sanitize.sh thread; tsan_canary_test runs it).
//
// The TSan run replaces Debian's abseil with an instrumented copy and
// suppresses reports from gRPC's and RocksDB's own threads
// (tests/sanitizers/tsan.supp). This program shows that what is left still
// sees a race in our code: a real gRPC server on 127.0.0.1 whose sync
// handler (the shape of every adapterd RPC) is entered by two calls at once.
//   1. guarded phase: both calls increment a counter under an absl::Mutex;
//      TSan must stay quiet (the instrumented absl::Mutex is visible);
//   2. racy phase: both calls increment a counter with no lock; TSan must
//      report a data race in RacyIncrement and, with halt_on_error=1, end
//      the process with its exit code 66.
// Each phase makes the two calls meet inside the handler (a barrier after
// the increment), so the two increments are never ordered by gRPC's own
// locks, whichever threads serve them.
// Prints "guarded phase done" after phase 1, "racy phase done" after 2.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/adapterd/v1/adapterd_service.grpc.pb.h"

namespace adapterd {
namespace {

absl::Mutex g_mu;
int g_guarded ABSL_GUARDED_BY(g_mu) = 0;
int g_racy = 0;  // deliberately unguarded

ABSL_ATTRIBUTE_NOINLINE void GuardedIncrement() {
  absl::MutexLock l(&g_mu);
  ++g_guarded;
}

ABSL_ATTRIBUTE_NOINLINE void RacyIncrement() { ++g_racy; }

class CanaryService final : public v1::Adapterd::Service {
 public:
  // The task id picks the phase; each phase's two calls meet at a barrier.
  grpc::Status GetTask(grpc::ServerContext*, const v1::GetTaskRequest* req, v1::Task*) override {
    absl::Barrier* meet = nullptr;
    if (req->task_id() == "guarded") {
      GuardedIncrement();
      meet = &guarded_meet_;
    } else {
      RacyIncrement();
      meet = &racy_meet_;
    }
    meet->Block();
    return grpc::Status::OK;
  }

 private:
  absl::Barrier guarded_meet_{2};
  absl::Barrier racy_meet_{2};
};

// Two concurrent calls of GetTask(task_id); true if both succeeded.
bool TwoCallsAtOnce(v1::Adapterd::Stub& stub, const std::string& task_id) {
  bool ok[2] = {false, false};
  std::vector<std::thread> callers;
  for (int i = 0; i < 2; ++i) {
    callers.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::GetTaskRequest req;
      req.set_task_id(task_id);
      v1::Task out;
      ok[i] = stub.GetTask(&ctx, req, &out).ok();
    });
  }
  for (std::thread& t : callers) t.join();
  return ok[0] && ok[1];
}

int Main() {
  CanaryService service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "tsan_canary: the server did not start\n");
    return 2;
  }
  auto stub = v1::Adapterd::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  if (!TwoCallsAtOnce(*stub, "guarded")) return 3;
  std::printf("guarded phase done\n");
  std::fflush(stdout);
  if (!TwoCallsAtOnce(*stub, "racy")) return 4;
  std::printf("racy phase done\n");
  std::fflush(stdout);
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace adapterd

int main() { return adapterd::Main(); }
