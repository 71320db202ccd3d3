// LibTorch's CPU allocator for AddressSanitizer builds only (compiled and
// linked when ADAPTERD_SANITIZE=address; server/model/CMakeLists.txt).
//
// Why: ASan's allocator serves every chunk over 128 KiB (its largest size
// class on x86-64) with a fresh mmap and unmaps it when the chunk leaves its
// quarantine. Training allocates such tensors at every step (activations,
// gradients), so under ASan the adapterd server took 124,000 page faults a
// second and spent 43% of its CPU time in the kernel mapping, zeroing and
// unmapping them (the walkthrough e2e test; the main build's server: 5,300
// a second). docs/PERFORMANCE.md ("CI time") has the figures.
//
// What: tensors of 128 KiB and more are served from blocks this pool keeps
// instead of returning them: each block is one ASan heap chunk (its own
// redzones), rounded up to a size class of four steps per power of two.
// ASan's checks on tensor memory are kept by poisoning by hand:
//   - only the bytes asked for are addressable; the rest of the block is
//     poisoned, so reading or writing past a tensor's end is reported
//     (use-after-poison, or ASan's own redzone at the block's end);
//   - a block returned to the pool is poisoned whole until it is handed out
//     again, and blocks are reused oldest first (a FIFO per class, like
//     ASan's quarantine), so a use after free is reported;
//   - LeakSanitizer still sees a tensor that is never freed: live blocks are
//     referenced only by their tensors.
// The pool keeps at most kMaxCachedBytes; a block returned past that goes
// back to ASan. Smaller tensors go to LibTorch's default allocator, as in
// every other build.
//
// Thread safety: thread-safe (one mutex around the live blocks' table and
// the free lists).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sanitizer/asan_interface.h>

#include <cstddef>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

namespace adapterd::model {
namespace {

constexpr size_t kPooledFrom = size_t{1} << 17;      // ASan's largest size class
constexpr size_t kMaxCachedBytes = size_t{1} << 30;  // what the free lists may hold
constexpr size_t kAlignment = 64;                    // LibTorch's own (c10::gAlignment)

// The smallest of 1, 1.25, 1.5 or 1.75 times a power of two that holds n.
size_t SizeClass(size_t n) {
  size_t power = kPooledFrom;
  while (power * 2 <= n) power *= 2;
  for (size_t step = 0; step <= 4; ++step) {
    const size_t size = power + power / 4 * step;
    if (size >= n) return size;
  }
  return power * 2;
}

class AsanTensorPool final : public c10::Allocator {
 public:
  explicit AsanTensorPool(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t n) const override {
    if (n < kPooledFrom) return fallback_->allocate(n);
    const size_t bytes = SizeClass(n);
    void* data = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        data = it->second.front();
        it->second.pop_front();
        cached_bytes_ -= bytes;
      }
    }
    if (data == nullptr && posix_memalign(&data, kAlignment, bytes) != 0) throw std::bad_alloc();
    ASAN_POISON_MEMORY_REGION(data, bytes);
    ASAN_UNPOISON_MEMORY_REGION(data, n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[data] = bytes;
    }
    // The context is the data pointer, as LibTorch's raw_allocate requires.
    return {data, data, &AsanTensorPool::Release, c10::Device(c10::DeviceType::CPU)};
  }

  // LibTorch frees raw_allocate()d buffers with this deleter, the fallback's
  // small ones included.
  c10::DeleterFnPtr raw_deleter() const override { return &AsanTensorPool::Release; }

  static void Release(void* data);

 private:
  c10::Allocator* const fallback_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, size_t> live_;    // pooled block -> its size class
  mutable std::map<size_t, std::deque<void*>> free_;  // size class -> blocks, oldest first
  mutable size_t cached_bytes_ = 0;
};

AsanTensorPool* g_pool = nullptr;

void AsanTensorPool::Release(void* data) {
  AsanTensorPool& pool = *g_pool;
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(pool.mu_);
    auto it = pool.live_.find(data);
    if (it != pool.live_.end()) {
      bytes = it->second;
      pool.live_.erase(it);
      if (pool.cached_bytes_ + bytes <= kMaxCachedBytes) {
        ASAN_POISON_MEMORY_REGION(data, bytes);
        pool.free_[bytes].push_back(data);
        pool.cached_bytes_ += bytes;
        return;
      }
    }
  }
  if (bytes == 0) {  // not the pool's: the fallback allocated it
    pool.fallback_->raw_deleter()(data);
    return;
  }
  ASAN_UNPOISON_MEMORY_REGION(data, bytes);
  std::free(data);
}

// Installed before main(): LibTorch's default allocator registered itself at
// priority 0 when its library loaded; priority 1 replaces it. Never
// destroyed: tensors may be freed by other objects' destructors at exit.
struct Registration {
  Registration() {
    c10::Allocator* fallback = c10::GetDefaultCPUAllocator();
    if (fallback->raw_deleter() == nullptr) return;  // cannot free its raw buffers: keep it alone
    g_pool = new AsanTensorPool(fallback);
    c10::SetCPUAllocator(g_pool, /*priority=*/1);
  }
} registration;

}  // namespace
}  // namespace adapterd::model
