// Helpers shared by the storage tests: temp dirs, raw RocksDB access (to
// plant corrupt records), self-checking adapter bytes, and child processes.
#ifndef ADAPTERD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
#define ADAPTERD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/testing/temp_dir.h"
#include "proto/adapterd/storage/v1/records.pb.h"
#include "storage/batch.h"
#include "storage/database.h"

namespace adapterd::storage::testing {

using ::adapterd::testing::TempDir;

// Opens the (closed) database at `path` directly with RocksDB, with all of its
// column families, and writes or deletes one key. `cf` is a column family name;
// a missing one is created.
absl::Status RawPut(const std::string& path, const std::string& cf, const std::string& key, const std::string& value);
// Every key of column family `cf` that starts with `prefix`, in order.
absl::StatusOr<std::vector<std::string>> RawKeys(const std::string& path, const std::string& cf,
                                                 const std::string& prefix);

// Adapter bytes that name their task and version and end with a checksum, so
// that a torn or mixed-up value is detected. size >= 128.
std::string MakeAdapterBytes(const std::string& task_id, int64_t version, size_t size);
// OK iff `bytes` is exactly what MakeAdapterBytes(task_id, version, ...) made.
absl::Status CheckAdapterBytes(const std::string& bytes, const std::string& task_id, int64_t version);

// The batch training::JobManager::Complete commits, for storage's tests of
// its atomicity: promotion `p` (its expected_version set), `job` updated to
// SUCCEEDED with result_version = that version, `event` appended to its log
// (its seq into `*event_seq` when given), and its checkpoint deleted. All or
// nothing.
absl::StatusOr<PromotionResult> PromoteJobVersion(Database& db, Promotion p, v1::JobRecord job,
                                                  const v1::JobEvent& event, int64_t* event_seq = nullptr);

// A child process running tests/storage/crash_child.cc, its stdout on a pipe
// and its stderr in a file.
class Child {
 public:
  // Starts the helper with `args` (after the program name).
  static absl::StatusOr<Child> Start(const std::vector<std::string>& args, const std::string& stderr_path);
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();  // SIGKILLs and reaps the child if still running

  // Waits (bounded) for the line "ready" on the child's stdout.
  absl::Status WaitReady(int timeout_ms);
  // SIGKILLs the child and reaps it; returns its wait status.
  int KillAndWait();
  // Reaps the child if it exited; true with `*wait_status` set if it did.
  bool TryWait(int* wait_status);
  // The child's stderr so far.
  std::string Stderr() const;

 private:
  Child(int pid, int stdout_fd, std::string stderr_path)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_path_(std::move(stderr_path)) {}
  int pid_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
};

}  // namespace adapterd::storage::testing

#endif  // ADAPTERD_TESTS_STORAGE_STORAGE_TEST_UTIL_H_
