#include "backend/cpu/cpu_onebit.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_checks.h"

namespace zero::backend::cpu {
namespace {

// Elements a partial sum of squares covers; the partials are added in order.
constexpr int64_t kSumBlock = 8192;

// sum(x(i)^2) for i in [0, n) in f64, in kSumBlock blocks summed in block order.
template <typename ValueAt>
double blocked_sum_squares(int64_t n, const ValueAt& value_at) {
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    double sum = 0.0;
    const int64_t end = std::min(n, (b + 1) * kSumBlock);
    for (int64_t i = b * kSumBlock; i < end; ++i) {
      const double x = value_at(i);
      sum += x * x;
    }
    partial[static_cast<size_t>(b)] = sum;
  }
  double total = 0.0;
  for (const double p : partial) total += p;
  return total;
}

float scale_of(double sum_squares, int64_t count) {
  return static_cast<float>(std::sqrt(sum_squares) / std::sqrt(static_cast<double>(count)));
}

// DeepSpeed's sign().add_(1).bool(): true for x >= 0 and for NaN.
inline bool sign_bit(float x) { return !(x < 0.0f); }

inline bool bit_at(const uint8_t* bytes, int64_t element) {
  return ((bytes[element / 8] >> (7 - element % 8)) & 1u) != 0;
}

}  // namespace

void onebit_worker_compress(Tensor& bits, Tensor& scales, Tensor& worker_error,
                            const Tensor& values, const OneBitLayout& layout) {
  const char* op = "onebit_worker_compress";
  check_onebit_worker_args(op, bits, scales, worker_error, values, layout);
  require_contiguous(bits, op, "bits");
  require_contiguous(scales, op, "scales");
  require_contiguous(worker_error, op, "worker_error");
  require_contiguous(values, op, "values");
  uint8_t* out = bits.data<uint8_t>();
  float* scale_out = scales.data<float>();
  for (int64_t k = 0; k < layout.segment_count(); ++k) {
    const OneBitSegment& s = layout.segments[static_cast<size_t>(k)];
    const float* v = values.data<float>() + s.offset;
    float* e = worker_error.data<float>() + s.error_offset;
    const int64_t length = s.length;
    // The compensated value: the padding is zeros plus its own error.
    const auto compensated = [&](int64_t i) { return (i < length ? v[i] : 0.0f) + e[i]; };
    const float scale = scale_of(blocked_sum_squares(s.padded, compensated), s.padded);
    scale_out[k] = scale;
    const int64_t chunk = layout.chunk(s);
    const int64_t bytes = s.padded / 8;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < bytes; ++q) {
      uint8_t byte = 0;
      for (int64_t i = q * 8; i < q * 8 + 8; ++i) {
        const float b = compensated(i);
        const bool positive = sign_bit(b);
        e[i] = b - scale * (positive ? 1.0f : -1.0f);
        byte = static_cast<uint8_t>(byte | (positive ? 1u << (7 - i % 8) : 0u));
      }
      // Byte q lies wholly in chunk (8q / chunk): chunks are multiples of 8 elements.
      const int64_t r = q * 8 / chunk;
      out[r * layout.block_bytes + s.byte_offset + (q * 8 - r * chunk) / 8] = byte;
    }
  }
}

void onebit_server_compress(Tensor& bits_out, Tensor& scales_out, Tensor& server_error,
                            const Tensor& bits_in, const Tensor& scales_in,
                            const OneBitLayout& layout) {
  const char* op = "onebit_server_compress";
  check_onebit_server_args(op, bits_out, scales_out, server_error, bits_in, scales_in, layout);
  require_contiguous(bits_out, op, "bits_out");
  require_contiguous(scales_out, op, "scales_out");
  require_contiguous(server_error, op, "server_error");
  require_contiguous(bits_in, op, "bits_in");
  require_contiguous(scales_in, op, "scales_in");
  const uint8_t* in = bits_in.data<uint8_t>();
  const float* worker_scales = scales_in.data<float>();
  uint8_t* out = bits_out.data<uint8_t>();
  const int64_t segments = layout.segment_count();
  // DeepSpeed multiplies each worker's scale by the f32 of 1 / world.
  const auto inv_world = static_cast<float>(1.0 / layout.world);
  std::vector<float> weight(static_cast<size_t>(layout.world));
  for (int64_t k = 0; k < segments; ++k) {
    const OneBitSegment& s = layout.segments[static_cast<size_t>(k)];
    const int64_t chunk = layout.chunk(s);
    for (int r = 0; r < layout.world; ++r) {
      weight[static_cast<size_t>(r)] = worker_scales[r * segments + k] * inv_world;
    }
    float* e = server_error.data<float>() + s.chunk_offset;
    const auto averaged = [&](int64_t j) {
      float c = 0.0f;
      for (int r = 0; r < layout.world; ++r) {
        const float w = weight[static_cast<size_t>(r)];
        c += bit_at(in + r * layout.block_bytes + s.byte_offset, j) ? w : -w;
      }
      return c + e[j];
    };
    const float scale = scale_of(blocked_sum_squares(chunk, averaged), chunk);
    scales_out.data<float>()[k] = scale;
#pragma omp parallel for schedule(static)
    for (int64_t q = 0; q < chunk / 8; ++q) {
      uint8_t byte = 0;
      for (int64_t j = q * 8; j < q * 8 + 8; ++j) {
        const float c = averaged(j);
        const bool positive = sign_bit(c);
        e[j] = c - scale * (positive ? 1.0f : -1.0f);
        byte = static_cast<uint8_t>(byte | (positive ? 1u << (7 - j % 8) : 0u));
      }
      out[s.byte_offset + q] = byte;
    }
  }
}

void onebit_decompress(Tensor& values, const Tensor& bits, const Tensor& scales,
                       const OneBitLayout& layout) {
  const char* op = "onebit_decompress";
  check_onebit_decompress_args(op, values, bits, scales, layout);
  require_contiguous(values, op, "values");
  require_contiguous(bits, op, "bits");
  require_contiguous(scales, op, "scales");
  const uint8_t* in = bits.data<uint8_t>();
  const float* server_scales = scales.data<float>();
  const int64_t segments = layout.segment_count();
  for (int64_t k = 0; k < segments; ++k) {
    const OneBitSegment& s = layout.segments[static_cast<size_t>(k)];
    const int64_t chunk = layout.chunk(s);
    float* v = values.data<float>() + s.offset;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < s.length; ++i) {
      const int64_t r = i / chunk;
      const float scale = server_scales[r * segments + k];
      v[i] = bit_at(in + r * layout.block_bytes + s.byte_offset, i - r * chunk) ? scale : -scale;
    }
  }
}

}  // namespace zero::backend::cpu
