// How many CPUs this process may use: the smaller of its CPU affinity and
// its cgroup CPU quota (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` /
// `cpu.cfs_period_us`), so that `--threads 0` in a 2-CPU container on a
// 64-core host means 2 threads, not 64.
//
// Thread safety: pure functions over the file system.
#ifndef ADAPTERD_COMMON_CPU_QUOTA_H_
#define ADAPTERD_COMMON_CPU_QUOTA_H_

#include <optional>
#include <string>

namespace adapterd {

struct CpuBudget {
  int online = 1;               // CPUs the kernel has online
  int affinity = 1;             // CPUs in this process's affinity mask
  std::optional<double> quota;  // cgroup quota in CPUs; nullopt = none
  // min(affinity, ceil(quota)), at least 1.
  int usable() const;
  // One line for the start-up log, e.g. "cgroup CPU quota 1.50 CPUs, 4 of 64
  // CPUs in the affinity mask".
  std::string Describe() const;
};

// The quota of the cgroup that `proc_self_cgroup` (the text of
// /proc/self/cgroup) names, read under `cgroup_root` (normally
// /sys/fs/cgroup). Walks from the process's cgroup up to the root and takes
// the tightest limit, since a parent's quota binds its children. Both the
// unified (v2) and the v1 `cpu` hierarchy are understood; a cgroup namespace
// (a container's "0::/") reads the files at the root. nullopt when no quota
// is set or nothing can be read.
std::optional<double> CgroupCpuQuota(const std::string& cgroup_root, const std::string& proc_self_cgroup);

// This process's budget, from the real /proc and /sys/fs/cgroup.
CpuBudget CurrentCpuBudget();

}  // namespace adapterd

#endif  // ADAPTERD_COMMON_CPU_QUOTA_H_
