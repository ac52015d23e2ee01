// The grid runner: checks a launch's configuration as the CUDA runtime does (at the launch), then,
// when the stream gets there (streams.h), runs its blocks one after another (x fastest; descending with CUDA_SIM_SCHEDULE=reverse), each through the
// block scheduler, with freshly poisoned dynamic shared memory.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "block_scheduler.h"
#include "cuda_sim/launch.h"
#include "device_memory.h"
#include "runtime_state.h"

namespace cuda_sim {

BuiltinIndices g_builtins;
unsigned char* g_dynamic_shared = nullptr;

namespace {

// One launch at a time (the built-ins are globals); a launch from a kernel is not supported.
std::recursive_mutex& launch_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}
BlockScheduler* g_scheduler = nullptr;

std::unordered_map<const void*, int>& dynamic_shared_limits() {
  static std::unordered_map<const void*, int> limits;
  return limits;
}

// Rejects a launch as cudaLaunchKernel would: the error is left for cudaGetLastError, and the
// reason (which CUDA does not give) goes to stderr.
void reject(const LaunchConfig& config, cudaError_t error, const std::string& reason) {
  std::fprintf(stderr, "cuda_sim: launch of %s rejected: %s\n", config.kernel_name, reason.c_str());
  set_last_error(error);
}

std::string dims(dim3 d) {
  std::ostringstream out;
  out << "(" << d.x << "," << d.y << "," << d.z << ")";
  return out.str();
}

}  // namespace

void set_max_dynamic_shared(const void* kernel, int bytes) {
  std::lock_guard lock(launch_mutex());
  dynamic_shared_limits()[kernel] = bytes;
}

void sync_threads() { g_scheduler->sync_threads(); }

namespace {
uint64_t g_block_serial = 0;  // counts the blocks run, so "first reached in this block" is known
}  // namespace

uint64_t block_serial() { return g_block_serial; }

void poison_static_shared(void* variable, size_t bytes) {
  static std::unordered_map<void*, uint64_t> poisoned_in;
  uint64_t& block = poisoned_in[variable];
  if (block == g_block_serial) return;
  block = g_block_serial;
  std::memset(variable, kPoisonByte, bytes);
}
unsigned lane_id() { return g_scheduler->lane(); }
const unsigned char* warp_exchange(unsigned mask, const void* value, size_t bytes,
                                   const char* op) {
  return g_scheduler->warp_exchange(mask, value, bytes, op);
}
void kernel_fault(const std::string& what) { g_scheduler->fault(what); }

void check_kernel_pointer(const char* kernel_name, size_t argument, const void* pointer) {
  if (pointer == nullptr || find_allocation(pointer)) return;
  throw std::runtime_error(std::string("cuda_sim: kernel ") + kernel_name + " argument " +
                           std::to_string(argument) +
                           " is a pointer to neither device nor pinned host memory");
}

bool accept_launch(const LaunchConfig& config) {
  std::lock_guard lock(launch_mutex());
  const dim3 g = config.grid, b = config.block;
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads == 0 || threads > 1024 || b.z > 64 || g.x == 0 || g.y == 0 || g.z == 0 ||
      g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
    reject(config, cudaErrorInvalidConfiguration, "grid " + dims(g) + ", block " + dims(b));
    return false;
  }
  int shared_limit = kDefaultDynamicShared;
  if (const auto it = dynamic_shared_limits().find(config.kernel);
      it != dynamic_shared_limits().end()) {
    shared_limit = it->second;
  }
  if (config.dynamic_shared_bytes > static_cast<size_t>(shared_limit)) {
    reject(config, cudaErrorInvalidValue,
           std::to_string(config.dynamic_shared_bytes) + " bytes of dynamic shared memory, " +
               std::to_string(shared_limit) +
               " allowed (cudaFuncAttributeMaxDynamicSharedMemorySize)");
    return false;
  }
  if (!is_known_stream(config.stream)) {
    reject(config, cudaErrorInvalidResourceHandle, "unknown or destroyed stream");
    return false;
  }
  return true;
}

void run_grid(const LaunchConfig& config, void (*thread_body)(void*), void* closure) {
  std::lock_guard lock(launch_mutex());
  const dim3 g = config.grid, b = config.block;
  static BlockScheduler scheduler;
  g_scheduler = &scheduler;
  static unsigned char* shared = static_cast<unsigned char*>(
      std::aligned_alloc(128, static_cast<size_t>(kMaxDynamicSharedOptIn) + 128));
  g_dynamic_shared = shared;
  g_builtins.grid_dim = g;
  g_builtins.block_dim = b;
  for (unsigned zi = 0; zi < g.z; ++zi) {
    for (unsigned yi = 0; yi < g.y; ++yi) {
      for (unsigned xi = 0; xi < g.x; ++xi) {
        g_builtins.block_idx = uint3{in_order(xi, g.x), in_order(yi, g.y), in_order(zi, g.z)};
        // Shared memory starts with whatever the last block left; poison makes reads of
        // unwritten shared memory visible.
        std::memset(shared, kPoisonByte, config.dynamic_shared_bytes);
        ++g_block_serial;
        scheduler.run_block(config.kernel_name, thread_body, closure);
      }
    }
  }
}

}  // namespace cuda_sim
