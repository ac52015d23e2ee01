// Emulations of the PTX shared-memory instructions of src/backend/cuda/cuda_mma_ptx.cuh, the
// simulator's stand-ins for their inline assembly:
//   cp.async.cg.shared.global (16 bytes) with commit_group / wait_group - the source is read at
//     issue, but the shared-memory destination is written only when a wait_group of the issuing
//     thread completes the copy's committed group (the latest possible moment, as the hardware
//     promises nothing earlier): a read of the destination before that wait - __syncthreads
//     alone does not complete copies - sees what was there before. Copies a thread never waits
//     for are dropped when its block ends.
//   ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 - warp-collective: lane 8 i + r names row r
//     of 8x8 matrix i (16 bytes, 16-byte aligned); every lane receives register i per the PTX ISA
//     fragment layout: without .trans, row lane / 4, elements 2 (lane % 4) and + 1 (low half
//     first); with .trans, column lane / 4, rows 2 (lane % 4) and + 1.
#pragma once
#include <cstdint>

namespace cuda_sim {

// Starts a copy of 16 bytes from `global_src` to `shared_dst`; both must be 16-byte aligned (a
// fault otherwise, as the hardware's misaligned-address error).
void cp_async_16(void* shared_dst, const void* global_src);
// Closes the calling thread's group of copies started since its previous commit.
void cp_async_commit();
// Completes the calling thread's committed groups but the `pending` most recent.
void cp_async_wait(int pending);

// The calling lane's four registers of ldmatrix .x4 (`trans`: the .trans variant); `row` is the
// row address this lane supplies. Every lane of the warp must call it together.
void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans);

}  // namespace cuda_sim
