// Emulations of the PTX shared-memory instructions of src/backend/cuda/cuda_mma_ptx.cuh, the
// simulator's stand-ins for their inline assembly:
//   cp.async.cg.shared.global (16 bytes)  - copied at once: the simulator runs a block's threads
//     as fibers that switch only at barriers and warp-collective calls, so a copy that completes
//     when issued is one legal schedule of the asynchronous copy; commit/wait groups are no-ops.
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 - warp-collective: lane 8 i + r names row r
//     of 8x8 matrix i (16 bytes, 16-byte aligned); every lane receives register i per the PTX ISA
//     fragment layout: without .trans, row lane / 4, elements 2 (lane % 4) and + 1 (low half
//     first); with .trans, column lane / 4, rows 2 (lane % 4) and + 1.
#pragma once
#include <cstdint>

namespace cuda_sim {

// Copies 16 bytes from `global_src` to `shared_dst`; both must be 16-byte aligned (a fault
// otherwise, as the hardware's misaligned-address error).
void cp_async_16(void* shared_dst, const void* global_src);

// The calling lane's four registers of ldmatrix .x4 (`trans`: the .trans variant); `row` is the
// row address this lane supplies. Every lane of the warp must call it together.
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans);

}  // namespace cuda_sim
