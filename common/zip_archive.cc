#include "common/zip_archive.h"

#include <zip.h>

#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/utf8.h"

namespace adapterd {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string ErrorText(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string message = zip_error_strerror(&error);
  zip_error_fini(&error);
  return message;
}

absl::Status OpenFailed(std::string_view what, int code, bool* not_a_zip) {
  if (not_a_zip != nullptr) *not_a_zip = code == ZIP_ER_NOZIP;
  return absl::InvalidArgumentError(absl::StrCat(Sv(what), " is not a readable zip archive (", ErrorText(code), ")"));
}

// Two-digit years and DOS time start in 1980; any fixed time will do.
constexpr time_t kFixedModificationTime = 946684800;  // 2000-01-01

}  // namespace

void ZipReader::Closer::operator()(struct zip* z) const { zip_discard(z); }

absl::StatusOr<ZipReader> ZipReader::FromBytes(std::string_view bytes, bool* not_a_zip) {
  if (not_a_zip != nullptr) *not_a_zip = false;
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &error);
  if (source == nullptr) {
    zip_error_fini(&error);
    return absl::ResourceExhaustedError("cannot wrap the bytes for libzip");
  }
  zip_t* z = zip_open_from_source(source, ZIP_RDONLY | ZIP_CHECKCONS, &error);
  if (z == nullptr) {
    const int code = zip_error_code_zip(&error);
    zip_error_fini(&error);
    zip_source_free(source);
    return OpenFailed("the file", code, not_a_zip);
  }
  zip_error_fini(&error);
  return ZipReader(z);
}

absl::StatusOr<ZipReader> ZipReader::Open(const std::string& path, bool* not_a_zip) {
  if (not_a_zip != nullptr) *not_a_zip = false;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return absl::NotFoundError(absl::StrCat(path, " not found"));
  int code = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (z == nullptr) return OpenFailed(path, code, not_a_zip);
  return ZipReader(z);
}

int64_t ZipReader::num_entries() const { return zip_get_num_entries(zip_.get(), 0); }

std::optional<std::string_view> ZipReader::Name(uint64_t index) const {
  const char* name = zip_get_name(zip_.get(), index, ZIP_FL_ENC_RAW);
  if (name == nullptr) return std::nullopt;
  return std::string_view(name);
}

std::optional<uint64_t> ZipReader::Locate(const std::string& name) const {
  const zip_int64_t index = zip_name_locate(zip_.get(), name.c_str(), ZIP_FL_ENC_RAW);
  if (index < 0) return std::nullopt;
  return static_cast<uint64_t>(index);
}

absl::StatusOr<uint64_t> ZipReader::Size(uint64_t index) const {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(zip_.get(), index, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot stat an entry: ", zip_strerror(zip_.get())));
  }
  return st.size;
}

absl::StatusOr<std::string> ZipReader::Read(uint64_t index, std::string_view name) const {
  ASSIGN_OR_RETURN(const uint64_t size, Size(index));
  zip_file_t* f = zip_fopen_index(zip_.get(), index, 0);
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot open '", ToValidUtf8(name), "': ", zip_strerror(zip_.get())));
  }
  std::string out(size, '\0');
  const zip_int64_t got = size == 0 ? 0 : zip_fread(f, out.data(), size);
  char extra = 0;
  const zip_int64_t more = zip_fread(f, &extra, 1);  // 0 at the end; completes the CRC check
  const bool ok = got == static_cast<zip_int64_t>(size) && more == 0;
  std::string why = ok ? "" : zip_file_strerror(f);
  zip_fclose(f);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("cannot read '", ToValidUtf8(name), "' (", why, ")"));
  return out;
}

