// swap_checksum: a 64-bit checksum of swapped bytes, so a block of optimizer state that changed
// on disk between zero.cpp's write and its read (bit rot, another process, a file replaced or
// zeroed) is a clear error instead of silently wrong training.
//
// Not cryptographic: it catches accidental changes. Four independent multiply-rotate lanes per
// 1 MiB chunk (so the multiplies pipeline), chunks hashed in parallel with OpenMP and combined in
// order, so the result does not depend on the thread count. Several GB/s per core: well above
// what a disk delivers.
#pragma once
#include <cstdint>

namespace zero::offload {

// `bytes` must be a multiple of 8 (swap blocks are multiples of the O_DIRECT alignment).
uint64_t swap_checksum(const void* data, int64_t bytes);

}  // namespace zero::offload
