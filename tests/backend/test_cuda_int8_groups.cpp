// int8 group quantization on the CUDA backend (cuda_int8_groups.cu) against the CPU oracle,
// byte for byte: f32, bf16 and f16 inputs; groups of 1, an odd size, a block's worth, more than a
// block, and one group larger than the buffer; more groups than the kernel launches blocks (so
// the grid-stride loop runs); groups with Inf, NaN, all zeros and underflowing magnitudes; and
// decoding with and without accumulation into every storage dtype. Outputs are poisoned first,
// so a byte a kernel forgets (an alignment byte, a scale) shows. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cuda_test_support.h"
#include "backend/int8_groups.h"

namespace zero::backend::cuda_test {
namespace int8_groups_cuda_test {

using CudaInt8Groups = CudaTest;

// Values of both signs with a few special stretches: zeros, tiny magnitudes, an Inf, a NaN.
std::vector<float> special_values(int64_t n, uint32_t seed) {
  std::vector<float> v = random_values(n, seed, -4.0f, 4.0f);
  for (int64_t i = 0; i < n; ++i) {
    if (i % 5003 < 40) v[static_cast<size_t>(i)] = 0.0f;
    if (i % 7001 >= 100 && i % 7001 < 140) v[static_cast<size_t>(i)] *= 1e-38f;
  }
  if (n > 9000) v[9000] = std::numeric_limits<float>::infinity();
  if (n > 12000) v[12000] = std::numeric_limits<float>::quiet_NaN();
  return v;
}

Tensor poisoned_bytes(Backend& be, int64_t bytes) {
  const std::vector<uint8_t> poison(static_cast<size_t>(bytes), 0xa5);
  Tensor t = be.empty({bytes}, DType::kU8, MemoryCategory::kOther);
  be.copy_from_host(t, poison.data());
  return t;
}

TEST_F(CudaInt8Groups, QuantizeAndDequantizeMatchTheCpuByteForByte) {
  struct Case {
    int64_t count, group;
  };
  // 300000 / 32 groups are more than the 2112 blocks a launch takes.
  const Case cases[] = {{1, 1}, {37, 1}, {1001, 7}, {20000, 256}, {20001, 2048},
                        {5000, 3000}, {70, 1000}, {300000, 32}};
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " count " + std::to_string(c.count) +
                   " group " + std::to_string(c.group));
      const std::vector<float> v = special_values(c.count, 5);
      const int64_t bytes = Int8Groups{c.count, c.group}.packed_bytes();
      Tensor cpu_packed = cpu().empty({bytes}, DType::kU8, MemoryCategory::kOther);
      cpu().quantize_int8_groups(cpu_packed, upload(cpu(), v, {c.count}, dtype), c.group);
      Tensor gpu_packed = poisoned_bytes(gpu(), bytes);
      gpu().quantize_int8_groups(gpu_packed, upload(gpu(), v, {c.count}, dtype), c.group);
      ASSERT_EQ(download_bytes(gpu(), gpu_packed), download_bytes(cpu(), cpu_packed));
      for (const DType out : {DType::kF32, DType::kBF16, DType::kF16}) {
        for (const bool accumulate : {false, true}) {
          SCOPED_TRACE(std::string("into ") + dtype_name(out) + (accumulate ? " +=" : " ="));
          const std::vector<float> start = random_values(c.count, 9, -1.0f, 1.0f);
          Tensor want = upload(cpu(), start, {c.count}, out);
          cpu().dequantize_int8_groups(want, cpu_packed, c.group, accumulate);
          Tensor got = upload(gpu(), start, {c.count}, out);
          gpu().dequantize_int8_groups(got, gpu_packed, c.group, accumulate);
          ASSERT_EQ(download_bytes(gpu(), got), download_bytes(cpu(), want));
        }
      }
    }
  }
}

TEST_F(CudaInt8Groups, RefusesHostTensorsAndWrongSizes) {
  const std::vector<float> v = random_values(10, 1);
  Tensor values = upload(gpu(), v, {10}, DType::kF32);
  Tensor host_packed = cpu().empty({Int8Groups{10, 4}.packed_bytes()}, DType::kU8,
                                   MemoryCategory::kOther);
  EXPECT_THROW(gpu().quantize_int8_groups(host_packed, values, 4), Error);
  Tensor short_packed = gpu().empty({8}, DType::kU8, MemoryCategory::kOther);
  EXPECT_THROW(gpu().quantize_int8_groups(short_packed, values, 4), ShapeError);
}

}  // namespace int8_groups_cuda_test
}  // namespace zero::backend::cuda_test
