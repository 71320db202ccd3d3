// The ASan + UBSan run's check of its tensor pool (built only with
// -DADAPTERD_SANITIZE=address; server/model/asan_tensor_pool.cc): LibTorch's
// large tensors come from the pool, and ASan still reports a read past a
// tensor's end and a read after it was freed, for tensors the pool hands out
// fresh and for blocks it hands out again. Without this, the pool could hide
// the very errors the ASan run is for.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace adapterd {
namespace {

constexpr int64_t kFloats = 300000;  // 1.2 MB: a pooled size, not a size class

// Reads one float at `p` through instrumented code.
float Read(const float* p) {
  volatile float v = *p;
  return v;
}

class AsanTensorPoolTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(AsanTensorPoolTest, IsLibTorchsCpuAllocatorAndReusesABlockOnceFreed) {
  EXPECT_NE(c10::GetCPUAllocator(), c10::GetDefaultCPUAllocator());
  const void* first = nullptr;
  {
    at::Tensor t = at::ones({kFloats});
    first = t.data_ptr();
    EXPECT_EQ(t.sum().item<float>(), static_cast<float>(kFloats));
  }
  // The only block of its class in this process: handed out again, zeroed
  // by LibTorch as asked, the whole tensor addressable.
  at::Tensor again = at::zeros({kFloats});
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(again.sum().item<float>(), 0.0f);
  EXPECT_EQ(Read(again.data_ptr<float>() + kFloats - 1), 0.0f);
}

TEST_F(AsanTensorPoolTest, AReadPastATensorsEndIsReported) {
  EXPECT_DEATH(
      {
        at::Tensor t = at::ones({kFloats});
        Read(t.data_ptr<float>() + kFloats);
      },
      "AddressSanitizer: use-after-poison");
}

TEST_F(AsanTensorPoolTest, AReadPastTheEndOfAReusedBlockIsReported) {
  EXPECT_DEATH(
      {
        { at::Tensor big = at::ones({kFloats + 1000}); }
        at::Tensor t = at::ones({kFloats});  // the same size class: the block above
        Read(t.data_ptr<float>() + kFloats);
      },
      "AddressSanitizer: use-after-poison");
}

TEST_F(AsanTensorPoolTest, AReadAfterTheTensorIsFreedIsReported) {
  EXPECT_DEATH(
      {
        const float* p = nullptr;
        {
          at::Tensor t = at::ones({kFloats});
          p = t.data_ptr<float>();
        }
        Read(p + 10);
      },
      "AddressSanitizer: use-after-poison");
}

TEST_F(AsanTensorPoolTest, SmallTensorsKeepAsansOwnHeapChecks) {
  EXPECT_DEATH(
      {
        const float* p = nullptr;
        {
          at::Tensor t = at::ones({100});
          p = t.data_ptr<float>();
        }
        Read(p);
      },
      "AddressSanitizer: heap-use-after-free");
}

}  // namespace
}  // namespace adapterd
