// Tests for core/tensor.h: strides, views sharing storage (view, narrow, slice_rows, reshape),
// their offsets and bounds checks, contiguity, typed access, borrowed memory lifetime, and the
// text of describe() and the expect_* errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/error_message.h"
#include "core/half.h"
#include "core/tensor.h"

namespace zero {
namespace {

// A [rows, cols] f32 host tensor holding 0, 1, 2, ... in row-major order.
Tensor iota_f32(int64_t rows, int64_t cols) {
  Tensor t = Tensor::zeros_host({rows, cols}, DType::kF32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

// Element (r, c) of a 2-D f32 host tensor through its strides and offset.
float at(const Tensor& t, int64_t r, int64_t c) {
  return t.data<float>()[r * t.stride(0) + c * t.stride(1)];
}

TEST(Shape, StridesNumelAndText) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({5}), (Shape{1}));
  EXPECT_EQ(contiguous_strides({}), (Shape{}));
  EXPECT_EQ(contiguous_strides({2, 0, 3})[1], 3);  // inner strides unaffected by a zero dim
  EXPECT_EQ(shape_numel({2, 3, 4}), 24);
  EXPECT_EQ(shape_numel({}), 1);  // a scalar
  EXPECT_EQ(shape_numel({7, 0}), 0);
  EXPECT_EQ(shape_to_string({2, 3}), "[2, 3]");
  EXPECT_EQ(shape_to_string({}), "[]");
  EXPECT_EQ(shape_to_string({1}), "[1]");
}

TEST(Tensor, EmptyIsContiguousWithExpectedMetadata) {
  Tensor t = Tensor::empty(cpu_allocator(), {2, 3, 4}, DType::kBF16, MemoryCategory::kOther);
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.dtype(), DType::kBF16);
  EXPECT_EQ(t.device(), Device::cpu());
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 4);
  EXPECT_EQ(t.stride(-3), 12);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.element_size(), 2u);
  EXPECT_EQ(t.nbytes(), 48u);
  EXPECT_EQ(t.offset(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.storage()->bytes(), 48u);
  EXPECT_THROW(t.size(3), InternalError);
  EXPECT_THROW(t.size(-4), InternalError);
  EXPECT_THROW(t.stride(3), InternalError);
}

TEST(Tensor, ScalarAndDefault) {
  Tensor s = Tensor::zeros_host({}, DType::kF32);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.nbytes(), 4u);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(*s.data<float>(), 0.0f);

  Tensor undefined;
  EXPECT_FALSE(undefined.defined());
  EXPECT_EQ(undefined.device(), Device::cpu());
  EXPECT_THROW(undefined.raw_data(), InternalError);
  EXPECT_THROW(undefined.data<float>(), InternalError);
}

TEST(Tensor, ZerosHostIsZeroFilled) {
  Tensor t = Tensor::zeros_host({3, 5}, DType::kF64);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.data<double>()[i], 0.0);
}

TEST(Tensor, ConstructorChecksRankAndSigns) {
  auto storage = std::make_shared<Storage>(cpu_allocator(), 64, MemoryCategory::kOther);
  EXPECT_THROW(Tensor(storage, DType::kF32, {2, 2}, {2}, 0), InternalError);
  EXPECT_THROW(Tensor(storage, DType::kF32, {2, -1}, {1, 1}, 0), InternalError);
  EXPECT_NO_THROW(Tensor(storage, DType::kF32, {4, 4}, {4, 1}, 0));
}

TEST(TensorView, CopiesAndViewsShareStorage) {
  Tensor t = iota_f32(4, 3);
  Tensor copy = t;  // copies the view, not the data
  EXPECT_EQ(copy.storage(), t.storage());
  copy.data<float>()[0] = 42.0f;
  EXPECT_EQ(t.data<float>()[0], 42.0f);

  Tensor v = t.view(3, {2, 3});
  EXPECT_EQ(v.storage(), t.storage());
  EXPECT_EQ(v.offset(), 3);
  EXPECT_EQ(v.strides(), (Shape{3, 1}));
  EXPECT_EQ(v.data<float>()[0], 3.0f);
  EXPECT_EQ(v.raw_data(), static_cast<void*>(t.data<float>() + 3));
  v.data<float>()[4] = -1.0f;  // element 3 + 4 of t
  EXPECT_EQ(t.data<float>()[7], -1.0f);
  t.data<float>()[8] = -2.0f;
  EXPECT_EQ(v.data<float>()[5], -2.0f);

  // A view of a view accumulates offsets.
  Tensor vv = v.view(2, {3});
  EXPECT_EQ(vv.offset(), 5);
  EXPECT_EQ(vv.data<float>()[0], 5.0f);
}

