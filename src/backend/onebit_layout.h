// OneBitLayout: where each parameter tensor's elements, errors and sign bits lie in 1-bit
// compression (1-bit Adam's compressed all-reduce, comm/compressed_all_reduce.h; the three
// Backend::onebit_* ops). Each parameter tensor (segment) is compressed on its own with its own
// scale, as DeepSpeed's 1-bit Adam compresses each torch parameter: one scale over the whole
// model would drown a LayerNorm bias in the embedding table's magnitude.
//
// A segment of `length` elements is padded with zeros to `padded`, the next multiple of
// world * lcm(world, 8) (DeepSpeed's padding: the scale divides by sqrt(padded), so the padding
// is part of the numbers), and split into `world` chunks of padded / world elements, a multiple
// of 8, so each chunk's signs fill whole bytes. Rank r serves chunk r of every segment.
//
// Buffers (all flat):
//   values        the f32 buffer being reduced (the optimizer's momentum), segments at `offset`
//   worker error  f32 [worker_elements]: each segment's padded run at `error_offset`
//   server error  f32 [server_elements]: each segment's chunk at `chunk_offset`
//   a block       u8 [block_bytes]: one chunk of every segment, in segment order, at
//                 `byte_offset`; the exchanges move world blocks (u8 [world * block_bytes])
//   scales        f32 [segments] per rank; gathered: [world * segments], rank-major
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/optimizer_kernels.h"
#include "core/tensor.h"

namespace zero::backend {

struct OneBitSegment {
  int64_t offset = 0;        // elements: the segment's first element in the values buffer
  int64_t length = 0;        // elements of the values buffer
  int64_t padded = 0;        // elements after zero padding (>= length, world chunks)
  int64_t error_offset = 0;  // elements: its padded run in the worker error buffer
  int64_t chunk_offset = 0;  // elements: its chunk in the server error buffer
  int64_t byte_offset = 0;   // bytes: its chunk's signs in a block
};

struct OneBitLayout {
  int world = 1;
  std::vector<OneBitSegment> segments;
  int64_t worker_elements = 0;  // sum of padded
  int64_t server_elements = 0;  // sum of padded / world
  int64_t block_bytes = 0;      // sum of padded / world / 8

  // The layout of `segments` (each a parameter tensor of the values buffer; segments of length
  // 0 are dropped) for `world` ranks (>= 1). Throws ShapeError on a negative offset or length
  // and ConfigError when the sizes overflow.
  static OneBitLayout build(std::span<const ParamSegment> segments, int world);

  int64_t chunk(const OneBitSegment& segment) const { return segment.padded / world; }
  int64_t segment_count() const { return static_cast<int64_t>(segments.size()); }
};

// The dtype and size checks every backend's onebit_* op makes first (ShapeError naming `op` and
// the buffer); where the tensors live and their contiguity each backend checks itself.
void check_onebit_worker_args(const char* op, const Tensor& bits, const Tensor& scales,
                              const Tensor& worker_error, const Tensor& values,
                              const OneBitLayout& layout);
void check_onebit_server_args(const char* op, const Tensor& bits_out, const Tensor& scales_out,
                              const Tensor& server_error, const Tensor& bits_in,
                              const Tensor& scales_in, const OneBitLayout& layout);
void check_onebit_decompress_args(const char* op, const Tensor& values, const Tensor& bits,
                                  const Tensor& scales, const OneBitLayout& layout);

}  // namespace zero::backend
