#include "common/file_util.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "common/testing/status_matchers.h"
#include "common/testing/temp_dir.h"

namespace adapterd {
namespace {

using ::adapterd::testing::StatusIs;
using ::testing::HasSubstr;

TEST(FileUtil, WriteAtomicallyThenReadRoundTrips) {
  const ::adapterd::testing::TempDir tmp("file_util");
  std::string dir = tmp.path();
  std::string path = dir + "/f.bin";
  std::string payload(
      "a\0b\xff"
      "end",
      7);
  ASSERT_OK(WriteFileAtomically(path, payload));
  ASSERT_OK_AND_ASSIGN(std::string back, ReadFileToString(path));
  EXPECT_EQ(back, payload);
  // Overwrite replaces the whole file and leaves no temp file behind.
  ASSERT_OK(WriteFileAtomically(path, "x"));
  ASSERT_OK_AND_ASSIGN(back, ReadFileToString(path));
  EXPECT_EQ(back, "x");
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);
}

TEST(FileUtil, MissingFileIsNotFoundNamingThePath) {
  EXPECT_THAT(ReadFileToString("/nonexistent/adapterd/x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/adapterd/x")));
  EXPECT_THAT(MappedFile::Open("/nonexistent/adapterd/y"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/adapterd/y")));
}

TEST(FileUtil, WriteIntoMissingDirectoryFails) {
  EXPECT_THAT(WriteFileAtomically("/nonexistent/adapterd/z", "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("/nonexistent/adapterd/z")));
}

TEST(FileUtil, MappedFileSeesTheBytesAndEmptyFileIsEmpty) {
  const ::adapterd::testing::TempDir tmp("file_util");
  std::string dir = tmp.path();
  ASSERT_OK(WriteFileAtomically(dir + "/a", "hello"));
  ASSERT_OK(WriteFileAtomically(dir + "/empty", ""));
  ASSERT_OK_AND_ASSIGN(auto m, MappedFile::Open(dir + "/a"));
  ASSERT_EQ(m->bytes().size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(m->bytes().data()), 5), "hello");
  ASSERT_OK_AND_ASSIGN(auto e, MappedFile::Open(dir + "/empty"));
  EXPECT_TRUE(e->bytes().empty());
  EXPECT_THAT(MappedFile::Open(dir), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

TEST(FileUtil, Sha256MatchesKnownVectors) {
  // FIPS 180-2 test vectors.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(FileUtil, PathIsWithinSeesThroughDotsAndLinks) {
  const ::adapterd::testing::TempDir tmp("file_util");
  const std::string dir = tmp.path();
  ASSERT_TRUE(std::filesystem::create_directories(dir + "/data/db"));
  EXPECT_TRUE(PathIsWithin(dir + "/data/db", dir + "/data"));
  EXPECT_TRUE(PathIsWithin(dir + "/data", dir + "/data/"));
  EXPECT_TRUE(PathIsWithin(dir + "/data/./db/../db/backups", dir + "/data"));  // need not exist
  EXPECT_FALSE(PathIsWithin(dir + "/data-backups", dir + "/data"));            // a prefix is not a parent
  EXPECT_FALSE(PathIsWithin(dir + "/backups", dir + "/data"));
  std::filesystem::create_directory_symlink(dir + "/data/db", dir + "/link");
  EXPECT_TRUE(PathIsWithin(dir + "/link/x", dir + "/data"));
}

TEST(FileUtil, ASecretFileOthersCouldReplaceIsRefused) {
  const ::adapterd::testing::TempDir tmp("file_util");
  const std::string dir = std::filesystem::weakly_canonical(tmp.path()).string();
  const std::string sub = dir + "/conf";
  ASSERT_EQ(::mkdir(sub.c_str(), 0700), 0);
  const std::string file = sub + "/secret";
  ASSERT_OK(WriteFileAtomically(file, "s"));
  std::vector<std::string> warnings;
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  EXPECT_OK(CheckSecretFileAccess(file, "secret", &warnings));
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  EXPECT_OK(CheckSecretFileAccess(file, "secret", &warnings));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("chmod o-r"));
  ASSERT_EQ(::chmod(file.c_str(), 0602), 0);
  EXPECT_THAT(CheckSecretFileAccess(file, "secret", nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("chmod o-w " + file)));
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(sub.c_str(), 0757), 0);
  EXPECT_THAT(CheckSecretFileAccess(file, "secret", nullptr),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("chmod o-w " + sub)));
  ASSERT_EQ(::chmod(sub.c_str(), 01757), 0);  // sticky, as /tmp
  EXPECT_OK(CheckSecretFileAccess(file, "secret", nullptr));
  EXPECT_OK(CheckSecretFileAccess(sub + "/missing", "secret", nullptr));
}

}  // namespace
}  // namespace adapterd
