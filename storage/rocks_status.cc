#include "storage/rocks_status.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace adapterd::storage {

bool IsLockError(const rocksdb::Status& s) {
  if (!s.IsIOError()) return false;
  const std::string msg = s.ToString();
  // PosixFileSystem::LockFile: "While lock file: <db>/LOCK: ..." when another
  // process holds it, "lock hold by current process, ..." for a second handle.
  return absl::StrContains(msg, "While lock file") || absl::StrContains(msg, "lock hold by current process");
}

absl::Status DiskFullError() {
  return absl::ResourceExhaustedError("disk full: the server's storage has no space left; retry once space is freed");
}

absl::Status FromRocks(const rocksdb::Status& s, std::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string ctx(context);
  const std::string msg = absl::StrCat(ctx, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNoSpace()) {
    // The caller learns what happened and what to do; the paths (the
    // database's, RocksDB's file) go to the server's log only.
    LOG(ERROR) << "storage: " << msg;
    return DiskFullError();
  }
  if (IsLockError(s)) {
    return absl::FailedPreconditionError(absl::StrCat(ctx, ": locked by another process: ", s.ToString()));
  }
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut() || s.IsShutdownInProgress()) {
    return absl::UnavailableError(msg);
  }
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  if (s.IsAborted()) return absl::AbortedError(msg);
  return absl::InternalError(msg);
}

}  // namespace adapterd::storage
