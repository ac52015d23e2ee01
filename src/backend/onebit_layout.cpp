#include "backend/onebit_layout.h"

#include <numeric>
#include <string>

#include "core/checked_math.h"
#include "core/error.h"

namespace zero::backend {

OneBitLayout OneBitLayout::build(std::span<const ParamSegment> segments, int world) {
  if (world < 1) throw ShapeError("OneBitLayout: world size " + std::to_string(world) + " < 1");
  OneBitLayout layout;
  layout.world = world;
  // DeepSpeed's divider: lcm(world, 8), so that every chunk is a whole number of bytes.
  const int64_t unit = static_cast<int64_t>(world) * std::lcm<int64_t>(world, 8);
  const std::string what = "the 1-bit compression buffers";
  for (const ParamSegment& s : segments) {
    if (s.offset < 0 || s.length < 0) {
      throw ShapeError("OneBitLayout: segment [" + std::to_string(s.offset) + ", +" +
                       std::to_string(s.length) + ") has a negative offset or length");
    }
    if (s.length == 0) continue;
    OneBitSegment out;
    out.offset = s.offset;
    out.length = s.length;
    const int64_t rounded_up = checked_sum(s.length, unit - 1, what);
    out.padded = checked_product({rounded_up / unit, unit}, what);
    out.error_offset = layout.worker_elements;
    out.chunk_offset = layout.server_elements;
    out.byte_offset = layout.block_bytes;
    const int64_t chunk = out.padded / world;
    layout.worker_elements = checked_sum(layout.worker_elements, out.padded, what);
    layout.server_elements = checked_sum(layout.server_elements, chunk, what);
    layout.block_bytes = checked_sum(layout.block_bytes, chunk / 8, what);
    layout.segments.push_back(out);
  }
  return layout;
}

namespace {

void require(const char* op, const char* name, const Tensor& t, DType dtype, int64_t numel) {
  if (!t.defined() || t.dtype() != dtype || t.numel() != numel) {
    throw ShapeError(std::string(op) + ": " + name + " must be " + dtype_name(dtype) + " [" +
                     std::to_string(numel) + "] for this layout, got " +
                     (t.defined() ? t.describe() : std::string("an undefined tensor")));
  }
}

void require_values(const char* op, const Tensor& values, const OneBitLayout& layout) {
  if (!values.defined() || values.dtype() != DType::kF32) {
    throw ShapeError(std::string(op) + ": values must be f32, got " +
                     (values.defined() ? values.describe() : std::string("an undefined tensor")));
  }
  for (const OneBitSegment& s : layout.segments) {
    if (s.offset + s.length > values.numel()) {
      throw ShapeError(std::string(op) + ": segment [" + std::to_string(s.offset) + ", +" +
                       std::to_string(s.length) + ") is outside the " +
                       std::to_string(values.numel()) + "-element values buffer");
    }
  }
}

}  // namespace

void check_onebit_worker_args(const char* op, const Tensor& bits, const Tensor& scales,
                              const Tensor& worker_error, const Tensor& values,
                              const OneBitLayout& layout) {
  require(op, "bits", bits, DType::kU8, layout.world * layout.block_bytes);
  require(op, "scales", scales, DType::kF32, layout.segment_count());
  require(op, "worker_error", worker_error, DType::kF32, layout.worker_elements);
  require_values(op, values, layout);
}

void check_onebit_server_args(const char* op, const Tensor& bits_out, const Tensor& scales_out,
                              const Tensor& server_error, const Tensor& bits_in,
                              const Tensor& scales_in, const OneBitLayout& layout) {
  require(op, "bits_out", bits_out, DType::kU8, layout.block_bytes);
  require(op, "scales_out", scales_out, DType::kF32, layout.segment_count());
  require(op, "server_error", server_error, DType::kF32, layout.server_elements);
  require(op, "bits_in", bits_in, DType::kU8, layout.world * layout.block_bytes);
  require(op, "scales_in", scales_in, DType::kF32, layout.world * layout.segment_count());
}

void check_onebit_decompress_args(const char* op, const Tensor& values, const Tensor& bits,
                                  const Tensor& scales, const OneBitLayout& layout) {
  require(op, "bits", bits, DType::kU8, layout.world * layout.block_bytes);
  require(op, "scales", scales, DType::kF32, layout.world * layout.segment_count());
  require_values(op, values, layout);
}

}  // namespace zero::backend
