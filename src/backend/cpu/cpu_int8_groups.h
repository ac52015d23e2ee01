// CPU int8 group quantization: Backend::quantize_int8_groups and dequantize_int8_groups
// (semantics and layout in backend/int8_groups.h). Groups are independent, so they run in
// parallel and the bytes do not depend on the thread count.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace zero::backend::cpu {

void quantize_int8_groups(Tensor& packed, const Tensor& values, int64_t group);
void dequantize_int8_groups(Tensor& values, const Tensor& packed, int64_t group, bool accumulate);

}  // namespace zero::backend::cpu
