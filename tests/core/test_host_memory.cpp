// host_memory.h: the memory this process may use (physical, lowered to a cgroup limit) and the
// GiB wording the memory refusals use.
#include <gtest/gtest.h>

#include "core/host_memory.h"

namespace zero {
namespace {

TEST(HostMemory, ReportsSomePhysicalMemory) {
  const HostMemory memory = host_memory();
  EXPECT_GT(memory.physical_bytes, int64_t{64} << 20);
  EXPECT_GT(memory.usable_bytes(), 0);
  EXPECT_LE(memory.usable_bytes(), memory.physical_bytes);
  EXPECT_NE(memory.describe().find("GiB"), std::string::npos) << memory.describe();
}

TEST(HostMemory, ACgroupLimitBelowPhysicalMemoryIsWhatCounts) {
  HostMemory memory;
  memory.physical_bytes = int64_t{64} << 30;
  memory.cgroup_limit_bytes = int64_t{8} << 30;
  EXPECT_EQ(memory.usable_bytes(), int64_t{8} << 30);
  EXPECT_NE(memory.describe().find("8.0 GiB (the cgroup's memory limit"), std::string::npos)
      << memory.describe();
  memory.cgroup_limit_bytes = int64_t{128} << 30;  // above physical: no effect
  EXPECT_EQ(memory.usable_bytes(), int64_t{64} << 30);
}

TEST(HostMemory, FormatsGiB) {
  EXPECT_EQ(format_gib(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_gib(int64_t{12} << 20), "12.0 MiB");
  EXPECT_EQ(format_gib(0), "0.0 MiB");
}

}  // namespace
}  // namespace zero
