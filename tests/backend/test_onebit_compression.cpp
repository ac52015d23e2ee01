// 1-bit compression with error feedback on the CPU backend (Backend::onebit_*, the layout of
// backend/onebit_layout.h): DeepSpeed's padding, a case worked by hand, the error-feedback
// identity of each op, and the whole compressed all-reduce of W ranks (emulated in one process)
// against the sum it must track over steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/backend_test_values.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/onebit_layout.h"
#include "support/onebit_emulation.h"

namespace zero::backend {
namespace onebit_compression_test {

using backend_test::random_values;

Tensor host_values(const std::vector<float>& v) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(v.size())}, DType::kF32);
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

bool sign_bit(const Tensor& bits, int64_t byte, int64_t bit) {
  return ((bits.data<uint8_t>()[byte] >> (7 - bit)) & 1u) != 0;
}

TEST(OneBitLayout, PadsEachTensorAsDeepSpeedDoes) {
  const std::vector<ParamSegment> segments = {{0, 5, true}, {5, 0, true}, {5, 100, false}};
  // world * lcm(world, 8): 8, 16, 72 and 64 elements.
  const struct {
    int world;
    int64_t first, second;
  } cases[] = {{1, 8, 104}, {2, 16, 112}, {3, 72, 144}, {8, 64, 128}};
  for (const auto& c : cases) {
    const OneBitLayout layout = OneBitLayout::build(segments, c.world);
    ASSERT_EQ(layout.segment_count(), 2) << "the empty segment is dropped";
    EXPECT_EQ(layout.segments[0].padded, c.first) << "world " << c.world;
    EXPECT_EQ(layout.segments[1].padded, c.second) << "world " << c.world;
    EXPECT_EQ(layout.segments[1].offset, 5);
    EXPECT_EQ(layout.segments[1].error_offset, c.first);
    EXPECT_EQ(layout.segments[1].chunk_offset, c.first / c.world);
    EXPECT_EQ(layout.segments[1].byte_offset, c.first / c.world / 8);
    EXPECT_EQ(layout.worker_elements, c.first + c.second);
    EXPECT_EQ(layout.server_elements, (c.first + c.second) / c.world);
    EXPECT_EQ(layout.block_bytes, (c.first + c.second) / c.world / 8);
  }
  const std::vector<ParamSegment> negative = {{0, -1, true}};
  EXPECT_THROW(OneBitLayout::build(negative, 2), ShapeError);
  EXPECT_THROW(OneBitLayout::build(segments, 0), ShapeError);
}

TEST(OneBitCompression, OneRankWorkedByHand) {
  CpuBackend cpu;
  const std::vector<ParamSegment> segments = {{0, 4, true}};
  const OneBitLayout layout = OneBitLayout::build(segments, 1);
  ASSERT_EQ(layout.worker_elements, 8);
  Tensor values = host_values({1.0f, -2.0f, 0.0f, 3.0f});
  Tensor bits = Tensor::zeros_host({1}, DType::kU8);
  Tensor scales = Tensor::zeros_host({1}, DType::kF32);
  Tensor worker_error = Tensor::zeros_host({8}, DType::kF32);
  cpu.onebit_worker_compress(bits, scales, worker_error, values, layout);
  // b = [1, -2, 0, 3, 0, 0, 0, 0]: ||b||^2 = 14 over 8 elements; only -2 is negative.
  const auto scale = static_cast<float>(std::sqrt(14.0) / std::sqrt(8.0));
  EXPECT_EQ(scales.data<float>()[0], scale);
  EXPECT_EQ(bits.data<uint8_t>()[0], 0xBF);
  const float b[8] = {1, -2, 0, 3, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(worker_error.data<float>()[i], b[i] - scale * (i == 1 ? -1.0f : 1.0f)) << i;
  }
  // The server of one rank averages one worker: every |c| is the scale, so it sends the same
  // scale and keeps no error.
  Tensor server_bits = Tensor::zeros_host({1}, DType::kU8);
  Tensor server_scales = Tensor::zeros_host({1}, DType::kF32);
  Tensor server_error = Tensor::zeros_host({8}, DType::kF32);
  cpu.onebit_server_compress(server_bits, server_scales, server_error, bits, scales, layout);
  EXPECT_EQ(server_bits.data<uint8_t>()[0], 0xBF);
  EXPECT_EQ(server_scales.data<float>()[0], scale);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(server_error.data<float>()[i], 0.0f) << i;
  cpu.onebit_decompress(values, server_bits, server_scales, layout);
  const float expected[4] = {scale, -scale, scale, scale};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(values.data<float>()[i], expected[i]) << i;
}

