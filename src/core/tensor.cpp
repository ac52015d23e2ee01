#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include "core/error.h"

namespace zero {

std::string shape_to_string(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

namespace {

// The product of the non-zero dimensions: it bounds every partial product (strides included),
// so when it fits int64 no product over this shape overflows. A zero dimension does not make a
// [2^62, 4, 0] shape sane: its strides would still overflow.
int64_t nonzero_extent(const Shape& shape) {
  int64_t product = 1;
  for (const int64_t s : shape) {
    if (s < 0) {
      throw ShapeError("the shape " + shape_to_string(shape) + " has a negative dimension");
    }
    if (s == 0) continue;
    if (__builtin_mul_overflow(product, s, &product)) {
      throw ShapeError("the shape " + shape_to_string(shape) +
                       " has more elements than a 64-bit count can hold; check where its sizes "
                       "came from (config.json, a file header, a flag)");
    }
  }
  return product;
}

}  // namespace

int64_t shape_numel(const Shape& shape) {
  const int64_t extent = nonzero_extent(shape);
  for (const int64_t s : shape) {
    if (s == 0) return 0;
  }
  return extent;
}

Shape contiguous_strides(const Shape& shape) {
  nonzero_extent(shape);  // throws when a stride below would overflow
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= shape[i];
  }
  return strides;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape shape, Shape strides,
               int64_t offset_elements)
    : storage_(std::move(storage)),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset_elements) {
  ZERO_CHECK(shape_.size() == strides_.size(), "shape and strides rank differ");
  for (int64_t s : shape_) ZERO_CHECK(s >= 0, "negative dimension in " << shape_to_string(shape_));
}

namespace {

// numel x element size, refused when the byte count does not fit.
size_t checked_nbytes(const Shape& shape, DType dtype) {
  const auto numel = static_cast<size_t>(shape_numel(shape));
  size_t bytes = 0;
  if (__builtin_mul_overflow(numel, dtype_size(dtype), &bytes) ||
      bytes > static_cast<size_t>(INT64_MAX)) {
    throw ShapeError("a " + std::string(dtype_name(dtype)) + shape_to_string(shape) +
                     " tensor needs more bytes than a 64-bit size can hold");
  }
  return bytes;
}

}  // namespace

Tensor Tensor::empty(Allocator& allocator, const Shape& shape, DType dtype,
                     MemoryCategory category) {
  const size_t bytes = checked_nbytes(shape, dtype);
  auto storage = std::make_shared<Storage>(allocator, bytes, category);
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

Tensor Tensor::zeros_host(const Shape& shape, DType dtype, MemoryCategory category) {
  Tensor t = empty(cpu_allocator(), shape, dtype, category);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(void* data, const Shape& shape, DType dtype, Device device,
                      std::shared_ptr<const void> owner) {
  const size_t bytes = checked_nbytes(shape, dtype);
  auto storage = std::make_shared<Storage>(data, bytes, device, std::move(owner));
  return Tensor(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

int64_t Tensor::size(int64_t d) const {
  if (d < 0) d += dim();
  ZERO_CHECK(d >= 0 && d < dim(), "dimension " << d << " out of range for " << describe());
  return shape_[static_cast<size_t>(d)];
}

int64_t Tensor::stride(int64_t d) const {
  if (d < 0) d += dim();
  ZERO_CHECK(d >= 0 && d < dim(), "dimension " << d << " out of range for " << describe());
  return strides_[static_cast<size_t>(d)];
}

bool Tensor::is_contiguous() const {
  // No elements: no layout to get wrong (a zero-length narrow must still view/flatten).
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  ZERO_CHECK(storage_ != nullptr, "access to an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

Tensor Tensor::view(int64_t offset_elements, const Shape& shape) const {
  ZERO_CHECK(is_contiguous(), "view() of a non-contiguous tensor " << describe());
  const int64_t n = shape_numel(shape);
  // Written so that no sum can overflow: offset + n <= numel.
  ZERO_CHECK(offset_elements >= 0 && n <= numel() && offset_elements <= numel() - n,
             "view of " << n << " elements at " << offset_elements << " exceeds " << describe());
  return Tensor(storage_, dtype_, shape, contiguous_strides(shape), offset_ + offset_elements);
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (shape_numel(shape) != numel()) {
    throw ShapeError("cannot reshape " + describe() + " to " + shape_to_string(shape));
  }
  return view(0, shape);
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const { return narrow(0, begin, end - begin); }

Tensor Tensor::narrow(int64_t d, int64_t begin, int64_t length) const {
  if (d < 0) d += dim();
  ZERO_CHECK(d >= 0 && d < dim() && begin >= 0 && length >= 0 && begin <= size(d) &&
                 length <= size(d) - begin,
             "narrow(" << d << ", " << begin << ", " << length << ") out of range for " << describe());
  Shape shape = shape_;
  shape[static_cast<size_t>(d)] = length;
  return Tensor(storage_, dtype_, shape, strides_, offset_ + begin * strides_[static_cast<size_t>(d)]);
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_) + " on " + device().to_string();
}

void expect_shape(const Tensor& tensor, const Shape& shape, const std::string& what) {
  if (tensor.shape() != shape) {
    throw ShapeError(what + ": expected shape " + shape_to_string(shape) + ", got " +
                     shape_to_string(tensor.shape()));
  }
}

void expect_dtype(const Tensor& tensor, DType dtype, const std::string& what) {
  if (tensor.dtype() != dtype) {
    throw ShapeError(what + ": expected dtype " + std::string(dtype_name(dtype)) + ", got " +
                     dtype_name(tensor.dtype()));
  }
}

}  // namespace zero
