#include "device_memory.h"

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace cuda_sim {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> by_begin;
  size_t device_bytes = 0;
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: frees may run at exit
  return *instance;
}

}  // namespace

void* allocate(size_t bytes, MemoryKind kind) {
  Registry& r = registry();
  const size_t rounded = (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
  {
    std::lock_guard lock(r.mutex);
    if (kind == MemoryKind::kDevice && r.device_bytes + rounded > kDeviceMemoryBytes) {
      return nullptr;
    }
  }
  // At least one byte, so every allocation has a distinct address.
  void* pointer = std::aligned_alloc(kDeviceAlignment, rounded == 0 ? kDeviceAlignment : rounded);
  if (pointer == nullptr) return nullptr;
  if (kind == MemoryKind::kDevice) std::memset(pointer, kPoisonByte, rounded);
  std::lock_guard lock(r.mutex);
  r.by_begin[reinterpret_cast<uintptr_t>(pointer)] =
      Allocation{reinterpret_cast<uintptr_t>(pointer), bytes, kind};
  if (kind == MemoryKind::kDevice) r.device_bytes += rounded;
  return pointer;
}

bool release(void* pointer, MemoryKind kind) {
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    const auto it = r.by_begin.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == r.by_begin.end() || it->second.kind != kind) return false;
    if (kind == MemoryKind::kDevice) {
      r.device_bytes -= (it->second.bytes + kDeviceAlignment - 1) / kDeviceAlignment *
                        kDeviceAlignment;
    }
    r.by_begin.erase(it);
  }
  std::free(pointer);
  return true;
}

std::optional<Allocation> find_allocation(const void* pointer) {
  Registry& r = registry();
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  std::lock_guard lock(r.mutex);
  auto it = r.by_begin.upper_bound(address);
  if (it == r.by_begin.begin()) return std::nullopt;
  --it;
  const Allocation& a = it->second;
  // One past the end counts too (an empty view at the end of a buffer).
  if (address > a.begin + a.bytes) return std::nullopt;
  return a;
}

size_t device_bytes_in_use() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.device_bytes;
}

}  // namespace cuda_sim
