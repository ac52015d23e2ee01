// CPU kernel for Backend::stochastic_round_to_bf16 (see backend.h and core/stochastic_rounding.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

// dst[i] (bf16) = src[i] (f32) rounded stochastically with the bits of element first_index + i.
void stochastic_round_to_bf16(Tensor& dst, const Tensor& src, uint64_t seed, int64_t first_index);

}  // namespace zero::backend::cpu
