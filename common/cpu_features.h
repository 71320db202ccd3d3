// What the CPU can do fast, from /proc/cpuinfo.
//
// Thread safety: pure functions (the Current* one reads /proc/cpuinfo).
#ifndef ADAPTERD_COMMON_CPU_FEATURES_H_
#define ADAPTERD_COMMON_CPU_FEATURES_H_

#include <string>
#include <string_view>

namespace adapterd {

// The native bf16 dot-product feature the "flags" lines of `cpuinfo` (the text
// of /proc/cpuinfo) list: "amx_bf16" (Intel AMX) or "avx512_bf16" (AVX512-BF16),
// preferring AMX; "" when neither.
std::string FastBf16Feature(std::string_view cpuinfo);

// FastBf16Feature of this machine's /proc/cpuinfo.
std::string CurrentFastBf16Feature();

// True when the "flags" lines list avx512f, avx512bw, avx512dq and avx512vl:
// what LibTorch's AVX-512 kernels (ATEN_CPU_CAPABILITY=avx512) need.
bool HasAvx512Core(std::string_view cpuinfo);

// HasAvx512Core of this machine's /proc/cpuinfo.
bool CurrentHasAvx512Core();

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_CPU_FEATURES_H_
