#include "sharding/dtype_ops.h"

#include "core/check.h"

namespace zero::sharding {

void accumulate(backend::Backend& backend, Tensor& acc, const Tensor& x) {
  ZERO_CHECK(acc.numel() == x.numel(), "accumulate: " << acc.describe() << " += " << x.describe());
  if (acc.dtype() == x.dtype() && acc.dtype() == DType::kF32) {
    backend.add(acc, x, 1.0);
    return;
  }
  Tensor sum = backend.empty({acc.numel()}, DType::kF32, MemoryCategory::kWorkspace);
  backend.copy(sum, acc);
  Tensor addend = x;
  if (x.dtype() != DType::kF32) {
    addend = backend.empty({x.numel()}, DType::kF32, MemoryCategory::kWorkspace);
    backend.copy(addend, x);
  }
  backend.add(sum, addend, 1.0);
  backend.copy(acc, sum);
}

void round_through(backend::Backend& backend, Tensor& values, DType dtype) {
  ZERO_CHECK(values.dtype() == DType::kF32, "round_through needs f32 values, got " << values.describe());
  backend.round_in_place(values, dtype);  // one fused pass on a device
}

}  // namespace zero::sharding
