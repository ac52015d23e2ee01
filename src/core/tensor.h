// Tensor: a typed, strided view (shape, strides in elements, element offset) into shared
// Storage. Copying a Tensor copies the view, not the data. Element access through data<T>() is
// only for host (CPU) tensors; device tensors are touched only by their backend's kernels.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/storage.h"

namespace zero {

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Shape strides,
         int64_t offset_elements);

  // A new contiguous tensor from `allocator` (uninitialised memory).
  static Tensor empty(Allocator& allocator, const Shape& shape, DType dtype,
                      MemoryCategory category);
  // A new contiguous host tensor, zero-filled.
  static Tensor zeros_host(const Shape& shape, DType dtype,
                           MemoryCategory category = MemoryCategory::kOther);
  // A contiguous view over memory owned elsewhere (kept alive through `owner`).
  static Tensor borrow(void* data, const Shape& shape, DType dtype, Device device,
                       std::shared_ptr<const void> owner);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  size_t element_size() const { return dtype_size(dtype_); }
  int64_t offset() const { return offset_; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // The address of element 0 (a device address for device tensors: pass it to the backend or a
  // communication library, never dereference it on the host).
  void* raw_data() const;
  template <typename T>
  T* data() const {
    ZERO_CHECK(DTypeOf<T>::value == dtype_, "data<" << dtype_name(DTypeOf<T>::value)
                                                   << ">() on a " << dtype_name(dtype_) << " tensor");
    // Host code reading or writing device memory is the bug this check exists for: move the
    // work into a Backend op or an explicit copy_to_host/copy_from_host.
    ZERO_CHECK(device().is_cpu(), "data<" << dtype_name(DTypeOf<T>::value) << ">() on "
                                          << describe() << ": device tensors are only touched "
                                          << "by their backend");
    return static_cast<T*>(raw_data());
  }

  // Views (share storage):
  // A contiguous view of `shape` starting `offset_elements` into this contiguous tensor.
  Tensor view(int64_t offset_elements, const Shape& shape) const;
  // Same elements, new shape; requires a contiguous tensor and equal numel.
  Tensor reshape(const Shape& shape) const;
  // Rows [begin, end) along dimension 0.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Elements [begin, end) along dimension `d` (keeps the dimension; strides unchanged).
  Tensor narrow(int64_t d, int64_t begin, int64_t length) const;
  // Whole-tensor flat view [numel] of a contiguous tensor.
  Tensor flatten() const { return reshape({numel()}); }

  std::string describe() const;  // "f32[2, 3] on cpu"

 private:
  std::shared_ptr<Storage> storage_;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;  // elements
};

// Throws ShapeError naming `what` unless `tensor` has exactly `shape`.
void expect_shape(const Tensor& tensor, const Shape& shape, const std::string& what);
// Throws ShapeError naming `what` unless `tensor` has dtype `dtype`.
void expect_dtype(const Tensor& tensor, DType dtype, const std::string& what);

}  // namespace zero
