// The one place where rocksdb::Status becomes absl::Status (docs/ARCHITECTURE.md, "Conventions in force").
//
// Thread safety: pure function.
#ifndef ADAPTERD_STORAGE_ROCKS_STATUS_H_
#define ADAPTERD_STORAGE_ROCKS_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/status.h"

namespace adapterd::storage {

// Maps a RocksDB status to an absl::Status whose message is
// "<context>: <rocksdb message>":
//   OK                              -> OK
//   NotFound                        -> NOT_FOUND
//   Corruption                      -> DATA_LOSS
//   IOError(NoSpace)                -> DiskFullError() (the detail is logged)
//   IOError on the LOCK file        -> FAILED_PRECONDITION ("locked by another process")
//   Busy, TryAgain, TimedOut,
//   ShutdownInProgress              -> UNAVAILABLE
//   InvalidArgument                 -> INVALID_ARGUMENT
//   Aborted                         -> ABORTED
//   anything else (other IOErrors, NotSupported, Incomplete, ...) -> INTERNAL
absl::Status FromRocks(const rocksdb::Status& s, std::string_view context);

// RESOURCE_EXHAUSTED "disk full: ..." as callers see it: what happened and
// what to do, no server paths (those go to the server's log).
absl::Status DiskFullError();

// True for the IOError RocksDB returns when the database's LOCK file is held
// (by another process, or by another open handle in this process).
bool IsLockError(const rocksdb::Status& s);

}  // namespace adapterd::storage

#endif  // ADAPTERD_STORAGE_ROCKS_STATUS_H_
