// Server: the adapterd process, assembled from its modules.
//
// Start-up order (each step fails fast with a clear Status):
//   1. open RocksDB under <data_dir>/db (a database locked by another process
//      is FAILED_PRECONDITION), load the tenants file, start /metrics;
//   2. start the gRPC server: grpc.health.v1 answers NOT_SERVING and every
//      adapterd call is UNAVAILABLE ("starting") until step 3 is done;
//   3. load the encoder and tokenizer, create the serving engine, the job
//      queue (recovering jobs that were RUNNING or QUEUED) and the job runner;
//      health becomes SERVING.
//
// Shutdown (SIGTERM/SIGINT in main.cc, or Shutdown()), bounded by
// drain_seconds (PlanShutdown): health NOT_SERVING; new calls and open
// watches UNAVAILABLE; the running training job is asked to stop at its next
// step (checkpointed and left RUNNING, so the next start resumes it); calls
// in flight may finish until the calls deadline (client streams until the
// earlier streams deadline, then UNAVAILABLE), after which gRPC cancels what
// remains; refusals are held back briefly while gRPC stops (ShutdownPlan); the trainer is joined and RocksDB closes
// cleanly. A training step that outlasts the budget is the one wait Shutdown() cannot cut short; main.cc then exits at
// the deadline anyway (the job resumes from its last checkpoint, as after a crash).
//
// Thread safety: Start/Shutdown/Wait from one controlling thread; Shutdown
// may also be called from a signal-handling thread while Wait() blocks.
#ifndef ADAPTERD_SERVER_SERVER_H_
#define ADAPTERD_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/server_options.h"

namespace adapterd {

// The deadlines of one shutdown that starts at `start`:
//   streams_deadline  client streams stop taking messages (UNAVAILABLE);
//   calls_deadline    gRPC cancels calls still in flight;
//   deadline          start + drain_seconds: the process has exited.
// Each step gets min(1 s, drain_seconds / 4) before the next.
//
// `hold` (min(100 ms, that step / 4)) keeps clients from calling while gRPC
// stops: gRPC 1.51 answers CANCELLED, which clients do not retry, to a call
// that reaches it in that instant (grpc/grpc issue 41785). Once the calls
// admitted before the drain are done, refusals are held back for 2 x hold
// and gRPC stops after 1 x hold, so a client that waits for its answer is
// waiting, not calling, while gRPC stops; its next call finds gRPC gone
// (UNAVAILABLE).
struct ShutdownPlan {
  absl::Time streams_deadline;
  absl::Time calls_deadline;
  absl::Time deadline;
  absl::Duration hold;
};
ShutdownPlan PlanShutdown(absl::Time start, int drain_seconds);

class Server {
 public:
  // Runs start-up steps 1-3. The returned server is SERVING.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();  // Shutdown() if still running

  // The bound ports (useful with port 0).
  int grpc_port() const;
  int metrics_port() const;  // 0 when metrics are off
  int http_port() const;     // 0 when --http_listen is off

  // Idempotent; blocks until the server has stopped.
  void Shutdown();
  // Blocks until Shutdown() has finished.
  void Wait();
  // Starts a database backup now (asynchronously) when --backup_dir is set;
  // false when backups are off.
  bool TriggerBackup();
  // Re-reads --tenants_file (adapterd does on SIGHUP): on success the new
  // keys and quotas apply from the next call; on error (the file's, see
  // api::TenantRegistry::Reload) the old table stays in force.
  absl::Status ReloadTenants();

  struct Parts;  // defined in server.cc

 private:
  explicit Server(ServerOptions options);
  // Start's steps, in order; each fills its parts (server.cc).
  absl::Status StartAll();
  absl::Status OpenStorage();         // database, tenants, metrics endpoint
  absl::Status StartGrpc();           // TLS, peers, the service, listening NOT_SERVING
  absl::Status StartHttp();           // the REST/JSON gateway and console (--http_listen)
  absl::Status StartServingEngine();  // batcher, executor, adapter cache, pins
  absl::Status StartTraining();       // job queue and runner (not started yet)
  absl::Status CreateBackend();
  void StartBackgroundWork();  // backups, heap release

  ServerOptions options_;
  std::unique_ptr<Parts> parts_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown()
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Notification stopped_;
};

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_SERVER_H_
