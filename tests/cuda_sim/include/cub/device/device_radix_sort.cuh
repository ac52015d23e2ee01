// The simulator's cub::DeviceRadixSort (found before the CUDA toolkit's cub in SIM builds):
// SortPairs as CUB specifies it - a size query when d_temp_storage is null, otherwise a stable
// sort of the pairs by the key bits [begin_bit, end_bit), run when its stream gets there. The
// temporary storage is checked to be large enough and is
// scribbled on, as CUB would use it.
#pragma once
#include <cuda_runtime.h>

#include "cuda_sim/streams.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  // Bytes of temporary storage this simulator asks for: a function of the item count only, as
  // CUB's is for a fixed key and value type.
  template <typename Key, typename Value>
  static size_t temp_bytes(int num_items) {
    return 256 + static_cast<size_t>(num_items > 0 ? num_items : 0) * (sizeof(Key) + sizeof(Value));
  }

  template <typename Key, typename Value>
  static cudaError_t SortPairs(void* d_temp_storage, size_t& temp_storage_bytes,
                               const Key* d_keys_in, Key* d_keys_out, const Value* d_values_in,
                               Value* d_values_out, int num_items, int begin_bit = 0,
                               int end_bit = sizeof(Key) * 8, cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<Key>, "the simulator sorts unsigned keys only");
    const size_t needed = temp_bytes<Key, Value>(num_items);
    if (d_temp_storage == nullptr) {
      temp_storage_bytes = needed;
      return cudaSuccess;
    }
    if (temp_storage_bytes < needed || begin_bit < 0 || end_bit > static_cast<int>(sizeof(Key) * 8) ||
        begin_bit > end_bit || num_items < 0) {
      return cudaErrorInvalidValue;
    }
    // Runs when the stream gets there (cuda_sim/streams.h).
    ::cuda_sim::enqueue(stream, [=] {
      const size_t n = static_cast<size_t>(num_items);
      const int width = end_bit - begin_bit;
      const Key mask = width >= static_cast<int>(sizeof(Key) * 8)
                           ? static_cast<Key>(~Key{0})
                           : static_cast<Key>((Key{1} << width) - 1);
      std::vector<Key> keys(d_keys_in, d_keys_in + n);
      std::vector<Value> values(d_values_in, d_values_in + n);
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), size_t{0});
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        return ((keys[x] >> begin_bit) & mask) < ((keys[y] >> begin_bit) & mask);
      });
      std::memset(d_temp_storage, 0xff, needed);
      for (size_t i = 0; i < n; ++i) {
        d_keys_out[i] = keys[order[i]];
        d_values_out[i] = values[order[i]];
      }
    });
    return cudaSuccess;
  }
};

}  // namespace cub
