// Small filesystem helpers with Status-returning APIs.
//
// Thread safety: every function is thread-compatible (no shared state).
// MappedFile is immutable after Open() and safe to read from many threads.
#ifndef ADAPTERD_COMMON_FILE_UTIL_H_
#define ADAPTERD_COMMON_FILE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace adapterd {

// Reads a whole file. NOT_FOUND if it does not exist, other errors name the
// path and errno text.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Writes `contents` to `path` atomically: a temp file in the same directory,
// fsync, then rename. Readers see either the old or the new file, never a
// partial one.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// Whether users other than the file's owner (and group) could replace or
// read a file that holds secrets (a tenants file, a peer secret).
// FAILED_PRECONDITION, naming the culprit and the chmod that fixes it, when
// any user may replace the file: it is world-writable, or a directory on its
// path is world-writable without the sticky bit (anyone could rename another
// file over it, or the directory itself). A line is added to `warnings` for
// a file any user may read. A missing file is OK here (reading it fails
// later with NOT_FOUND).
absl::Status CheckSecretFileAccess(const std::string& path, const std::string& what,
                                   std::vector<std::string>* warnings);

// True when `path` is `dir` or lies below it, after both are made absolute
// and the symbolic links of their existing parts resolved
// (std::filesystem::weakly_canonical), so "data/./db" and a link into `dir`
// count as inside.
bool PathIsWithin(const std::string& path, const std::string& dir);

// A read-only memory mapping of a whole file. The mapping lives as long as
// the MappedFile; share it with std::shared_ptr when tensors borrow its bytes.
class MappedFile {
 public:
  // Maps `path` read-only. An empty file gives an empty span (no mapping).
  static absl::StatusOr<std::shared_ptr<const MappedFile>> Open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::byte* data, size_t size) : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const std::byte* data_;
  size_t size_;
};

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_FILE_UTIL_H_
