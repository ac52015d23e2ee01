// The emulation of cp.async and ldmatrix (cuda_sim/ptx_memory.h). ldmatrix: the lanes exchange
// their row addresses (one warp exchange), then each lane reads its own fragment elements
// straight from the rows the PTX ISA assigns it.
#include "cuda_sim/ptx_memory.h"

#include <cstring>
#include <string>

#include "cuda_sim/thread_state.h"

namespace cuda_sim {
namespace {

void require_aligned(const void* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    kernel_fault(std::string(what) + ": address not 16-byte aligned");
  }
}

uint16_t element(const void* row, unsigned column) {
  uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(row) + 2 * column, sizeof(v));
  return v;
}

uint32_t pack(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (uint32_t{hi} << 16); }

}  // namespace

void cp_async_16(void* shared_dst, const void* global_src) {
  require_aligned(shared_dst, "cp.async destination");
  require_aligned(global_src, "cp.async source");
  std::memcpy(shared_dst, global_src, 16);
}

void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  require_aligned(row, "ldmatrix row");
  const unsigned char* slots = warp_exchange(0xffffffffu, &row, sizeof(row),
                                             trans ? "ldmatrix.x4.trans" : "ldmatrix.x4");
  auto row_of = [slots](unsigned lane) {
    const void* p;
    std::memcpy(&p, slots + lane * kWarpSlotBytes, sizeof(p));
    return p;
  };
  const unsigned lane = lane_id(), group = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    if (trans) {  // column `group`, rows 2t and 2t + 1
      r[i] = pack(element(row_of(8 * i + 2 * t), group), element(row_of(8 * i + 2 * t + 1), group));
    } else {  // row `group`, columns 2t and 2t + 1
      const void* mine = row_of(8 * i + group);
      r[i] = pack(element(mine, 2 * t), element(mine, 2 * t + 1));
    }
  }
}

}  // namespace cuda_sim
