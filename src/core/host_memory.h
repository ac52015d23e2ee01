// How much memory this machine gives the process: physical memory, lowered to the cgroup limit
// when one is set (containers and batch schedulers cap memory below what the machine has).
// Used to refuse a model or batch that cannot fit before anything is allocated: Linux overcommits,
// so an allocation far beyond memory "succeeds" and the process is killed later instead.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace zero {

struct HostMemory {
  int64_t physical_bytes = 0;                 // sysconf(_SC_PHYS_PAGES) * page size
  std::optional<int64_t> cgroup_limit_bytes;  // memory.max (v2) / memory.limit_in_bytes (v1)
  // The smaller of the two: what this process can use at most.
  int64_t usable_bytes() const;
  // "125.3 GiB of physical memory" or "8.0 GiB (the cgroup's memory limit)".
  std::string describe() const;
};

HostMemory host_memory();

// Bytes for a message, one decimal: "1.5 GiB", or "12.0 MiB" below 100 MiB.
std::string format_gib(int64_t bytes);

}  // namespace zero
