// TempDir: a fresh directory for one test, removed (recursively) when the
// object is destroyed. Shared by every test suite.
//
// The directory is created under $TEST_TMPDIR when set (ctest and Bazel-style
// runners), else under the system temp directory, as
// "<root>/adapterd_<tag>_XXXXXX". Creation failure aborts the test binary:
// every test that asks for one needs it.
//
// Thread safety: none needed (owned by one test).
#ifndef ADAPTERD_COMMON_TESTING_TEMP_DIR_H_
#define ADAPTERD_COMMON_TESTING_TEMP_DIR_H_

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace adapterd::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    const char* root = std::getenv("TEST_TMPDIR");
    std::string tmpl =
        (root != nullptr && *root != '\0') ? std::string(root) : std::filesystem::temp_directory_path().string();
    tmpl += "/adapterd_" + tag + "_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror(("mkdtemp " + tmpl).c_str());
      std::abort();
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // The path of `name` inside the directory (not created).
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  // Writes `contents` (binary) to Sub(name) and returns that path; aborts
  // when the write fails.
  std::string Write(const std::string& name, const std::string& contents) const {
    std::string path = Sub(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
    out.close();
    if (!out) {
      std::perror(("write " + path).c_str());
      std::abort();
    }
    return path;
  }

 private:
  std::string path_;
};

}  // namespace adapterd::testing

#endif  // ADAPTERD_COMMON_TESTING_TEMP_DIR_H_
