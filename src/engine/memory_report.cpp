#include "engine/memory_report.h"

#include <cstdio>
#include <fstream>
#include <optional>

#include "core/memory_category.h"
#include "core/parse_number.h"

namespace zero::engine {
namespace {

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// A "Name:   1234 kB" line of /proc/self/status, in bytes.
std::optional<size_t> status_kib(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + ":", 0) != 0) continue;
    std::string digits;
    for (const char c : line.substr(name.size() + 1)) {
      if (c >= '0' && c <= '9') digits += c;
    }
    const std::optional<int64_t> kib = parse_int64(digits);
    if (!kib || *kib < 0) return std::nullopt;
    return static_cast<size_t>(*kib) * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::string memory_breakdown_line(const MemoryStats& stats) {
  std::string line = "memory breakdown:";
  bool first = true;
  for (size_t c = 0; c < kNumMemoryCategories; ++c) {
    if (stats.peak_bytes[c] == 0) continue;
    line += std::string(first ? " " : " | ") + memory_category_name(static_cast<MemoryCategory>(c)) +
            " " + mib(stats.live_bytes[c]) + " MiB (peak " + mib(stats.peak_bytes[c]) + ")";
    first = false;
  }
  line += " | accounted " + mib(stats.total_live_bytes) + " MiB (peak " +
          mib(stats.total_peak_bytes) + ")";
  const std::optional<size_t> rss = status_kib("VmRSS");
  const std::optional<size_t> hwm = status_kib("VmHWM");
  if (rss && hwm) line += " | process RSS " + mib(*rss) + " MiB (peak " + mib(*hwm) + ")";
  return line;
}

}  // namespace zero::engine
