#include "backend/cpu/cpu_f32_twins.h"

#include "backend/cpu/cpu_elementwise.h"
#include "core/allocator.h"
#include "core/check.h"

namespace zero::backend::cpu {

bool is_16bit(const Tensor& t) {
  return t.defined() && (t.dtype() == DType::kBF16 || t.dtype() == DType::kF16);
}
bool is_16bit(const Tensor* t) { return t != nullptr && is_16bit(*t); }

F32Twins::Twin& F32Twins::twin_of(const Tensor& t) {
  const Storage* key = t.storage().get();
  auto found = twins_.find(key);
  if (found != twins_.end()) {
    ZERO_CHECK(found->second.dtype == t.dtype(), "one storage viewed as two 16-bit dtypes");
    return found->second;
  }
  Twin twin;
  twin.original = t.storage();
  twin.dtype = t.dtype();
  twin.elements = static_cast<int64_t>(t.storage()->bytes() / dtype_size(t.dtype()));
  const Tensor narrow(twin.original, twin.dtype, {twin.elements}, {1}, 0);
  twin.wide = Tensor::empty(cpu_allocator(), {twin.elements}, DType::kF32, MemoryCategory::kWorkspace);
  copy(twin.wide, narrow);
  return twins_.emplace(key, std::move(twin)).first->second;
}

Tensor& F32Twins::keep(Tensor view) {
  views_.push_back(std::make_unique<Tensor>(std::move(view)));
  return *views_.back();
}

const Tensor& F32Twins::in(const Tensor& t) {
  if (!is_16bit(t)) return t;
  Twin& twin = twin_of(t);
  return keep(Tensor(twin.wide.storage(), DType::kF32, t.shape(), t.strides(), t.offset()));
}

const Tensor* F32Twins::in(const Tensor* t) { return t == nullptr ? nullptr : &in(*t); }

Tensor& F32Twins::out(Tensor& t) {
  if (!is_16bit(t)) return t;
  Twin& twin = twin_of(t);
  twin.written = true;
  return keep(Tensor(twin.wide.storage(), DType::kF32, t.shape(), t.strides(), t.offset()));
}

Tensor* F32Twins::out(Tensor* t) { return t == nullptr ? nullptr : &out(*t); }

void F32Twins::finish() {
  for (auto& [key, twin] : twins_) {
    if (!twin.written) continue;
    Tensor narrow(twin.original, twin.dtype, {twin.elements}, {1}, 0);
    copy(narrow, twin.wide);  // round-to-nearest-even, once
  }
}

}  // namespace zero::backend::cpu