TEST(TensorView, ViewBounds) {
  Tensor t = iota_f32(4, 3);
  EXPECT_NO_THROW(t.view(6, {2, 3}));   // ends exactly at the end
  EXPECT_NO_THROW(t.view(12, {0}));     // empty view at the end
  EXPECT_THROW(t.view(7, {2, 3}), InternalError);
  EXPECT_THROW(t.view(0, {13}), InternalError);
  EXPECT_THROW(t.view(-1, {2}), InternalError);
  // Bounds are relative to the view, not to the storage.
  Tensor v = t.view(6, {6});
  EXPECT_NO_THROW(v.view(0, {6}));
  EXPECT_THROW(v.view(1, {6}), InternalError);
  const std::string message = error_message([&] { t.view(10, {3}); });
  EXPECT_NE(message.find("f32[4, 3] on cpu"), std::string::npos) << message;
}

TEST(TensorView, ReshapeAndFlatten) {
  Tensor t = iota_f32(4, 3);
  Tensor r = t.reshape({2, 6});
  EXPECT_EQ(r.storage(), t.storage());
  EXPECT_EQ(r.strides(), (Shape{6, 1}));
  EXPECT_EQ(at(r, 1, 2), 8.0f);
  Tensor f = t.flatten();
  EXPECT_EQ(f.shape(), (Shape{12}));
  EXPECT_EQ(f.data<float>()[11], 11.0f);
  // Reshape of a contiguous sub-view keeps its offset.
  Tensor rows = t.slice_rows(2, 4).reshape({6});
  EXPECT_EQ(rows.offset(), 6);
  EXPECT_EQ(rows.data<float>()[0], 6.0f);

  EXPECT_THROW(t.reshape({5, 2}), ShapeError);
  const std::string message = error_message([&] { t.reshape({5}); });
  EXPECT_NE(message.find("f32[4, 3] on cpu"), std::string::npos) << message;
  EXPECT_NE(message.find("[5]"), std::string::npos) << message;
  // A non-contiguous tensor cannot be reshaped without a copy.
  EXPECT_THROW(t.narrow(1, 0, 2).reshape({8}), InternalError);
  EXPECT_THROW(t.narrow(1, 1, 2).view(0, {2}), InternalError);
}

TEST(TensorView, NarrowOffsetsStridesAndContiguity) {
  Tensor t = iota_f32(4, 3);
  Tensor cols = t.narrow(1, 1, 2);
  EXPECT_EQ(cols.shape(), (Shape{4, 2}));
  EXPECT_EQ(cols.strides(), (Shape{3, 1}));
  EXPECT_EQ(cols.offset(), 1);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(cols.storage(), t.storage());
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(at(cols, r, c), static_cast<float>(r * 3 + 1 + c));
  }
  // Writes through the narrowed view land in the parent.
  cols.data<float>()[1 * 3 + 1] = 99.0f;  // (1, 1) of cols is (1, 2) of t
  EXPECT_EQ(at(t, 1, 2), 99.0f);

  Tensor rows = t.narrow(0, 1, 2);
  EXPECT_TRUE(rows.is_contiguous());
  EXPECT_EQ(rows.offset(), 3);
  EXPECT_TRUE(t.narrow(-1, 0, 3).is_contiguous());   // whole width
  EXPECT_FALSE(t.narrow(1, 0, 1).is_contiguous());   // one column of several rows
  EXPECT_TRUE(t.narrow(0, 2, 1).is_contiguous());    // one row
  EXPECT_TRUE(t.narrow(0, 2, 1).narrow(1, 1, 2).is_contiguous());  // part of one row
  EXPECT_TRUE(t.narrow(1, 1, 0).is_contiguous());    // no elements: trivially contiguous
  EXPECT_EQ(t.narrow(1, 1, 0).flatten().numel(), 0);

  // Narrow of a narrow composes offsets along both dimensions.
  Tensor block = t.narrow(0, 1, 2).narrow(1, 1, 2);
  EXPECT_EQ(block.offset(), 4);
  EXPECT_EQ(at(block, 1, 0), 7.0f);

  // Element size enters the byte offset.
  Tensor h = Tensor::zeros_host({4, 8}, DType::kBF16);
  Tensor hn = h.narrow(1, 3, 2);
  EXPECT_EQ(static_cast<char*>(hn.raw_data()) - static_cast<char*>(h.raw_data()), 6);
}

