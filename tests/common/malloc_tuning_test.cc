// KeepLargeBuffersOnTheHeap changes the whole process's allocator, so it has
// a test binary of its own; ReleaseFreeHeap acts on the same process-wide
// heap.
#include "common/malloc_tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <optional>

namespace adapterd {
namespace {

using ::testing::HasSubstr;

// Memory-mapped blocks glibc holds now.
size_t MappedBlocks() { return mallinfo2().hblks; }

// Keeps the compiler from eliding a malloc/free pair.
void* volatile g_block = nullptr;

// A block of `bytes` with every page written (through the volatile pointer,
// so that the compiler cannot drop the writes to a block it sees freed).
void* TouchedBlock(size_t bytes) {
  g_block = std::malloc(bytes);
  std::memset(g_block, 1, bytes);
  return g_block;
}

// Whether a fresh block of `bytes` was served by its own mmap.
bool MappedOnItsOwn(size_t bytes) {
  const size_t before = MappedBlocks();
  g_block = std::malloc(bytes);
  std::memset(g_block, 1, bytes);
  const bool mapped = MappedBlocks() > before;
  std::free(g_block);
  return mapped;
}

TEST(MallocTuning, BlocksUpTo32MiBComeFromTheHeapAfterwards) {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) unsetenv(name);
  // glibc's default: a first 16 MiB block gets its own mapping.
  EXPECT_TRUE(MappedOnItsOwn(16 << 20));
  EXPECT_THAT(KeepLargeBuffersOnTheHeap(), HasSubstr("stay on the heap"));
  EXPECT_FALSE(MappedOnItsOwn(16 << 20));
  EXPECT_FALSE(MappedOnItsOwn(30 << 20));
  EXPECT_TRUE(MappedOnItsOwn(64 << 20));  // above glibc's maximum threshold
}

TEST(MallocTuning, AnEnvironmentSettingWins) {
  setenv("MALLOC_TRIM_THRESHOLD_", "1000", 1);
  EXPECT_THAT(KeepLargeBuffersOnTheHeap(), HasSubstr("left to the environment (MALLOC_TRIM_THRESHOLD_"));
  unsetenv("MALLOC_TRIM_THRESHOLD_");
}

// glibc's accounting follows a block from malloc to free, and with the trim
// threshold raised the freed block stays with malloc (counted as free).
TEST(MallocTuning, HeapStatsFollowABlockThroughFree) {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) unsetenv(name);
  ASSERT_THAT(KeepLargeBuffersOnTheHeap(), HasSubstr("stay on the heap"));
  constexpr int64_t kBytes = 8 << 20;
  const HeapStats before = ReadHeapStats();
  TouchedBlock(kBytes);
  const HeapStats held = ReadHeapStats();
  EXPECT_GE(held.in_use - before.in_use, kBytes);
  std::free(g_block);
  const HeapStats after = ReadHeapStats();
  EXPECT_GE(held.in_use - after.in_use, kBytes);
  EXPECT_GE(after.free - held.free, kBytes);
}

// The kernel's view of the process: fresh pages count as resident once
// written. (A fresh mapping, not malloc: malloc may reuse pages that an
// earlier test freed and left resident.)
TEST(MallocTuning, ProcessMemoryCountsWrittenPagesAsResident) {
  constexpr size_t kBytes = 16 << 20;
  void* map = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  const std::optional<ProcessMemory> mapped = ReadProcessMemory();
  ASSERT_TRUE(mapped.has_value());
  EXPECT_GT(mapped->resident_bytes, 0);
  EXPECT_GE(mapped->virtual_bytes, mapped->resident_bytes + static_cast<int64_t>(kBytes));
  std::memset(map, 1, kBytes);
  const std::optional<ProcessMemory> written = ReadProcessMemory();
  ASSERT_TRUE(written.has_value());
  EXPECT_GE(written->resident_bytes - mapped->resident_bytes, static_cast<int64_t>(kBytes));
  munmap(map, kBytes);
}

// Freed blocks that the raised trim threshold keeps resident are given back
// by ReleaseFreeHeap, which reports what it returned.
TEST(MallocTuning, ReleaseFreeHeapGivesFreedPagesBack) {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) unsetenv(name);
  ASSERT_THAT(KeepLargeBuffersOnTheHeap(), HasSubstr("stay on the heap"));
  constexpr size_t kBytes = 16 << 20;
  void* block = TouchedBlock(kBytes);
  void* volatile after = std::malloc(64);  // keeps the block off the heap's top
  std::free(block);
  EXPECT_GE(ReleaseFreeHeap(), static_cast<int64_t>(kBytes / 2));
  EXPECT_LT(ReleaseFreeHeap(), static_cast<int64_t>(kBytes / 2));  // given back once
  std::free(after);
}

}  // namespace
}  // namespace adapterd
