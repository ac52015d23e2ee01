// The warp-collective emulation of PTX mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: the
// simulator's stand-in for the inline assembly of src/backend/cuda/cuda_attention_mma.cu.
#pragma once
#include <cstdint>

namespace cuda_sim {

// D = A B + C for the calling lane's fragments (PTX ISA fragment layout of m16n8k16, 16-bit A/B,
// f32 C/D): a = a0..a3 (two elements each, low half first), b = b0, b1, c = c0..c3 (replaced by
// D). Every lane of the warp must call it together.
void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], bool bf16);

}  // namespace cuda_sim
