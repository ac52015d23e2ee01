// The bias gradient's column sums (cuda_bias.cu): dy with 16-byte-aligned rows takes the vector
// kernel (a 16-byte vector of columns per thread), any other dy the column-per-thread kernel.
// Both add the same f64 values in the same order, so dbias must come out bit for bit the same
// from the two paths, and within the linear op's tolerance of the CPU oracle. Skipped without a
// GPU (run by the CUDA simulator in CI).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

class CudaColumnSums : public CudaTest {};

// dbias of linear_backward with the same dy values at element `offset` of their buffer (1: rows
// not 16-byte aligned).
std::vector<uint8_t> bias_gradient(Backend& be, DType dtype, int64_t rows, int64_t in,
                                   int64_t out, int64_t offset) {
  const std::vector<float> x = random_values(rows * in, 61), w = random_values(out * in, 62);
  std::vector<float> dy(static_cast<size_t>(offset), 0.0f);
  const std::vector<float> values = random_values(rows * out, 63, -2.0f, 2.0f);
  dy.insert(dy.end(), values.begin(), values.end());
  const std::vector<float> db0 = random_values(out, 64);
  Tensor tx = upload(be, x, {rows, in}, dtype), tw = upload(be, w, {out, in}, dtype);
  Tensor tdy = upload(be, dy, {rows * out + offset}, dtype).view(offset, {rows, out});
  Tensor dw = be.zeros({out, in}, dtype, MemoryCategory::kOther);
  Tensor db = upload(be, db0, {out}, dtype);
  be.linear_backward(nullptr, dw, &db, tdy, tx, tw);
  return download_bytes(be, db);
}

std::vector<double> widened(DType dtype, const std::vector<uint8_t>& bytes, Backend& be,
                            int64_t n) {
  Tensor t = be.empty({n}, dtype, MemoryCategory::kOther);
  be.copy_from_host(t, bytes.data());
  return download(be, t);
}

TEST_F(CudaColumnSums, VectorAndScalarPathsGiveTheSameBits) {
  // 300 rows: five row blocks, the last one short; 72 and 776 columns: every vector width
  // divides them, 776 / 8 = 97 vectors spill into a second block of the vector kernel.
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (int64_t out : {72, 776}) {
      const int64_t rows = 300, in = 24;
      const std::vector<uint8_t> vector_path = bias_gradient(gpu(), dtype, rows, in, out, 0);
      const std::vector<uint8_t> scalar_path = bias_gradient(gpu(), dtype, rows, in, out, 1);
      const std::string what = std::string(dtype_name(dtype)) + " cols " + std::to_string(out);
      EXPECT_EQ(vector_path, scalar_path) << what;
      // f64 sums rounded once: within a rounding of the stored dtype of the CPU's (which sums
      // its own fixed blocks).
      const std::vector<uint8_t> reference = bias_gradient(cpu(), dtype, rows, in, out, 0);
      expect_close(widened(dtype, reference, cpu(), out), widened(dtype, vector_path, cpu(), out),
                   storage_tolerance(dtype, 1e-6, 1e-6), "dbias " + what);
    }
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
