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
// Shutdown (SIGTERM/SIGINT in main.cc, or Shutdown()): health NOT_SERVING;
// new calls UNAVAILABLE; in-flight Predicts drain; the running training job
// is checkpointed at its next step and left RUNNING so the next start resumes
// it; gRPC stops after at most drain_seconds; RocksDB closes cleanly.
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
#include "server/server_options.h"

namespace adapterd {

class Server {
 public:
  // Runs start-up steps 1-3. The returned server is SERVING.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();  // Shutdown() if still running

  // The bound ports (useful with port 0).
  int grpc_port() const;
  int metrics_port() const;  // 0 when metrics are off

  // Idempotent; blocks until the server has stopped.
  void Shutdown();
  // Blocks until Shutdown() has finished.
  void Wait();

  struct Parts;  // defined in server.cc

 private:
  explicit Server(ServerOptions options);
  absl::Status StartAll();

  ServerOptions options_;
  std::unique_ptr<Parts> parts_;
  absl::Mutex shutdown_mu_;  // serialises Shutdown()
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  absl::Notification stopped_;
};

}  // namespace adapterd

#endif  // ADAPTERD_SERVER_SERVER_H_
