// Warp shuffles and votes over the simulator's warp exchange: every lane of the mask deposits
// its value, and each reads its source lane's. A source lane outside the mask has no defined
// value on the hardware: that is a fault here.
#pragma once
#include <cstring>
#include <string>
#include <type_traits>

#include "cuda_sim/thread_state.h"

namespace cuda_sim {

template <typename T>
T shuffle_from(unsigned mask, T value, unsigned source_lane, const char* op) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kWarpSlotBytes);
  const unsigned char* slots = warp_exchange(mask, &value, sizeof(T), op);
  if ((mask >> source_lane & 1u) == 0) {
    kernel_fault(std::string(op) + " reads lane " + std::to_string(source_lane) +
                 ", which its mask " + std::to_string(mask) + " does not name");
  }
  T result;
  std::memcpy(&result, slots + source_lane * kWarpSlotBytes, sizeof(T));
  return result;
}

// The first lane of the caller's `width`-lane segment (width a power of two up to 32).
inline unsigned segment_base(int width) {
  return lane_id() & ~(static_cast<unsigned>(width) - 1);
}

}  // namespace cuda_sim

template <typename T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = 32) {
  const unsigned source = ::cuda_sim::segment_base(width) + (static_cast<unsigned>(source_lane) %
                                                             static_cast<unsigned>(width));
  return ::cuda_sim::shuffle_from(mask, value, source, "__shfl_sync");
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  const unsigned lane = ::cuda_sim::lane_id();
  unsigned source = lane ^ static_cast<unsigned>(lane_mask);
  // A source beyond the caller's segment reads the caller's own value.
  if (source / static_cast<unsigned>(width) != lane / static_cast<unsigned>(width)) source = lane;
  return ::cuda_sim::shuffle_from(mask, value, source, "__shfl_xor_sync");
}

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::cuda_sim::lane_id();
  const unsigned end = ::cuda_sim::segment_base(width) + static_cast<unsigned>(width);
  const unsigned source = lane + delta < end ? lane + delta : lane;
  return ::cuda_sim::shuffle_from(mask, value, source, "__shfl_down_sync");
}

template <typename T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = 32) {
  const unsigned lane = ::cuda_sim::lane_id();
  const unsigned base = ::cuda_sim::segment_base(width);
  const unsigned source = lane >= base + delta ? lane - delta : lane;
  return ::cuda_sim::shuffle_from(mask, value, source, "__shfl_up_sync");
}

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  const char none = 0;
  ::cuda_sim::warp_exchange(mask, &none, 1, "__syncwarp");
}

inline unsigned __ballot_sync(unsigned mask, int predicate) {
  const bool mine = predicate != 0;
  const unsigned char* slots = ::cuda_sim::warp_exchange(mask, &mine, 1, "__ballot_sync");
  unsigned ballot = 0;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if ((mask >> lane & 1u) && slots[lane * ::cuda_sim::kWarpSlotBytes]) ballot |= 1u << lane;
  }
  return ballot;
}
inline bool __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline bool __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}
