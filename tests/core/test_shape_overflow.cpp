// Regression: shape_numel multiplied dimensions from files without checks, so sizes near the
// int64 edge overflowed (undefined behaviour; a release build went on to "internal check failed
// ... view of 64 elements at -48"). Products of dimensions now fit int64 or throw ShapeError.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace zero {
namespace {

constexpr int64_t k2to62 = int64_t{1} << 62;

TEST(ShapeOverflow, ShapeNumelOfSizesNearTheInt64EdgeThrowsShapeError) {
  EXPECT_EQ(shape_numel({k2to62, 1}), k2to62);
  try {
    shape_numel({k2to62, 64});
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[4611686018427387904, 64]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(shape_numel({INT64_MAX, 2}), ShapeError);
}

TEST(ShapeOverflow, AZeroDimensionDoesNotHideOverflowingStrides) {
  // [2^62, 4, 0] holds no elements, but its strides (0 * ..., 4 * 2^62) would overflow.
  EXPECT_THROW(shape_numel({0, k2to62, 4}), ShapeError);
  EXPECT_THROW(contiguous_strides({0, k2to62, 4}), ShapeError);
  EXPECT_EQ(shape_numel({0, k2to62}), 0);
  EXPECT_EQ(shape_numel({3, 0, 5}), 0);
}

TEST(ShapeOverflow, NegativeDimensionIsAShapeError) {
  EXPECT_THROW(shape_numel({4, -1}), ShapeError);
}

TEST(ShapeOverflow, TensorWhoseByteCountOverflowsIsRefusedBeforeAllocating) {
  // 2^61 f64 elements fit the element count but not the byte count.
  EXPECT_THROW(Tensor::empty(cpu_allocator(), {int64_t{1} << 61}, DType::kF64,
                             MemoryCategory::kOther),
               ShapeError);
}

TEST(ShapeOverflow, ViewAndNarrowBoundsCannotWrap) {
  Tensor t = Tensor::zeros_host({8}, DType::kF32);
  EXPECT_THROW(t.view(INT64_MAX - 2, {4}), InternalError);
  EXPECT_THROW(t.narrow(0, 4, INT64_MAX - 2), InternalError);
  EXPECT_EQ(t.view(4, {4}).numel(), 4);
}

}  // namespace
}  // namespace zero
