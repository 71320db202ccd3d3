#include "common/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace adapterd {
namespace {

absl::Status ErrnoStatus(int err, const char* what, const std::string& path) {
  std::string msg = absl::StrCat(what, " '", path, "': ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// Closes a file descriptor on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  FdCloser closer{fd};
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", tmp);
  {
    FdCloser closer{fd};
    size_t done = 0;
    while (done < contents.size()) {
      ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::unlink(tmp.c_str());
        return ErrnoStatus(err, "cannot write", tmp);
      }
      done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoStatus(err, "cannot fsync", tmp);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, "cannot rename onto", path);
  }
  return absl::OkStatus();
}

absl::Status CheckSecretFileAccess(const std::string& path, const std::string& what,
                                   std::vector<std::string>* warnings) {
  auto mode = [](const struct stat& st) { return absl::StrFormat("%04o", st.st_mode & 07777); };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return absl::OkStatus();
  if ((st.st_mode & S_IWOTH) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(what, " ", path, " may be written by any user (mode ", mode(st),
                                                      "): anyone on the host could change it. Run: chmod o-w ", path));
  }
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  for (std::filesystem::path dir = full.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) == 0 && (ds.st_mode & S_IWOTH) != 0 && (ds.st_mode & S_ISVTX) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, " ", path, " lies in directory ", dir.string(), ", which any user may write (mode ", mode(ds),
          ", no sticky bit): anyone on the host could put another file in its place. Run: chmod o-w ", dir.string(),
          " (or chmod +t)"));
    }
    if (dir == dir.root_path()) break;
  }
  if ((st.st_mode & S_IROTH) != 0 && warnings != nullptr) {
    warnings->push_back(
        absl::StrCat(what, " ", path, " may be read by any user (mode ", mode(st), "). Run: chmod o-r ", path));
  }
  return absl::OkStatus();
}

bool PathIsWithin(const std::string& path, const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  const std::filesystem::path d = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
  if (ec) return false;
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return true;
}

absl::StatusOr<std::shared_ptr<const MappedFile>> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat", path);
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("not a regular file: '", path, "'"));
  }
  size_t size = static_cast<size_t>(st.st_size);
  const std::byte* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return ErrnoStatus(errno, "cannot mmap", path);
    data = static_cast<const std::byte*>(p);
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace adapterd
