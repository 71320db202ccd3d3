#include "common/cpu_quota.h"
#include "common/testing/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace adapterd {
namespace {

class CgroupTree : public ::testing::Test {
 protected:
  void Write(const std::string& rel, const std::string& text) {
    const std::filesystem::path p = std::filesystem::path(root_) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  ::adapterd::testing::TempDir tmp_{"cgroup"};
  std::string root_ = tmp_.path();
};

TEST_F(CgroupTree, V2NamespacedContainerReadsTheRootCpuMax) {
  // A container with a cgroup namespace sees its own cgroup as "/".
  Write("cpu.max", "200000 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(root_, "0::/\n").value(), 2.0);
}

TEST_F(CgroupTree, V2UnlimitedIsNoQuota) {
  Write("cpu.max", "max 100000\n");
  EXPECT_FALSE(CgroupCpuQuota(root_, "0::/\n").has_value());
}

TEST_F(CgroupTree, V2TakesTheTightestAncestor) {
  // The pod allows 1.5 CPUs, the container under it none of its own: the
  // parent's quota binds.
  Write("kubepods/pod1/cpu.max", "150000 100000\n");
  Write("kubepods/pod1/ctr/cpu.max", "max 100000\n");
  Write("kubepods/cpu.max", "max 100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(root_, "0::/kubepods/pod1/ctr\n").value(), 1.5);
}

TEST_F(CgroupTree, V1CpuHierarchy) {
  Write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n");
  Write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  const std::string self = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(root_, self).value(), 0.5);
}

TEST_F(CgroupTree, V1InsideAContainerReadsTheMountRoot) {
  // Docker on v1 without a cgroup namespace: /proc/self/cgroup names the
  // host's path, but the container's own cgroup is mounted at the root.
  Write("cpu/cpu.cfs_quota_us", "300000\n");
  Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(CgroupCpuQuota(root_, "3:cpu:/docker/abc\n").value(), 3.0);
}

TEST_F(CgroupTree, V1MinusOneIsNoQuotaAndJunkIsIgnored) {
  Write("cpu/cpu.cfs_quota_us", "-1\n");
  Write("cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_FALSE(CgroupCpuQuota(root_, "3:cpu:/\n").has_value());
  Write("cpu.max", "garbage\n");
  EXPECT_FALSE(CgroupCpuQuota(root_, "0::/\nnot a line\n").has_value());
}

TEST(CpuBudget, UsableIsTheSmallerOfAffinityAndTheRoundedUpQuota) {
  CpuBudget b;
  b.online = 64;
  b.affinity = 64;
  EXPECT_EQ(b.usable(), 64);
  b.quota = 2.0;
  EXPECT_EQ(b.usable(), 2);
  b.quota = 1.5;
  EXPECT_EQ(b.usable(), 2);
  b.quota = 0.1;
  EXPECT_EQ(b.usable(), 1);
  b.affinity = 1;
  b.quota = 8.0;
  EXPECT_EQ(b.usable(), 1);
  EXPECT_NE(b.Describe().find("quota 8.00 CPUs"), std::string::npos) << b.Describe();
}

TEST(CpuBudget, CurrentIsSane) {
  const CpuBudget b = CurrentCpuBudget();
  EXPECT_GE(b.online, 1);
  EXPECT_GE(b.affinity, 1);
  EXPECT_LE(b.usable(), b.affinity);
}

}  // namespace
}  // namespace adapterd
