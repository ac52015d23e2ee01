// CPU rotary position embedding (rotate-half convention), in place on strided q/k views.
// See Backend::rope_apply.
#pragma once
#include "core/tensor.h"

namespace zero::backend::cpu {

void rope_apply(Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse);

}  // namespace zero::backend::cpu
