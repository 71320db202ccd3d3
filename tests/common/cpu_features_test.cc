#include "common/cpu_features.h"

#include <gtest/gtest.h>

namespace adapterd {
namespace {

TEST(CpuFeatures, FindsNativeBf16AsAWholeFlag) {
  EXPECT_EQ(FastBf16Feature("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 avx512_vnni\n"), "avx512_bf16");
  EXPECT_EQ(FastBf16Feature("flags\t: avx512f amx_bf16 amx_tile avx512_bf16\n"), "amx_bf16");
  EXPECT_EQ(FastBf16Feature("flags\t: fpu avx2 avx512f\n"), "");
  // Part of another flag, or outside a flags line, does not count.
  EXPECT_EQ(FastBf16Feature("flags\t: xavx512_bf16y\n"), "");
  EXPECT_EQ(FastBf16Feature("model name\t: avx512_bf16 special edition\nflags\t: fpu\n"), "");
  EXPECT_EQ(FastBf16Feature(""), "");
  EXPECT_EQ(FastBf16Feature("flags\t: avx512_bf16"), "avx512_bf16");  // no trailing newline
}

TEST(CpuFeatures, ThisMachineAnswersOneOfTheThree) {
  const std::string f = CurrentFastBf16Feature();
  EXPECT_TRUE(f.empty() || f == "amx_bf16" || f == "avx512_bf16") << f;
}

TEST(CpuFeatures, Avx512CoreNeedsAllFourSubsets) {
  EXPECT_TRUE(HasAvx512Core("flags\t: fpu avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16\n"));
  EXPECT_FALSE(HasAvx512Core("flags\t: fpu avx2 avx512f avx512dq avx512bw\n"));  // no VL
  EXPECT_FALSE(HasAvx512Core("flags\t: fpu avx2 xavx512f avx512dq avx512bw avx512vl\n"));
  EXPECT_FALSE(HasAvx512Core("model name\t: avx512f avx512dq avx512bw avx512vl\nflags\t: fpu\n"));
  EXPECT_FALSE(HasAvx512Core(""));
}

}  // namespace
}  // namespace adapterd
