#include "backend/cpu/cpu_stochastic_round.h"

#include "core/error.h"
#include "core/stochastic_rounding.h"

namespace zero::backend::cpu {

void stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed, int64_t first_index) {
  if (dst.dtype() != DType::kBF16 || src.dtype() != DType::kF32 || dst.numel() != src.numel() ||
      !dst.is_contiguous() || !src.is_contiguous() || !dst.device().is_cpu() ||
      !src.device().is_cpu()) {
    throw ShapeError("stochastic_round_to_bf16 needs contiguous host bf16[n] <- f32[n], got " +
                     dst.describe() + " <- " + src.describe());
  }
  if (first_index < 0) throw ShapeError("stochastic_round_to_bf16: negative first_index");
  const float* in = src.data<float>();
  uint16_t* out = static_cast<uint16_t*>(dst.raw_data());
  const int64_t n = src.numel();
#pragma omp parallel for schedule(static) if (n >= (int64_t{1} << 15))
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t index = static_cast<uint64_t>(first_index + i);
    out[i] = float_to_bf16_bits_stochastic(in[i], stochastic_rounding_bits(seed, index));
  }
}

}  // namespace zero::backend::cpu
