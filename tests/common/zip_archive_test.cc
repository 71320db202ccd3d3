// ReadZipFiles / WriteZipFiles: a directory's files through one zip and back,
// with archives written by Python's zipfile (an outside writer) read alike,
// and every malformed or oversized archive refused before it is inflated.
#include "common/zip_archive.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/subprocess.h"
#include "common/testing/temp_dir.h"

namespace adapterd {
namespace {

using ::adapterd::testing::RunProgram;
using ::adapterd::testing::StatusIs;
using ::adapterd::testing::TempDir;
using ::testing::HasSubstr;

TEST(ZipFiles, WrittenFilesReadBackEqualAndTheArchiveIsDeterministic) {
  ZipFiles files = {{"adapter_config.json", R"({"a": 1})"},
                    {"pytorch_adapter.bin", std::string(100000, '\x07') + std::string("\x00\xff", 2)},
                    {"empty", ""}};
  ASSERT_OK_AND_ASSIGN(std::string zip, WriteZipFiles(files));
  EXPECT_LT(zip.size(), 2000u) << "deflated";
  ASSERT_OK_AND_ASSIGN(ZipFiles back, ReadZipFiles(zip));
  EXPECT_EQ(back, files);
  ASSERT_OK_AND_ASSIGN(std::string again, WriteZipFiles(files));
  EXPECT_EQ(again, zip);
}

TEST(ZipFiles, ADirectoryPartIsDroppedAndDirectoriesSkipped) {
  // What `zip -r x.zip dir` writes: a directory entry, then dir/<file>.
  ASSERT_OK_AND_ASSIGN(std::string zip, WriteZipFiles({{"dir/", ""}, {"dir/a.json", "1"}, {"dir/sub/b.bin", "2"}}));
  ASSERT_OK_AND_ASSIGN(ZipFiles back, ReadZipFiles(zip));
  EXPECT_EQ(back, (ZipFiles{{"a.json", "1"}, {"b.bin", "2"}}));
  ASSERT_OK_AND_ASSIGN(std::string twice, WriteZipFiles({{"x/a.json", "1"}, {"y/a.json", "2"}}));
  EXPECT_THAT(ReadZipFiles(twice), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two files named a.json")));
}

TEST(ZipFiles, LimitsAreCheckedBeforeInflating) {
  ASSERT_OK_AND_ASSIGN(std::string zip, WriteZipFiles({{"a", std::string(4096, 'a')}, {"b", std::string(4096, 'b')}}));
  EXPECT_THAT(ReadZipFiles(zip, {.max_entries = 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 entries; at most 1")));
  EXPECT_THAT(ReadZipFiles(zip, {.max_total_bytes = 8191}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceed 8191 bytes uncompressed")));
  EXPECT_OK(ReadZipFiles(zip, {.max_total_bytes = 8192}).status());
}

TEST(ZipFiles, DamagedOrForeignBytesAreRefused) {
  bool not_a_zip = false;
  EXPECT_THAT(ZipReader::FromBytes("plainly not a zip archive at all", &not_a_zip).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a readable zip archive")));
  EXPECT_TRUE(not_a_zip);
  ASSERT_OK_AND_ASSIGN(std::string zip, WriteZipFiles({{"a.txt", std::string(2000, 'q')}}));
  EXPECT_FALSE(ReadZipFiles(zip.substr(0, zip.size() - 10)).ok()) << "truncated";
  // A flipped byte inside the deflated data: the CRC check refuses it.
  std::string damaged = zip;
  damaged[40] = static_cast<char>(damaged[40] ^ 0x55);
  EXPECT_FALSE(ReadZipFiles(damaged).ok());
}

TEST(ZipFiles, PythonsZipfileArchivesReadAlike) {
  TempDir dir;
  const std::string out = dir.Sub("py.zip");
  absl::StatusOr<adapterd::testing::RunResult> r =
      RunProgram({"/usr/bin/python3", "-c",
                  "import sys, zipfile\n"
                  "with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n"
                  "    z.writestr('adapter/head_config.json', '{}')\n"
                  "    z.writestr('adapter/model_head.safetensors', bytes(range(256)) * 3)\n",
                  out});
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.status().ToString());
  ASSERT_OK_AND_ASSIGN(std::string zip, ReadFileToString(out));
  ASSERT_OK_AND_ASSIGN(ZipFiles files, ReadZipFiles(zip));
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files["head_config.json"], "{}");
  std::string expected;
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 256; ++i) expected.push_back(static_cast<char>(i));
  }
  EXPECT_EQ(files["model_head.safetensors"], expected);
}

}  // namespace
}  // namespace adapterd
