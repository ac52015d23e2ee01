// The engine keeps f32 gradients of the 16-bit weights a device's layers read (bf16/fp16
// training: sharding/parameter_fetcher.h binds the 16-bit units on a device), so every backward
// op that accumulates a weight gradient takes 16-bit inputs with an f32 gradient: the norms'
// dweight/dbias, the bias column sums, the embedding table's gradient and dw of a product. Each
// against the CPU oracle, which accepts the same mix; a gradient of another dtype is refused.
// Skipped without a GPU.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

using CudaMixedGradients = CudaTest;

const DType kSixteenBit[] = {DType::kBF16, DType::kF16};

TEST_F(CudaMixedGradients, NormWeightGradientsAccumulateInF32) {
  const int64_t rows = 300, channels = 197;
  for (DType dtype : kSixteenBit) {
    for (bool layernorm : {true, false}) {
      const std::vector<float> x = random_values(rows * channels, 60, -2.0f, 2.0f);
      const std::vector<float> w = random_values(channels, 61), b = random_values(channels, 62);
      const std::vector<float> dy = random_values(rows * channels, 63);
      const std::vector<float> dw0 = random_values(channels, 64), db0 = random_values(channels, 65);
      std::vector<double> res[2][3];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor tx = upload(*be, x, {rows, channels}, dtype), tw = upload(*be, w, {channels}, dtype);
        Tensor tb = upload(*be, b, {channels}, dtype);
        Tensor tdy = upload(*be, dy, {rows, channels}, dtype);
        Tensor y = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
        Tensor mean = be->empty({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor rstd = be->empty({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor dx = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
        be->fill(dx, std::numeric_limits<double>::quiet_NaN());
        Tensor dw = upload(*be, dw0, {channels}, DType::kF32);
        Tensor db = upload(*be, db0, {channels}, DType::kF32);
        if (layernorm) {
          be->layernorm_forward(y, mean, rstd, tx, tw, &tb, 1e-5);
          be->layernorm_backward(dx, dw, &db, tdy, tx, tw, mean, rstd);
        } else {
          be->rmsnorm_forward(y, rstd, tx, tw, 1e-6);
          be->rmsnorm_backward(dx, dw, tdy, tx, tw, rstd);
        }
        res[slot][0] = download(*be, dx);
        res[slot][1] = download(*be, dw);
        res[slot][2] = download(*be, db);
        ++slot;
      }
      const std::string what = std::string(layernorm ? "layernorm " : "rmsnorm ") +
                               dtype_name(dtype) + " inputs, f32 ";
      // dx as in the same-dtype test; the f32 gradients are column sums of 300 terms in another
      // order, kept in f32 (no 16-bit rounding unit on top).
      expect_close(res[0][0], res[1][0], storage_tolerance(dtype, 2e-5, 5e-5), what + "dx");
      expect_close(res[0][1], res[1][1], Tolerance{2e-5, 5e-5}, what + "dweight");
      expect_close(res[0][2], res[1][2], Tolerance{2e-5, 5e-5}, what + "dbias");
    }
  }
}

TEST_F(CudaMixedGradients, EmbeddingAndBiasGradientsAccumulateInF32) {
  const int64_t vocab = 53, channels = 70, rows = 301, out = 29, in = 37;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < rows; ++i) ids.push_back((i * 17 + i / 7) % vocab);
  for (DType dtype : kSixteenBit) {
    const std::vector<float> dout = random_values(rows * channels, 66);
    const std::vector<float> dtable0 = random_values(vocab * channels, 67);
    const std::vector<float> x = random_values(rows * in, 68), w = random_values(out * in, 69);
    const std::vector<float> dy = random_values(rows * out, 70);
    const std::vector<float> dw0 = random_values(out * in, 71), db0 = random_values(out, 72);
    std::vector<uint8_t> table_bits[2];
    std::vector<double> linear[2][3];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tids = upload_ids(*be, ids);
      Tensor tdout = upload(*be, dout, {rows, channels}, dtype);
      Tensor dtable = upload(*be, dtable0, {vocab, channels}, DType::kF32);
      be->embedding_backward(dtable, tdout, tids);
      table_bits[slot] = download_bytes(*be, dtable);
      Tensor tx = upload(*be, x, {rows, in}, dtype), tw = upload(*be, w, {out, in}, dtype);
      Tensor tdy = upload(*be, dy, {rows, out}, dtype);
      Tensor dx = be->empty({rows, in}, dtype, MemoryCategory::kOther);
      Tensor dw = upload(*be, dw0, {out, in}, DType::kF32);
      Tensor db = upload(*be, db0, {out}, DType::kF32);
      be->linear_backward(&dx, dw, &db, tdy, tx, tw);
      linear[slot][0] = download(*be, dx);
      linear[slot][1] = download(*be, dw);
      linear[slot][2] = download(*be, db);
      ++slot;
    }
    // The same additions in the same order (token order per row), in f32: identical bits.
    EXPECT_EQ(table_bits[0], table_bits[1]) << "embedding_backward " << dtype_name(dtype);
    const std::string what = std::string("linear_backward ") + dtype_name(dtype) + " inputs, ";
    expect_close(linear[0][0], linear[1][0], storage_tolerance(dtype, 1e-5, 3e-5), what + "dx");
    expect_close(linear[0][1], linear[1][1], Tolerance{1e-5, 3e-5}, what + "f32 dw");
    expect_close(linear[0][2], linear[1][2], Tolerance{1e-5, 3e-5}, what + "f32 dbias");
  }
}

TEST_F(CudaMixedGradients, AGradientOfAnotherSixteenBitDtypeIsRefused) {
  Tensor x = gpu().zeros({4, 8}, DType::kBF16, MemoryCategory::kOther);
  Tensor w = gpu().zeros({8}, DType::kBF16, MemoryCategory::kOther);
  Tensor rstd = gpu().zeros({4}, DType::kF32, MemoryCategory::kOther);
  Tensor dx = gpu().zeros({4, 8}, DType::kBF16, MemoryCategory::kOther);
  Tensor dw = gpu().zeros({8}, DType::kF16, MemoryCategory::kOther);
  try {
    gpu().rmsnorm_backward(dx, dw, x, x, w, rstd);
    ADD_FAILURE() << "an f16 gradient of bf16 inputs was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("must be bf16 or f32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
