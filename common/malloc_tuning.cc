#include "common/malloc_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace adapterd {

std::string KeepLargeBuffersOnTheHeap() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"}) {
    if (std::getenv(name) != nullptr) return std::string("malloc: left to the environment (") + name + " is set)";
  }
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 32 << 20;  // glibc's maximum on 64-bit
  constexpr int kTrimThreshold = 1 << 30;
  if (mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1) {
    return "malloc: blocks up to 32 MiB stay on the heap (mmap threshold 32 MiB, trim threshold 1 GiB)";
  }
  return "malloc: glibc refused the thresholds; defaults kept";
#else
  return "malloc: not glibc; defaults kept";
#endif
}

HeapStats ReadHeapStats() {
  HeapStats h;
#if defined(__GLIBC__)
  const struct mallinfo2 m = mallinfo2();
  h.in_use = static_cast<int64_t>(m.uordblks + m.hblkhd);
  h.free = static_cast<int64_t>(m.fordblks);
#endif
  return h;
}

std::optional<ProcessMemory> ReadProcessMemory() {
  // statm: size resident shared text lib data dt, in pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return std::nullopt;
  unsigned long long size = 0, resident = 0;
  const bool ok = std::fscanf(f, "%llu %llu", &size, &resident) == 2;
  std::fclose(f);
  if (!ok) return std::nullopt;
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return ProcessMemory{.virtual_bytes = static_cast<int64_t>(size) * page,
                       .resident_bytes = static_cast<int64_t>(resident) * page};
}

int64_t ReleaseFreeHeap() {
#if defined(__GLIBC__)
  const std::optional<ProcessMemory> before = ReadProcessMemory();
  malloc_trim(0);
  const std::optional<ProcessMemory> after = ReadProcessMemory();
  if (!before || !after) return 0;
  return std::max<int64_t>(0, before->resident_bytes - after->resident_bytes);
#else
  return 0;
#endif
}

}  // namespace adapterd
