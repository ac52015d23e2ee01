// Rotary tables far past a checkpoint's max_position_embeddings: every angle is one f32 product
// inv_freq * t, correctly rounded, as Hugging Face computes it (no accumulated drift), for
// positions up to 2^20 and beyond, and the table has a row for every position asked for.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "backend/cpu/cpu_backend.h"
#include "model/rope_table.h"

namespace zero::model {
namespace {

// HF: inv_freq = 1 / theta^(2i/D) in f32; angle = inv_freq * t in f32. The product of two
// floats is exact in double (24 + 24 bits < 53), so rounding it to float is the f32 product.
double reference_angle(int64_t t, int64_t i, int64_t head_dim, double theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  const float inv_freq = 1.0f / std::pow(static_cast<float>(theta), exponent);
  const double exact = static_cast<double>(inv_freq) * static_cast<double>(t);
  return static_cast<double>(static_cast<float>(exact));
}

TEST(RopeTableLong, AnglesAreOneF32ProductAtLargePositions) {
  backend::CpuBackend backend;
  const int64_t head_dim = 4, half = head_dim / 2;  // small rows: 2^20 of them
  const int64_t seq_len = (int64_t{1} << 20) + 3;  // past any preset's limit
  const double theta = 10000.0;
  const RopeTable table = build_rope_table(backend, seq_len, head_dim, theta, DType::kF64);
  ASSERT_EQ(table.seq_len, seq_len);
  ASSERT_EQ(table.cos.size(0), seq_len);
  const double* cos = table.cos.data<double>();
  const double* sin = table.sin.data<double>();
  for (const int64_t t : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{65537},
                          int64_t{1} << 20, seq_len - 1}) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = reference_angle(t, i, head_dim, theta);
      // f64 tables hold cos/sin of the f32 angle evaluated in double: exact to rounding.
      EXPECT_NEAR(cos[t * half + i], std::cos(angle), 1e-15) << "t " << t << " i " << i;
      EXPECT_NEAR(sin[t * half + i], std::sin(angle), 1e-15) << "t " << t << " i " << i;
    }
  }
  // Each row is a rotation: cos^2 + sin^2 = 1 everywhere, including the last row.
  for (int64_t i = 0; i < half; ++i) {
    const int64_t at = (seq_len - 1) * half + i;
    EXPECT_NEAR(cos[at] * cos[at] + sin[at] * sin[at], 1.0, 1e-15);
  }
}

}  // namespace
}  // namespace zero::model
