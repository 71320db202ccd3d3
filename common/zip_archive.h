// Zip archives through libzip (Debian's libzip4): reading one held in memory
// or in a file, entry by entry with sizes checked before anything is read,
// and writing a small one in memory. What uses them: the torch.save reader
// (server/model/torch_archive.h: a torch.save file is a zip), and AdapterHub
// adapter directories, which travel to ImportAdapter (and back from
// ExportAdapter) as one zip of their files (docs/ADAPTER_FORMAT.md).
//
// Errors: INVALID_ARGUMENT naming the entry for a malformed archive, an entry
// whose bytes do not match its stored size or CRC, and ReadZipFiles' limits;
// RESOURCE_EXHAUSTED when libzip cannot allocate.
//
// Thread safety: a ZipReader is used by one thread at a time (libzip's
// archive handle is not thread-safe); the free functions are thread-safe.
#ifndef ADAPTERD_COMMON_ZIP_ARCHIVE_H_
#define ADAPTERD_COMMON_ZIP_ARCHIVE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

struct zip;  // libzip's zip_t

namespace adapterd {

class ZipReader {
 public:
  // Opens an archive over `bytes`, which must outlive the reader (they are
  // not copied). `not_a_zip`, when given, is set when the bytes are no zip
  // archive at all (as opposed to a damaged one), so that a caller can say
  // what else they might be.
  static absl::StatusOr<ZipReader> FromBytes(std::string_view bytes, bool* not_a_zip = nullptr);
  // The same for the file at `path` (NOT_FOUND when there is none).
  static absl::StatusOr<ZipReader> Open(const std::string& path, bool* not_a_zip = nullptr);

  int64_t num_entries() const;
  // Entry `index`'s name as stored (raw bytes; may be any bytes: callers
  // that print it must make it valid UTF-8); nullopt when it has none.
  std::optional<std::string_view> Name(uint64_t index) const;
  // The index of the entry named exactly `name`; nullopt when absent.
  std::optional<uint64_t> Locate(const std::string& name) const;
  // The uncompressed size the archive records for entry `index`.
  absl::StatusOr<uint64_t> Size(uint64_t index) const;
  // Entry `index`'s bytes: exactly Size(index) of them, CRC checked. `name`
  // is for messages only.
  absl::StatusOr<std::string> Read(uint64_t index, std::string_view name) const;

 private:
  struct Closer {
    void operator()(struct zip* z) const;
  };
  explicit ZipReader(struct zip* z) : zip_(z) {}
  std::unique_ptr<struct zip, Closer> zip_;
};

// An archive's files: name -> contents.
using ZipFiles = std::map<std::string, std::string, std::less<>>;

struct ZipFilesLimits {
  int64_t max_entries = 64;
  // Largest sum of the entries' uncompressed sizes (checked against the
  // sizes the archive records before any entry is inflated).
  uint64_t max_total_bytes = 64ull << 20;
  // When set, called once with that sum after the checks above and before
  // any entry is inflated (to account for the memory the files will take);
  // an error from it is returned as it is, with nothing inflated.
  std::function<absl::Status(uint64_t total_bytes)> reserve;
};

// Every file of a zip held in memory, by its name with any directory part
// removed (a zip of "dir/a.json" gives "a.json": `zip -r` of a directory
// and of its contents read alike). Directory entries are skipped.
// INVALID_ARGUMENT for two files of one base name, an empty or non-UTF-8
// name, and anything over `limits`.
absl::StatusOr<ZipFiles> ReadZipFiles(std::string_view bytes, const ZipFilesLimits& limits = {});

// A zip of `files` (deflated; entries in name order, with a fixed
// modification time so that equal files give equal archives).
absl::StatusOr<std::string> WriteZipFiles(const ZipFiles& files);

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_ZIP_ARCHIVE_H_