TEST(TensorView, NarrowAndSliceBounds) {
  Tensor t = iota_f32(4, 3);
  EXPECT_THROW(t.narrow(2, 0, 1), InternalError);
  EXPECT_THROW(t.narrow(-3, 0, 1), InternalError);
  EXPECT_THROW(t.narrow(1, 2, 2), InternalError);
  EXPECT_THROW(t.narrow(0, -1, 1), InternalError);
  EXPECT_THROW(t.narrow(0, 0, -1), InternalError);
  EXPECT_NO_THROW(t.narrow(0, 4, 0));

  Tensor s = t.slice_rows(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.offset(), 3);
  EXPECT_TRUE(s.is_contiguous());
  EXPECT_EQ(at(s, 1, 2), 8.0f);
  EXPECT_THROW(t.slice_rows(3, 5), InternalError);
  EXPECT_THROW(t.slice_rows(2, 1), InternalError);
  EXPECT_THROW(t.slice_rows(-1, 2), InternalError);
  EXPECT_EQ(t.slice_rows(2, 2).numel(), 0);
  // Bounds of a slice are its own, not its parent's.
  EXPECT_THROW(s.slice_rows(0, 3), InternalError);
}

TEST(Tensor, TypedAccessChecksDType) {
  Tensor t = Tensor::zeros_host({2}, DType::kF32);
  EXPECT_NO_THROW(t.data<float>());
  EXPECT_THROW(t.data<double>(), InternalError);
  EXPECT_THROW(t.data<int32_t>(), InternalError);  // same size, still wrong
  EXPECT_THROW(t.data<uint32_t>(), InternalError);
  const std::string message = error_message([&] { t.data<double>(); });
  EXPECT_NE(message.find("data<f64>() on a f32 tensor"), std::string::npos) << message;

  Tensor h = Tensor::zeros_host({2}, DType::kBF16);
  EXPECT_NO_THROW(h.data<bf16>());
  EXPECT_THROW(h.data<f16>(), InternalError);
  EXPECT_THROW(h.data<uint16_t>(), InternalError);
}

TEST(Tensor, BorrowKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(6, 1.5f);
  std::weak_ptr<std::vector<float>> watch = owner;
  const float* raw = owner->data();
  const size_t live_before = cpu_allocator().stats().total_live_bytes;
  Tensor b = Tensor::borrow(owner->data(), {2, 3}, DType::kF32, Device::cpu(), owner);
  EXPECT_EQ(cpu_allocator().stats().total_live_bytes, live_before);  // not accounted
  owner.reset();
  ASSERT_FALSE(watch.expired());
  EXPECT_EQ(b.data<float>()[5], 1.5f);
  EXPECT_EQ(b.storage()->bytes(), 24u);
  EXPECT_TRUE(b.is_contiguous());

  Tensor v = b.narrow(1, 1, 1);
  b = Tensor();
  EXPECT_FALSE(watch.expired());  // the view still holds the storage, which holds the owner
  v.data<float>()[0] = 2.5f;
  EXPECT_EQ(raw[1], 2.5f);  // the owner's memory, written through the view
  v = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Tensor, BorrowOnADeviceReportsIt) {
  uint8_t bytes[4] = {};
  Tensor b = Tensor::borrow(bytes, {4}, DType::kU8, Device::cuda(1), nullptr);
  EXPECT_EQ(b.device(), Device::cuda(1));
  EXPECT_EQ(b.describe(), "u8[4] on cuda:1");
}

TEST(Tensor, Describe) {
  EXPECT_EQ(Tensor::zeros_host({2, 3}, DType::kF32).describe(), "f32[2, 3] on cpu");
  EXPECT_EQ(Tensor::zeros_host({}, DType::kBF16).describe(), "bf16[] on cpu");
  EXPECT_EQ(Tensor::zeros_host({7}, DType::kI64).describe(), "i64[7] on cpu");
  EXPECT_EQ(iota_f32(4, 3).narrow(1, 0, 2).describe(), "f32[4, 2] on cpu");
}

TEST(Tensor, ExpectShapeAndDTypeMessages) {
  Tensor t = Tensor::zeros_host({2, 3}, DType::kF32);
  EXPECT_NO_THROW(expect_shape(t, {2, 3}, "x"));
  EXPECT_NO_THROW(expect_dtype(t, DType::kF32, "x"));
  EXPECT_THROW(expect_shape(t, {3, 2}, "x"), ShapeError);
  EXPECT_THROW(expect_shape(t, {2, 3, 1}, "x"), ShapeError);
  EXPECT_THROW(expect_dtype(t, DType::kBF16, "x"), ShapeError);
  EXPECT_EQ(error_message([&] { expect_shape(t, {2, 4}, "layers.0.attn.q_proj.weight"); }),
            "layers.0.attn.q_proj.weight: expected shape [2, 4], got [2, 3]");
  EXPECT_EQ(error_message([&] { expect_dtype(t, DType::kBF16, "lm_head.weight"); }),
            "lm_head.weight: expected dtype bf16, got f32");
}

}  // namespace
}  // namespace zero
