// DType table, Tensor views and accounted allocators.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"

namespace zero {
namespace {

TEST(DType, PinnedCodesNeverChange) {
  // Checkpoints store these codes: renumbering would corrupt every saved file.
  EXPECT_EQ(dtype_code(DType::kF32), 0);
  EXPECT_EQ(dtype_code(DType::kF64), 1);
  EXPECT_EQ(dtype_code(DType::kF16), 2);
  EXPECT_EQ(dtype_code(DType::kBF16), 3);
  EXPECT_EQ(dtype_code(DType::kI32), 4);
  EXPECT_EQ(dtype_code(DType::kI64), 5);
  EXPECT_EQ(dtype_code(DType::kU8), 6);
  EXPECT_EQ(dtype_code(DType::kU16), 7);
  EXPECT_EQ(dtype_code(DType::kU32), 8);
  EXPECT_EQ(dtype_from_code(3), DType::kBF16);
  EXPECT_THROW(dtype_from_code(42), FileError);
}

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kF64), 8u);
  EXPECT_STREQ(dtype_name(DType::kF16), "f16");
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("FP16"), DType::kF16);
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  DType d{};
  EXPECT_TRUE(dtype_from_safetensors("BF16", &d));
  EXPECT_EQ(d, DType::kBF16);
  EXPECT_FALSE(dtype_from_safetensors("bf16", &d));
  try {
    parse_dtype("float8", "--dtype");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("float8"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos);
  }
}

TEST(Tensor, ViewsShareStorageAndCheckBounds) {
  Tensor t = Tensor::zeros_host({4, 6}, DType::kF32);
  EXPECT_EQ(t.strides(), (Shape{6, 1}));
  Tensor row = t.slice_rows(1, 3);
  row.data<float>()[0] = 5.0f;
  EXPECT_EQ(t.data<float>()[6], 5.0f);
  Tensor col = t.narrow(1, 2, 3);
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(col.offset(), 2);
  Tensor v = t.view(6, {2, 3});
  EXPECT_TRUE(v.is_contiguous());
  EXPECT_EQ(v.data<float>()[0], 5.0f);
  EXPECT_THROW(t.reshape({5, 5}), ShapeError);
  EXPECT_THROW(t.view(20, {2, 3}), InternalError);
  EXPECT_THROW(t.data<double>(), InternalError);
  EXPECT_THROW(col.view(0, {3}), InternalError);
  EXPECT_EQ(t.describe(), "f32[4, 6] on cpu");
  try {
    expect_shape(t, {4, 5}, "weights");
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("weights: expected shape [4, 5], got [4, 6]"), std::string::npos);
  }
}

TEST(Tensor, BorrowKeepsTheOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(4, 2.0f);
  std::weak_ptr<std::vector<float>> watch = owner;
  Tensor t = Tensor::borrow(owner->data(), {4}, DType::kF32, Device::cpu(), owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(t.data<float>()[3], 2.0f);
  t = Tensor();
  EXPECT_TRUE(watch.expired());
}

TEST(Allocator, AccountsLiveAndPeakBytesPerCategory) {
  Allocator& a = cpu_allocator();
  const MemoryStats before = a.stats();
  {
    Tensor p = Tensor::empty(a, {1000}, DType::kF32, MemoryCategory::kParams);
    Tensor g = Tensor::empty(a, {500}, DType::kF64, MemoryCategory::kGrads);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.raw_data()) % 64, 0u);
    const MemoryStats during = a.stats();
    EXPECT_EQ(during.live(MemoryCategory::kParams) - before.live(MemoryCategory::kParams), 4000u);
    EXPECT_EQ(during.live(MemoryCategory::kGrads) - before.live(MemoryCategory::kGrads), 4000u);
    Tensor view = p.view(10, {10});
    p = Tensor();
    EXPECT_EQ(a.stats().live(MemoryCategory::kParams) - before.live(MemoryCategory::kParams), 4000u)
        << "a view keeps its storage alive";
  }
  const MemoryStats after = a.stats();
  EXPECT_EQ(after.live(MemoryCategory::kParams), before.live(MemoryCategory::kParams));
  EXPECT_GE(after.peak(MemoryCategory::kParams), before.live(MemoryCategory::kParams) + 4000u);
  a.reset_peaks();
  EXPECT_EQ(a.stats().peak(MemoryCategory::kParams), a.stats().live(MemoryCategory::kParams));
}

TEST(Allocator, ConcurrentUseBalances) {
  Allocator& a = cpu_allocator();
  const size_t before = a.stats().live(MemoryCategory::kWorkspace);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a] {
      for (int i = 0; i < 2000; ++i) {
        Tensor x = Tensor::empty(a, {i % 97 + 1}, DType::kF32, MemoryCategory::kWorkspace);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(a.stats().live(MemoryCategory::kWorkspace), before);
}

}  // namespace
}  // namespace zero
