// The inline PTX of the tensor-core attention (cuda_attention_mma.cu): mma.sync m16n8k16,
// ldmatrix (x4, plain and .trans), 16-byte cp.async with its commit/wait groups, and ex2 with
// flush-to-zero. Each wrapper
// has a simulator twin (tests/cuda_sim: mma.cpp, ptx_memory.cpp) that ZERO_CUDA_SIM builds call
// instead: the CPU simulator cannot run PTX, so it emulates the same warp-collective
// instructions, fragment layouts included.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>

#ifdef ZERO_CUDA_SIM
#include "cuda_sim/ptx_memory.h"
#endif

namespace zero::backend::cuda::mma_ptx {

// c += A B for the lane's fragments of A (16x16, a0..a3), B (16x8, b0, b1) and C (16x8 f32).
template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                    uint32_t a3, uint32_t b0, uint32_t b1) {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::mma_m16n8k16(c, {a0, a1, a2, a3}, {b0, b1}, kBf16);
#else
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#endif
}

// 2^x, with results below FLT_MIN flushed to +0: one MUFU.EX2 instruction. exp2f() compiles to
// ex2.approx.f32 without .ftz, which wraps the MUFU in a compare and two multiplies to return
// subnormal results; the attention's probabilities that small (2^-126 of the row's largest)
// add nothing a bf16 or f16 product or an f32 row sum can keep next to it. The forward uses it.
// The backward kernels keep exp2f: with ex2.ftz ptxas gives the dQ kernels more registers (D = 64:
// 148 instead of 128, one block an SM fewer; bounded back, they spill), likewise several v2
// configurations, and the dK/dV kernels must keep giving v2's bytes.
__device__ __forceinline__ float exp2_ftz(float x) {
#ifdef ZERO_CUDA_SIM
  const float y = std::exp2(x);
  return y < FLT_MIN ? 0.0f : y;
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

// ldmatrix.x4: lane 8 i + r passes the address of row r of 8x8 matrix i (16 bytes of shared
// memory, 16-byte aligned); r[i] receives, without .trans, row lane / 4, columns 2 (lane % 4)
// and + 1 of matrix i (an A or B fragment register of a row-major tile); with .trans, column
// lane / 4, rows 2 (lane % 4) and + 1 (a B fragment of a tile stored k-major). Warp-collective.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::ldmatrix_x4(r, row, kTrans);
#else
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  }
#endif
}

// 16 bytes global -> shared without passing through registers (.cg: cached in L2 only); both
// addresses 16-byte aligned. Complete once a later cp_async_wait<n> leaves at most n groups.
__device__ __forceinline__ void cp_async_16(uint16_t* shared_dst, const uint16_t* global_src) {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::cp_async_16(shared_dst, global_src);
#else
  const uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global_src)
               : "memory");
#endif
}

// Closes the group of this thread's cp.async issued since the previous commit (possibly none).
__device__ __forceinline__ void cp_async_commit() {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` of this thread's committed groups are still in flight. Other
// threads' copies become visible only after a following __syncthreads.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#ifdef ZERO_CUDA_SIM
  ::cuda_sim::cp_async_wait(kPending);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

}  // namespace zero::backend::cuda::mma_ptx
