// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: each lane holds part of A (16x16), B (16x8)
// and C/D (16x8); with groupID = lane / 4 and t = lane % 4 (threadID_in_group), the PTX ISA
// places (two 16-bit elements per register, the lower column/row in the low half):
//   A: a0 = (groupID, 2t..2t+1), a1 = (groupID + 8, 2t..), a2 = (groupID, 2t + 8..),
//      a3 = (groupID + 8, 2t + 8..)
//   B: b0 = (k = 2t..2t+1, n = groupID), b1 = (k = 2t + 8.., n = groupID)
//   C, D: c0, c1 = (groupID, 2t..2t+1), c2, c3 = (groupID + 8, 2t..2t+1)
// The lanes exchange their A and B registers; each then computes its own four D elements,
// multiplying exactly (16-bit products fit f32) and accumulating in f32 in k order, starting
// from C.
#include "cuda_sim/mma.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <vector>

#include "cuda_sim/thread_state.h"

namespace cuda_sim {
namespace {

struct Operands {
  uint32_t a[4];
  uint32_t b[2];
};
static_assert(sizeof(Operands) <= kWarpSlotBytes);

// f16 bits -> f32 for all 65536 patterns, built once (the emulation decodes 64 values per lane
// per instruction).
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      __half_raw raw;
      raw.x = static_cast<uint16_t>(bits);
      t[bits] = __half2float(__half(raw));
    }
    return t;
  }();
  return table.data();
}

float widen(uint16_t bits, bool bf16) {
  if (bf16) {
    const uint32_t word = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &word, sizeof(f));
    return f;
  }
  return f16_table()[bits];
}

uint16_t half_of(uint32_t word, unsigned which) {
  return static_cast<uint16_t>(which == 0 ? word & 0xffffu : word >> 16);
}

const Operands& lane_operands(const unsigned char* slots, unsigned lane) {
  return *reinterpret_cast<const Operands*>(slots + lane * kWarpSlotBytes);
}

// Row `row` of the 16x16 A tile.
void a_row(const unsigned char* slots, unsigned row, bool bf16, float (&out)[16]) {
  for (unsigned k = 0; k < 16; ++k) {
    const unsigned lane = 4 * (row % 8) + (k % 8) / 2;
    const unsigned reg = (row < 8 ? 0u : 1u) + (k < 8 ? 0u : 2u);
    out[k] = widen(half_of(lane_operands(slots, lane).a[reg], k % 2), bf16);
  }
}

// Column `n` of the 16x8 B tile.
void b_column(const unsigned char* slots, unsigned n, bool bf16, float (&out)[16]) {
  for (unsigned k = 0; k < 16; ++k) {
    const unsigned lane = 4 * n + (k % 8) / 2;
    const unsigned reg = k < 8 ? 0u : 1u;
    out[k] = widen(half_of(lane_operands(slots, lane).b[reg], k % 2), bf16);
  }
}

}  // namespace

void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16) {
  Operands mine;
  std::memcpy(mine.a, a, sizeof(mine.a));
  std::memcpy(mine.b, b, sizeof(mine.b));
  const unsigned char* slots = warp_exchange(0xffffffffu, &mine, sizeof(mine),
                                             bf16 ? "mma.m16n8k16.bf16" : "mma.m16n8k16.f16");
  const unsigned lane = lane_id(), group = lane / 4, t = lane % 4;
  float rows[2][16], columns[2][16];
  a_row(slots, group, bf16, rows[0]);
  a_row(slots, group + 8, bf16, rows[1]);
  b_column(slots, 2 * t, bf16, columns[0]);
  b_column(slots, 2 * t + 1, bf16, columns[1]);
  for (unsigned i = 0; i < 4; ++i) {
    const float* row = rows[i / 2];
    const float* column = columns[i % 2];
    float acc = c[i];
    for (unsigned k = 0; k < 16; ++k) acc += row[k] * column[k];
    c[i] = acc;
  }
}

}  // namespace cuda_sim