absl::StatusOr<ZipFiles> ReadZipFiles(std::string_view bytes, const ZipFilesLimits& limits) {
  ASSIGN_OR_RETURN(const ZipReader zip, ZipReader::FromBytes(bytes));
  const int64_t entries = zip.num_entries();
  if (entries > limits.max_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("the archive holds ", entries, " entries; at most ", limits.max_entries, " are read"));
  }
  // Names and sizes first: nothing is inflated past the limit.
  std::vector<std::pair<uint64_t, std::string>> files;
  std::map<std::string, std::string, std::less<>> seen;  // base name -> full name
  uint64_t total = 0;
  for (int64_t i = 0; i < entries; ++i) {
    const uint64_t index = static_cast<uint64_t>(i);
    const std::optional<std::string_view> name = zip.Name(index);
    if (!name.has_value() || name->empty()) return absl::InvalidArgumentError("the archive has an unnamed entry");
    if (!IsValidUtf8(*name)) return absl::InvalidArgumentError("the archive has an entry whose name is not UTF-8");
    if (name->back() == '/') continue;  // a directory
    const size_t slash = name->rfind('/');
    std::string base(slash == std::string_view::npos ? *name : name->substr(slash + 1));
    if (auto [it, added] = seen.emplace(base, std::string(*name)); !added) {
      return absl::InvalidArgumentError(
          absl::StrCat("the archive holds two files named ", base, ": ", it->second, " and ", Sv(*name)));
    }
    ASSIGN_OR_RETURN(const uint64_t size, zip.Size(index));
    total += size;
    if (size > limits.max_total_bytes || total > limits.max_total_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("the archive's files exceed ", limits.max_total_bytes, " bytes uncompressed"));
    }
    files.emplace_back(index, std::move(base));
  }
  if (limits.reserve) RETURN_IF_ERROR(limits.reserve(total));
  ZipFiles out;
  for (auto& [index, base] : files) {
    ASSIGN_OR_RETURN(std::string contents, zip.Read(index, base));
    out.emplace(std::move(base), std::move(contents));
  }
  return out;
}

absl::StatusOr<std::string> WriteZipFiles(const ZipFiles& files) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  if (buffer == nullptr) {
    zip_error_fini(&error);
    return absl::ResourceExhaustedError("cannot create a zip buffer");
  }
  zip_t* z = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  if (z == nullptr) {
    zip_error_fini(&error);
    zip_source_free(buffer);
    return absl::InternalError(absl::StrCat("cannot start a zip archive: ", ErrorText(zip_error_code_zip(&error))));
  }
  zip_error_fini(&error);
  zip_source_keep(buffer);  // zip_close must leave the written bytes to us
  auto fail = [&](std::string_view what) {
    std::string message = absl::StrCat("cannot write the zip archive (", Sv(what), "): ", zip_strerror(z));
    zip_discard(z);
    zip_source_free(buffer);
    return absl::InternalError(message);
  };
  for (const auto& [name, contents] : files) {
    zip_source_t* s = zip_source_buffer(z, contents.data(), contents.size(), 0);
    if (s == nullptr) return fail(name);
    const zip_int64_t index = zip_file_add(z, name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(s);
      return fail(name);
    }
    const auto i = static_cast<zip_uint64_t>(index);
    if (zip_set_file_compression(z, i, ZIP_CM_DEFLATE, 0) != 0 ||
        zip_file_set_mtime(z, i, kFixedModificationTime, 0) != 0) {
      return fail(name);
    }
  }
  if (zip_close(z) != 0) return fail("closing");
  // The archive is in `buffer` now.
  std::string out;
  if (zip_source_open(buffer) != 0) {
    zip_source_free(buffer);
    return absl::InternalError("cannot read back the written zip archive");
  }
  zip_source_seek(buffer, 0, SEEK_END);
  const zip_int64_t size = zip_source_tell(buffer);
  zip_source_seek(buffer, 0, SEEK_SET);
  out.resize(static_cast<size_t>(size < 0 ? 0 : size));
  const zip_int64_t got = out.empty() ? 0 : zip_source_read(buffer, out.data(), out.size());
  zip_source_close(buffer);
  zip_source_free(buffer);
  if (size < 0 || got != size) return absl::InternalError("cannot read back the written zip archive");
  return out;
}

}  // namespace adapterd
