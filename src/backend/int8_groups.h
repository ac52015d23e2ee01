// Int8Groups: symmetric int8 quantization of a flat buffer in groups of consecutive elements,
// the packed form ZeRO++ puts on the wire (quantized weight gathers, qwZ; quantized gradient
// reductions, qgZ; sharding/zero_plus_plus.h) through Backend::quantize_int8_groups and
// dequantize_int8_groups.
//
// `count` values are cut into groups of `group` elements (the last one may be shorter). A group
// has one f32 scale, max|x| / 127, and each element one code, round-half-to-even(x / scale)
// clamped to [-127, 127], decoding to code * scale. So the error of an element is at most half
// a step, scale / 2: 1/254 of its group's largest magnitude.
// Two kinds of group are special, so no value is ever invented or hidden:
//   * a group whose scale would be below the smallest normal f32 (all zeros, or magnitudes
//     under about 1.5e-36) gets scale 0 and codes 0: it decodes to zeros;
//   * a group holding Inf or NaN gets scale NaN and codes 0: every element decodes to NaN, so an
//     overflowed gradient stays an overflow after the trip (loss scaling sees it).
//
// The packed buffer (u8 [packed_bytes()]):
//   bytes [0, count)                               the codes, int8 in two's complement
//   bytes [scale_offset(), scale_offset() + 4 * groups())   the f32 scales, group order
// scale_offset() is count rounded up to a multiple of 4, so the scales are aligned and the packed
// size is a multiple of 4 (buffers of equal counts concatenate into aligned rank-major blocks).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend {

struct Int8Groups {
  int64_t count = 0;  // elements quantized
  int64_t group = 1;  // elements per group (>= 1)

  int64_t groups() const { return count == 0 ? 0 : (count - 1) / group + 1; }
  int64_t scale_offset() const { return (count + 3) / 4 * 4; }
  int64_t packed_bytes() const { return scale_offset() + 4 * groups(); }
};

// The largest code; a scale is max|x| / kInt8GroupMaxCode.
inline constexpr int kInt8GroupMaxCode = 127;

// Argument checks shared by every backend (ShapeError / UnsupportedError naming `op`):
// `values` defined, contiguous, f32, bf16 or f16; `packed` defined, contiguous, u8 of
// Int8Groups{values.numel(), group}.packed_bytes(); group >= 1. Returns that layout.
Int8Groups check_int8_groups_args(const char* op, const Tensor& values, const Tensor& packed,
                                  int64_t group);

}  // namespace zero::backend
