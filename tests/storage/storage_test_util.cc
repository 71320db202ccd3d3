#include "tests/storage/storage_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "storage/database.h"
#include "storage/rocks_status.h"

extern char** environ;

namespace adapterd::storage::testing {
namespace {

// A raw RocksDB handle on every column family of an existing database.
struct RawDb {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<std::string> names;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;

  ~RawDb() {
    if (db == nullptr) return;
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db->Close().PermitUncheckedError();
  }

  static absl::StatusOr<std::unique_ptr<RawDb>> Open(const std::string& path) {
    auto raw = std::make_unique<RawDb>();
    rocksdb::DBOptions options;
    RETURN_IF_ERROR(FromRocks(rocksdb::DB::ListColumnFamilies(options, path, &raw->names), "list column families"));
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const auto& n : raw->names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* db = nullptr;
    RETURN_IF_ERROR(FromRocks(rocksdb::DB::Open(options, path, descriptors, &raw->handles, &db), "raw open"));
    raw->db.reset(db);
    return raw;
  }

  absl::StatusOr<rocksdb::ColumnFamilyHandle*> Family(const std::string& name, bool create) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return handles[i];
    }
    if (!create) return absl::NotFoundError(absl::StrCat("no column family ", name));
    rocksdb::ColumnFamilyHandle* h = nullptr;
    RETURN_IF_ERROR(
        FromRocks(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), name, &h), "create column family"));
    names.push_back(name);
    handles.push_back(h);
    return h;
  }
};

}  // namespace

absl::Status RawPut(const std::string& path, const std::string& cf, const std::string& key, const std::string& value) {
  ASSIGN_OR_RETURN(auto raw, RawDb::Open(path));
  ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * h, raw->Family(cf, /*create=*/true));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return FromRocks(raw->db->Put(wo, h, key, value), "raw put");
}

absl::StatusOr<std::vector<std::string>> RawKeys(const std::string& path, const std::string& cf,
                                                 const std::string& prefix) {
  ASSIGN_OR_RETURN(auto raw, RawDb::Open(path));
  ASSIGN_OR_RETURN(rocksdb::ColumnFamilyHandle * h, raw->Family(cf, /*create=*/false));
  std::vector<std::string> out;
  std::unique_ptr<rocksdb::Iterator> it(raw->db->NewIterator(rocksdb::ReadOptions(), h));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    out.push_back(it->key().ToString());
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "raw scan"));
  return out;
}

std::string MakeAdapterBytes(const std::string& task_id, int64_t version, size_t size) {
  std::string header = absl::StrCat("adapter task=", task_id, " version=", version, "\n");
  const size_t digest_size = 64;
  std::string body;
  uint64_t x = 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(version) * 0x100000001B3ull;
  for (char c : task_id) x = (x ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  size_t body_size = size > header.size() + digest_size ? size - header.size() - digest_size : 0;
  body.resize(body_size);
  for (size_t i = 0; i < body_size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    body[i] = static_cast<char>(x & 0xFF);
  }
  std::string bytes = header + body;
  return bytes + Sha256Hex(bytes);
}

absl::Status CheckAdapterBytes(const std::string& bytes, const std::string& task_id, int64_t version) {
  const std::string header = absl::StrCat("adapter task=", task_id, " version=", version, "\n");
  if (bytes.size() < header.size() + 64 || bytes.compare(0, header.size(), header) != 0) {
    return absl::DataLossError(absl::StrCat("adapter bytes of ", task_id, " v", version, " have the wrong header"));
  }
  const std::string payload = bytes.substr(0, bytes.size() - 64);
  if (Sha256Hex(payload) != bytes.substr(bytes.size() - 64)) {
    return absl::DataLossError(absl::StrCat("adapter bytes of ", task_id, " v", version, " fail their checksum"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Child> Child::Start(const std::vector<std::string>& args, const std::string& stderr_path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> argv_storage;
  argv_storage.push_back(ADAPTERD_STORAGE_CRASH_CHILD);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return absl::InternalError(absl::StrCat("posix_spawn ", argv_storage[0], " failed: ", rc));
  }
  return Child(pid, fds[0], stderr_path);
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_), stdout_fd_(other.stdout_fd_), stderr_path_(std::move(other.stderr_path_)) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

Child::~Child() {
  if (pid_ > 0) KillAndWait();
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

absl::Status Child::WaitReady(int timeout_ms) {
  std::string got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got.find("ready\n") == std::string::npos) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      return absl::DeadlineExceededError(absl::StrCat("child not ready; stderr: ", Stderr()));
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[256];
    ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) {
      return absl::InternalError(absl::StrCat("child exited before ready; stderr: ", Stderr()));
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

int Child::KillAndWait() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  return status;
}

bool Child::TryWait(int* wait_status) {
  if (pid_ <= 0) return false;
  int r = ::waitpid(pid_, wait_status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

std::string Child::Stderr() const {
  std::ifstream in(stderr_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<PromotionResult> PromoteJobVersion(Database& db, Promotion p, v1::JobRecord job,
                                                  const v1::JobEvent& event, int64_t* event_seq) {
  p.task.set_current_job_id(job.job_id());
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_result_version(p.expected_version);
  Batch b;
  RETURN_IF_ERROR(b.Promote(std::move(p)));
  RETURN_IF_ERROR(b.PutJob(job));
  RETURN_IF_ERROR(b.AppendEvent(job.job_id(), event));
  RETURN_IF_ERROR(b.DeleteCheckpoint(job.job_id()));
  RETURN_IF_ERROR(db.Commit(b));
  if (event_seq != nullptr) *event_seq = b.committed_events().front().event.seq();
  return b.committed_promotions().front();
}

}  // namespace adapterd::storage::testing
