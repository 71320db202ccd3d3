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
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

#include "common/malloc_tuning.h"
#include "server/backup_tool.h"
#include "server/server.h"
#include "server/server_options.h"

int main(int argc, char** argv) {
  if (adapterd::IsBackupCommand(argc, argv)) return adapterd::RunBackupCommand(argc, argv);
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

  std::fprintf(stderr, "adapterd: %s\n", malloc_settings.c_str());
  const int drain_seconds = options->drain_seconds;
  absl::StatusOr<std::unique_ptr<adapterd::Server>> server = adapterd::Server::Start(*std::move(options));
  if (!server.ok()) {
    std::fprintf(stderr, "adapterd: failed to start: %s\n", server.status().ToString().c_str());
    return 1;
  }
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && (sig == SIGUSR1 || sig == SIGHUP)) {
    if (sig == SIGUSR1) {
      if (!(*server)->TriggerBackup()) std::fprintf(stderr, "adapterd: SIGUSR1 ignored: no --backup_dir\n");
      continue;
    }
    if (absl::Status s = (*server)->ReloadTenants(); s.ok()) {
      std::fprintf(stderr, "adapterd: SIGHUP: tenants file reloaded\n");
    } else {
      std::fprintf(stderr, "adapterd: SIGHUP: tenants file NOT reloaded, the previous one stays in force: %s\n",
                   std::string(s.message()).c_str());
    }
  }
  std::fprintf(stderr, "adapterd: %s received, shutting down (at most %d s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               drain_seconds);
  const absl::Time deadline = adapterd::PlanShutdown(absl::Now(), drain_seconds).deadline;
  absl::Notification stopped;
  std::thread watchdog([&stopped, deadline] {
    if (stopped.WaitForNotificationWithDeadline(deadline)) return;
    std::fprintf(stderr,
                 "adapterd: --drain_seconds passed before shutdown finished; exiting now (a running training "
                 "job resumes from its last checkpoint)\n");
    std::fflush(stderr);
    _exit(0);
  });
  (*server)->Shutdown();
  stopped.Notify();
  watchdog.join();
  std::fprintf(stderr, "adapterd: stopped cleanly\n");
  return 0;
}
