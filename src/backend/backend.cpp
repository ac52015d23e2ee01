#include "backend/backend.h"

namespace zero::backend {

Tensor Backend::empty(const Shape& shape, DType dtype, MemoryCategory category) {
  return Tensor::empty(allocator(), shape, dtype, category);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t = empty(shape, dtype, category);
  fill(t, 0.0);
  return t;
}

}  // namespace zero::backend
