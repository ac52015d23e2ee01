#include "core/host_memory.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "core/parse_number.h"

namespace zero {
namespace {

// The first line of a small kernel-provided file as a byte count; nothing for "max" (no
// limit), a missing file or anything unexpected. cgroup files report size 0, so they are read
// as streams rather than through io::read_text_file.
std::optional<int64_t> read_limit(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const std::optional<int64_t> value = parse_int64(line);
  if (!value || *value <= 0) return std::nullopt;
  return value;
}

}  // namespace

int64_t HostMemory::usable_bytes() const {
  if (cgroup_limit_bytes && *cgroup_limit_bytes < physical_bytes) return *cgroup_limit_bytes;
  return physical_bytes;
}

std::string HostMemory::describe() const {
  if (cgroup_limit_bytes && *cgroup_limit_bytes < physical_bytes) {
    return format_gib(*cgroup_limit_bytes) + " (the cgroup's memory limit; the machine has " +
           format_gib(physical_bytes) + ")";
  }
  return format_gib(physical_bytes) + " of physical memory";
}

HostMemory host_memory() {
  HostMemory memory;
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  int64_t physical = 0;
  if (pages > 0 && page_size > 0 &&
      !__builtin_mul_overflow(static_cast<int64_t>(pages), static_cast<int64_t>(page_size),
                              &physical)) {
    memory.physical_bytes = physical;
  } else {
    memory.physical_bytes = INT64_MAX;  // unknown: refuse nothing on this account
  }
  // cgroup v2 reports "max" for no limit; v1 reports a huge number, which is above physical.
  memory.cgroup_limit_bytes = read_limit("/sys/fs/cgroup/memory.max");
  if (!memory.cgroup_limit_bytes) {
    memory.cgroup_limit_bytes = read_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  }
  return memory;
}

std::string format_gib(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  char text[64];
  if (mib < 100.0) {
    std::snprintf(text, sizeof(text), "%.1f MiB", mib);
  } else {
    std::snprintf(text, sizeof(text), "%.1f GiB", mib / 1024.0);
  }
  return text;
}

}  // namespace zero
