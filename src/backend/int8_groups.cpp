#include "backend/int8_groups.h"

#include <string>

#include "core/error.h"

namespace zero::backend {

Int8Groups check_int8_groups_args(const char* op, const Tensor& values, const Tensor& packed,
                                  int64_t group) {
  if (group < 1) {
    throw ShapeError(std::string(op) + ": group size " + std::to_string(group) +
                     " must be at least 1 element");
  }
  if (!values.defined() || !values.is_contiguous()) {
    throw ShapeError(std::string(op) + ": values must be a defined contiguous tensor, got " +
                     (values.defined() ? values.describe() : std::string("an undefined tensor")));
  }
  const DType dtype = values.dtype();
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    throw UnsupportedError(std::string(op) + ": values must be f32, bf16 or f16, not " +
                           dtype_name(dtype));
  }
  const Int8Groups layout{values.numel(), group};
  if (!packed.defined() || !packed.is_contiguous() || packed.dtype() != DType::kU8 ||
      packed.numel() != layout.packed_bytes()) {
    throw ShapeError(std::string(op) + ": packed must be contiguous u8 [" +
                     std::to_string(layout.packed_bytes()) + "] (" +
                     std::to_string(layout.count) + " codes, then " +
                     std::to_string(layout.groups()) + " f32 scales), got " +
                     (packed.defined() ? packed.describe() : std::string("an undefined tensor")));
  }
  return layout;
}

}  // namespace zero::backend
