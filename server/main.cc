// adapterd: flags -> ServerOptions -> Server (DESIGN.md section 1).
//
// SIGTERM and SIGINT start a graceful shutdown (server/server.h); a second
// signal during shutdown is ignored, so the drain is never cut short by a
// repeated Ctrl-C; use SIGKILL for that.
#include <csignal>
#include <cstdio>

#include "server/server.h"
#include "server/server_options.h"

int main(int argc, char** argv) {
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
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<adapterd::Server>> server = adapterd::Server::Start(*std::move(options));
  if (!server.ok()) {
    std::fprintf(stderr, "adapterd: failed to start: %s\n", server.status().ToString().c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "adapterd: %s received, shutting down\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown();
  std::fprintf(stderr, "adapterd: stopped cleanly\n");
  return 0;
}
