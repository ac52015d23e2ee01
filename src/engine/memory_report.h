// DeepSpeed's memory_breakdown for zero.cpp: one line with every accounted memory category's
// live and peak bytes (the allocator's books) and the process's resident memory as the kernel
// sees it (VmRSS / VmHWM), so what zero.cpp accounts and what the machine pays can be compared.
#pragma once
#include <string>

#include "core/allocator.h"

namespace zero::engine {

// "memory breakdown: params 0.4 MiB (peak 0.4) | grads ... | process RSS 52.1 MiB (peak 60.3)".
// Categories that never held a byte are left out; the RSS part is left out where /proc is not
// readable.
std::string memory_breakdown_line(const MemoryStats& stats);

}  // namespace zero::engine
