// Test helper process for crash_recovery_test: opens the database in argv[1],
// submits a training job unless one exists, and runs jobs until none is left.
// After the N-th durable checkpoint (argv[3]) it creates the marker file
// argv[2], so the parent can SIGKILL it mid-training.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "server/training/job_manager.h"
#include "server/training/job_runner.h"
#include "tests/training/training_fixture.h"

using namespace adapterd;                     // NOLINT
using namespace adapterd::training::testing;  // NOLINT

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s DB_DIR MARKER CHECKPOINTS_BEFORE_MARKER\n", argv[0]);
    return 2;
  }
  const std::string marker = argv[2];
  const int marker_after = std::atoi(argv[3]);
  auto encoder = FixtureEncoder();
  auto tokenizer = FixtureTokenizer();
  auto db = storage::Database::Open({.path = argv[1]});
  if (!db.ok()) {
    std::fprintf(stderr, "open: %s\n", db.status().ToString().c_str());
    return 1;
  }
  training::Hyperparameters defaults;
  defaults.epochs = 3;
  defaults.bottleneck_size = 16;
  defaults.max_seq_len = 32;
  defaults.learning_rate = 3e-3;
  defaults.checkpoint_every_steps = 2;
  auto queue = training::JobManager::Create(
      {.db = db->get(), .validator = training::MakeJobValidator(db->get(), tokenizer.get(), {}, defaults)});
  if (!queue.ok()) return 1;
  auto existing = (*db)->jobs().List({});
  if (existing.ok() && existing->jobs.empty()) {
    if (!PutPresenceDataset(**db, "acme", "ds", 400, 1, 21).ok()) return 1;
    training::JobRequest req;
    req.tenant = "acme";
    req.task_id = "crashy";
    req.dataset_ids = {"ds"};
    req.max_queued_for_tenant = 1;
    if (!(*queue)->Submit(req).ok()) return 1;
  }
  int checkpoints = 0;
  auto runner = training::JobRunner::Create({.jobs = queue->get(),
                                             .db = db->get(),
                                             .encoder = encoder.get(),
                                             .tokenizer = tokenizer.get(),
                                             .defaults = defaults,
                                             .after_checkpoint = [&](const storage::v1::CheckpointRecord&) {
                                               if (++checkpoints == marker_after)
                                                 ::close(::open(marker.c_str(), O_CREAT | O_WRONLY, 0644));
                                             }});
  if (!runner.ok()) return 1;
  while ((*runner)->RunNext(absl::ZeroDuration()).code() != absl::StatusCode::kNotFound) {
  }
  return 0;
}
