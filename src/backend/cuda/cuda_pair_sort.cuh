// A stable CUB radix sort of n (uint32 key, uint32 value) pairs in caller-provided device
// scratch, shared by the ops that need a deterministic grouping: the embedding backward (ids
// with their positions) and the mixture-of-experts dispatch (expert ids with their pairs). Equal
// keys keep their values' input order, so the grouping does not depend on timing.
//
// Scratch layout: keys_in, keys_out, values_in, values_out (n uint32 each, 256-byte aligned),
// then CUB's temporary storage. The caller fills keys_in and values_in, sorts, and reads
// keys_out and values_out.
#pragma once
#include <cub/device/device_radix_sort.cuh>

#include <cstdint>

#include "backend/cuda/cuda_device_math.cuh"

namespace zero::backend::cuda {

inline size_t aligned_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// One block per row, at most 65535 blocks (the row kernels stride over the rest).
inline unsigned row_grid(int64_t rows) {
  constexpr int64_t kMaxBlocks = 65535;
  return static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
}

struct PairSortBuffers {
  uint32_t* keys_in;
  uint32_t* keys_out;
  uint32_t* values_in;
  uint32_t* values_out;
  void* temp;
  size_t temp_bytes;
};

inline size_t cub_pair_sort_bytes(int64_t n) {
  size_t bytes = 0;
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), static_cast<int>(n)));
  return bytes;
}

// Device scratch bytes for sorting n pairs.
inline size_t pair_sort_scratch_bytes(int64_t n) {
  return 4 * aligned_256(static_cast<size_t>(n) * sizeof(uint32_t)) +
         aligned_256(cub_pair_sort_bytes(n));
}

// The four arrays and CUB's storage inside `scratch` (at least pair_sort_scratch_bytes(n)).
inline PairSortBuffers carve_pair_sort(void* scratch, size_t scratch_bytes, int64_t n,
                                       const char* op) {
  ZERO_CHECK(n <= INT32_MAX, "" << op << ": " << n << " pairs exceed CUB's int count");
  ZERO_CHECK(scratch_bytes >= pair_sort_scratch_bytes(n),
             "" << op << ": scratch of " << scratch_bytes << " bytes is too small");
  const size_t array = aligned_256(static_cast<size_t>(n) * sizeof(uint32_t));
  char* base = static_cast<char*>(scratch);
  return {reinterpret_cast<uint32_t*>(base), reinterpret_cast<uint32_t*>(base + array),
          reinterpret_cast<uint32_t*>(base + 2 * array),
          reinterpret_cast<uint32_t*>(base + 3 * array), base + 4 * array,
          scratch_bytes - 4 * array};
}

// Sorts keys_in/values_in into keys_out/values_out on `stream`, over only the bits that keys up
// to max_key can set.
inline void stable_pair_sort(const PairSortBuffers& b, int64_t n, uint64_t max_key,
                             const char* op, cudaStream_t stream) {
  int end_bit = 1;
  while (end_bit < 32 && (uint64_t{1} << end_bit) <= max_key) ++end_bit;
  size_t needed = 0;
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, needed, b.keys_in, b.keys_out,
                                                  b.values_in, b.values_out,
                                                  static_cast<int>(n), 0, end_bit, stream));
  ZERO_CHECK(needed <= b.temp_bytes, "" << op << ": CUB needs " << needed
                                           << " bytes of temporary storage, " << b.temp_bytes
                                           << " given");
  size_t temp_bytes = b.temp_bytes;
  ZERO_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(b.temp, temp_bytes, b.keys_in, b.keys_out,
                                                  b.values_in, b.values_out,
                                                  static_cast<int>(n), 0, end_bit, stream));
}

}  // namespace zero::backend::cuda
