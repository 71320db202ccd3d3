// adapterd: flags -> ServerOptions -> Server (docs/ARCHITECTURE.md, "server/api and
// the process").
//
// SIGTERM and SIGINT start a graceful shutdown (server/server.h); a second
// signal during shutdown is ignored, so the drain is never cut short by a
// repeated Ctrl-C; use SIGKILL for that. --drain_seconds bounds the whole
// shutdown: should it still be running at the deadline (a training step
// longer than the budget), a watchdog ends the process there. Every state
// change is already durable (synced WAL), so that exit loses nothing: the
// running job resumes from its last checkpoint, as after a crash.
//
// SIGHUP re-reads --tenants_file (keys and quotas; server.h ReloadTenants):
// a revoked key fails from the next call. A file that does not load leaves
// the old table in force, and the error is logged. SIGUSR1 starts a backup.
#include <grpc/support/log.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <string_view>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "server/backup_tool.h"
#include "server/http/transcoding.h"
#include "server/server.h"
#include "server/server_options.h"

namespace {

// gRPC's own messages (gpr_log) join the process log, in its format.
void LogGrpcMessage(gpr_log_func_args* args) {
  const google::LogSeverity severity =
      args->severity == GPR_LOG_SEVERITY_ERROR ? google::GLOG_ERROR : google::GLOG_INFO;
  google::LogMessage(args->file, args->line, severity).stream() << "grpc: " << args->message;
}

}  // namespace

int main(int argc, char** argv) {
  if (adapterd::IsBackupCommand(argc, argv)) return adapterd::RunBackupCommand(argc, argv);
  // `adapterd http-routes`: the REST routes the gateway serves, one per line
  // ("METHOD PATTERN RPC"), as docs/openapi.yaml must list them.
  if (argc == 2 && std::string_view(argv[1]) == "http-routes") {
    for (const adapterd::http::Route& r : adapterd::http::Routes())
      std::printf("%s %s %s\n", r.method, r.pattern, r.rpc);
    return 0;
  }
  const std::string malloc_settings = adapterd::KeepLargeBuffersOnTheHeap();
  int exit_code = 0;
  absl::StatusOr<adapterd::ServerOptions> options = adapterd::ParseServerFlags(argc, argv, &exit_code);
  if (!options.ok()) {
    if (exit_code != 0 && !absl::IsCancelled(options.status())) {
      std::fprintf(stderr, "adapterd: %s\n", std::string(options.status().message()).c_str());
    }
    return exit_code;
  }
  // Block the shutdown signals in every thread (threads inherit the mask);
  // this thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  adapterd::InitLogging(argv[0], *adapterd::ParseLogFormat(options->process.log_format));
  gpr_set_log_function(LogGrpcMessage);
  LOG(INFO) << malloc_settings;
  const int drain_seconds = options->process.drain_seconds;
  absl::StatusOr<std::unique_ptr<adapterd::Server>> server = adapterd::Server::Start(*std::move(options));
  if (!server.ok()) {
    LOG(ERROR) << "failed to start: " << server.status();
    return 1;
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && (sig == SIGUSR1 || sig == SIGHUP)) {
    if (sig == SIGUSR1) {
      if (!(*server)->TriggerBackup()) LOG(WARNING) << "SIGUSR1 ignored: no --backup_dir";
      continue;
    }
    if (absl::Status s = (*server)->ReloadTenants(); s.ok()) {
      LOG(INFO) << "SIGHUP: tenants file reloaded";
    } else {
      LOG(ERROR) << "SIGHUP: tenants file NOT reloaded, the previous one stays in force: " << s.message();
    }
  }
  LOG(INFO) << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << " received, shutting down (at most " << drain_seconds
            << " s)";
  const absl::Time deadline = adapterd::PlanShutdown(absl::Now(), drain_seconds).deadline;
  absl::Notification stopped;
  std::thread watchdog([&stopped, deadline] {
    if (stopped.WaitForNotificationWithDeadline(deadline)) return;
    LOG(WARNING) << "--drain_seconds passed before shutdown finished; exiting now (a running training job resumes "
                    "from its last checkpoint)";
    google::FlushLogFiles(google::GLOG_INFO);
    std::fflush(stderr);
    _exit(0);
  });
  (*server)->Shutdown();
  stopped.Notify();
  watchdog.join();
  LOG(INFO) << "stopped cleanly";
  return 0;
}
