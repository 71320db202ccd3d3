// glibc malloc settings for a process that allocates and frees tensors of
// megabytes many times a second (docs/PERFORMANCE.md, "CPU kernels").
//
// By default glibc serves an allocation above its mmap threshold (128 KiB,
// rising dynamically up to 32 MiB) with a fresh mmap and returns it with
// munmap, and trims the heap top above 2x that threshold; each reuse then
// page-faults its memory in again, page by page, before a byte is written:
// most of a cold adapter load's RocksDB read, and a few percent of an fp32
// BERT-base batch (docs/PERFORMANCE.md, "CPU kernels", has the figures).
//
// KeepLargeBuffersOnTheHeap() sets M_MMAP_THRESHOLD to glibc's maximum
// (32 MiB: larger blocks are still mapped) and M_TRIM_THRESHOLD to 1 GiB, so
// freed blocks up to 32 MiB are reused without faults. The cost: up to 1 GiB
// of freed memory may stay resident instead of returning to the kernel;
// adapterd gives it back on a schedule instead (ReleaseFreeHeap below).
// A process whose environment already sets MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES is left alone.
//
// Thread safety: KeepLargeBuffersOnTheHeap: call once at the start of main(),
// before other threads.
#ifndef ADAPTERD_COMMON_MALLOC_TUNING_H_
#define ADAPTERD_COMMON_MALLOC_TUNING_H_

#include <cstdint>
#include <optional>
#include <string>

namespace adapterd {

// Applies the settings above (unless the environment sets its own) and
// returns a line for the startup log saying which.
std::string KeepLargeBuffersOnTheHeap();

// glibc's own accounting of the heap (mallinfo2, summed over every arena),
// in bytes; all zero when the C library is not glibc.
//   in_use: handed out to the program and not yet freed (arena chunks and
//           separately mapped blocks);
//   free:   freed but kept by malloc for reuse: resident as far as it was
//           ever touched (the trim threshold above allows up to 1 GiB),
//           until ReleaseFreeHeap gives its whole pages back; it counts
//           them still.
// Takes each arena's lock in turn and walks its free lists: cheap for a
// scrape, not for a hot path. Thread-safe.
struct HeapStats {
  int64_t in_use = 0;
  int64_t free = 0;
};
HeapStats ReadHeapStats();

// The process's size from the kernel (/proc/self/statm), in bytes; nullopt
// where that cannot be read. Thread-safe.
struct ProcessMemory {
  int64_t virtual_bytes = 0;
  int64_t resident_bytes = 0;
};
std::optional<ProcessMemory> ReadProcessMemory();

// Returns the freed pages of every arena to the kernel (glibc malloc_trim(0):
// the heap's top beyond a page, and the whole pages inside free blocks,
// which stay mapped and fault back in on reuse).
// Returns the resident bytes it gave back (ReadProcessMemory before and
// after, 0 if none or unknown). Walks every arena under its lock: call it
// off the hot paths. Thread-safe.
//
// Why adapterd calls it on a schedule (--heap_release_interval_seconds):
// with the settings above, and glibc keeping each arena's high-water mark,
// threads of every kind (gRPC handlers on their own arenas, training,
// uploads, imports) leave freed memory behind that only they would reuse:
// in the soak (bench/soak.sh) nearly all of the server's RSS growth after
// warm-up was freed memory glibc held (docs/PERFORMANCE.md, "Soak").
int64_t ReleaseFreeHeap();

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_MALLOC_TUNING_H_