TEST(OneBitCompression, WorkerKeepsWhatTheSignsLost) {
  CpuBackend cpu;
  const std::vector<ParamSegment> segments = {{0, 70, true}, {70, 9, true}, {79, 4099, true}};
  for (int world : {1, 2, 3}) {
    const OneBitLayout layout = OneBitLayout::build(segments, world);
    std::vector<float> v = random_values(4178, 7 + static_cast<uint32_t>(world));
    v[3] = 0.0f;
    v[4] = -0.0f;
    v[72] = std::numeric_limits<float>::quiet_NaN();  // makes segment 1's scale and errors NaN
    Tensor values = host_values(v);
    Tensor previous = host_values(random_values(layout.worker_elements, 3, -0.1f, 0.1f));
    Tensor error = host_values(random_values(layout.worker_elements, 3, -0.1f, 0.1f));
    Tensor bits = Tensor::zeros_host({world * layout.block_bytes}, DType::kU8);
    Tensor scales = Tensor::zeros_host({layout.segment_count()}, DType::kF32);
    cpu.onebit_worker_compress(bits, scales, error, values, layout);
    for (int64_t k = 0; k < layout.segment_count(); ++k) {
      const OneBitSegment& s = layout.segments[static_cast<size_t>(k)];
      const float scale = scales.data<float>()[k];
      const int64_t chunk = layout.chunk(s);
      for (int64_t i = 0; i < s.padded; ++i) {
        const float x = i < s.length ? v[static_cast<size_t>(s.offset + i)] : 0.0f;
        const float b = x + previous.data<float>()[s.error_offset + i];
        const int64_t r = i / chunk, j = i % chunk;
        const bool positive = sign_bit(bits, r * layout.block_bytes + s.byte_offset + j / 8, j % 8);
        if (std::isnan(b)) {
          EXPECT_TRUE(positive) << "NaN counts as positive, as in DeepSpeed";
          continue;
        }
        EXPECT_EQ(positive, !(b < 0.0f)) << "world " << world << " segment " << k << " " << i;
        if (k == 1) {
          EXPECT_TRUE(std::isnan(scale));
          continue;
        }
        EXPECT_EQ(error.data<float>()[s.error_offset + i], b - scale * (positive ? 1.0f : -1.0f));
      }
    }
  }
}

TEST(OneBitCompression, TheRanksAverageTracksTheTrueAverageOverSteps) {
  // Rank r's error-feedback identity, summed over steps t: sum_t out_t = sum_t mean_r x_rt -
  // mean_r e_rT - s_T. Exact in real arithmetic; the f32 sums of six steps of values of
  // magnitude ~1 over up to 8 ranks stay within 2e-5.
  CpuBackend cpu;
  const std::vector<ParamSegment> segments = {{0, 1, true}, {1, 37, false}, {40, 1000, true}};
  for (int world : {2, 3, 8}) {
    const OneBitLayout layout = OneBitLayout::build(segments, world);
    testing::onebit::RankErrors errors = testing::onebit::zero_errors(layout);
    std::vector<double> sum_out(1040, 0.0), sum_mean(1040, 0.0);
    for (int step = 0; step < 6; ++step) {
      std::vector<Tensor> values;
      for (int r = 0; r < world; ++r) {
        std::vector<float> v = random_values(1040, static_cast<uint32_t>(100 * step + r));
        v[38] = v[39] = 7.0f;  // between the segments: must stay as it is
        values.push_back(host_values(v));
        for (size_t i = 0; i < v.size(); ++i) sum_mean[i] += static_cast<double>(v[i]) / world;
      }
      testing::onebit::emulate(cpu, layout, values, errors);
      for (int r = 0; r < world; ++r) {
        for (int64_t i = 0; i < 1040; ++i) {
          ASSERT_EQ(values[r].data<float>()[i], values[0].data<float>()[i])
              << "every rank ends with the same values (world " << world << ")";
        }
        EXPECT_EQ(values[r].data<float>()[38], 7.0f);
      }
      for (int64_t i = 0; i < 1040; ++i) sum_out[i] += values[0].data<float>()[i];
    }
    for (const OneBitSegment& s : layout.segments) {
      const int64_t chunk = layout.chunk(s);
      for (int64_t i = 0; i < s.length; ++i) {
        double worker = 0.0;
        for (int r = 0; r < world; ++r) worker += errors.worker[r].data<float>()[s.error_offset + i];
        const double server =
            errors.server[static_cast<size_t>(i / chunk)].data<float>()[s.chunk_offset + i % chunk];
        const double expected = sum_mean[s.offset + i] - worker / world - server;
        EXPECT_NEAR(sum_out[s.offset + i], expected, 2e-5) << "world " << world << " i " << i;
      }
    }
  }
}

TEST(OneBitCompression, WrongBufferSizesAreShapeErrors) {
  CpuBackend cpu;
  const std::vector<ParamSegment> segments = {{0, 20, true}};
  const OneBitLayout layout = OneBitLayout::build(segments, 2);
  Tensor values = Tensor::zeros_host({20}, DType::kF32);
  Tensor short_values = Tensor::zeros_host({19}, DType::kF32);
  Tensor bits = Tensor::zeros_host({2 * layout.block_bytes}, DType::kU8);
  Tensor wrong_bits = Tensor::zeros_host({layout.block_bytes}, DType::kU8);
  Tensor scales = Tensor::zeros_host({1}, DType::kF32);
  Tensor error = Tensor::zeros_host({layout.worker_elements}, DType::kF32);
  EXPECT_THROW(cpu.onebit_worker_compress(wrong_bits, scales, error, values, layout), ShapeError);
  EXPECT_THROW(cpu.onebit_worker_compress(bits, scales, error, short_values, layout), ShapeError);
  Tensor all_scales = Tensor::zeros_host({2}, DType::kF32);
  EXPECT_THROW(cpu.onebit_decompress(values, bits, scales, layout), ShapeError);
  EXPECT_NO_THROW(cpu.onebit_decompress(values, bits, all_scales, layout));
}

}  // namespace onebit_compression_test
}  // namespace zero::backend
