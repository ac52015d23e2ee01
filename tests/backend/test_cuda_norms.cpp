// The two paths of the CUDA LayerNorm and RMSNorm kernels against the CPU oracle: a warp per row
// on 16-byte vectors held in registers (rows that are whole vectors on 16-byte boundaries, up to
// the register bound: GPT-2's 768 and Llama 1B's 2048 channels, one vector per row, rows not a
// multiple of a block's warps) and the block-per-row kernels (70 channels, rows off the 16-byte
// boundary, rows over the bound), for f32, bf16 and f16; each the plain forward, the residual add
// fused into the forward (into its own buffer and in place), and the backward (dx into its own
// buffer and over dy) with its accumulated weight and bias gradients. Every GPU result must be
// bit-identical when run again. Skipped without a GPU (runs on the CUDA simulator).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

struct NormCase {
  int64_t rows, channels;
  int64_t offset;  // elements between the allocation's start and the rows (1: off 16 bytes)
  const char* what;
};

const NormCase kCases[] = {
    {37, 768, 0, "768 channels (vectors), 37 rows: not a multiple of a block's 4 warps"},
    {9, 2048, 0, "2048 channels (vectors)"},
    {5, 8, 0, "8 channels: one 16-bit vector (two f32 vectors) per row"},
    {8200, 8, 0, "8200 rows: 9 a warp in the one-pass backward (1024 warps at most)"},
    {21, 70, 0, "70 channels: no whole vectors (block per row)"},
    {13, 768, 1, "768 channels one element past the 16-byte boundary (block per row)"},
    // 4104 16-bit channels: 17 vectors per lane, forward in registers, dx over the bound;
    // 4104 f32 channels: 33 vectors per lane, both over the bound.
    {3, 4104, 0, "4104 channels (over the register bounds)"},
};

// `values` as a [rows, channels] tensor `offset` elements into a fresh allocation.
Tensor rows_tensor(Backend& be, const std::vector<float>& values, const NormCase& c,
                   DType dtype) {
  Tensor base = be.empty({c.rows * c.channels + c.offset}, dtype, MemoryCategory::kOther);
  Tensor t = base.view(c.offset, {c.rows, c.channels});
  be.copy_from_host(t, host_bytes(values, dtype).data());
  return t;
}

// Every output of the forward, fused forward and backward on one backend, in a fixed order.
struct NormOutputs {
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
  std::vector<std::vector<uint8_t>> bits;
  void add(Backend& be, const Tensor& t, const std::string& name) {
    names.push_back(name);
    values.push_back(download(be, t));
    bits.push_back(download_bytes(be, t));
  }
};

// A norm's operands on one backend from seeds seed .. seed + 6: x and a residual in [-2, 2], dy,
// weight, bias and the start values of their gradients; y and a spare buffer of NaNs; mean and
// rstd unset.
struct NormOperands {
  Tensor x, residual, dy, y, own, weight, bias, dweight, dbias, mean, rstd;
  NormOperands(Backend& be, const NormCase& c, DType dtype, uint32_t seed) {
    const int64_t n = c.rows * c.channels;
    const std::vector<float> nan(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
    x = rows_tensor(be, random_values(n, seed, -2.0f, 2.0f), c, dtype);
    residual = rows_tensor(be, random_values(n, seed + 1, -2.0f, 2.0f), c, dtype);
    dy = rows_tensor(be, random_values(n, seed + 2), c, dtype);
    y = rows_tensor(be, nan, c, dtype);
    own = rows_tensor(be, nan, c, dtype);
    weight = upload(be, random_values(c.channels, seed + 3), {c.channels}, dtype);
    bias = upload(be, random_values(c.channels, seed + 4), {c.channels}, dtype);
    dweight = upload(be, random_values(c.channels, seed + 5), {c.channels}, dtype);
    dbias = upload(be, random_values(c.channels, seed + 6), {c.channels}, dtype);
    mean = be.empty({c.rows}, DType::kF32, MemoryCategory::kOther);
    rstd = be.empty({c.rows}, DType::kF32, MemoryCategory::kOther);
  }
};

NormOutputs run_norms(Backend& be, const NormCase& c, DType dtype, bool layernorm, bool bias,
                      bool in_place) {
  NormOperands o(be, c, dtype, 70);
  Tensor &tx = o.x, &tres = o.residual, &tdy = o.dy, &y = o.y, &own = o.own;
  Tensor &tw = o.weight, &tb = o.bias, &dw = o.dweight, &db = o.dbias;
  Tensor &mean = o.mean, &rstd = o.rstd;
  NormOutputs out;
  // The plain forward of x.
  be.fill(mean, layernorm ? kNaN : 0.0);
  be.fill(rstd, kNaN);
  if (layernorm) {
    be.layernorm_forward(y, mean, rstd, tx, tw, bias ? &tb : nullptr, 1e-5);
  } else {
    be.rmsnorm_forward(y, rstd, tx, tw, 1e-6);
  }
  out.add(be, y, "y");
  out.add(be, mean, "mean");
  out.add(be, rstd, "rstd");
  // The backward of that forward: dx into its own buffer or over dy.
  Tensor& dx = in_place ? tdy : own;
  if (layernorm) {
    be.layernorm_backward(dx, dw, bias ? &db : nullptr, tdy, tx, tw, mean, rstd);
  } else {
    be.rmsnorm_backward(dx, dw, tdy, tx, tw, rstd);
  }
  out.add(be, dx, "dx");
  out.add(be, dw, "dweight");
  if (layernorm && bias) out.add(be, db, "dbias");
  // The fused forward of x + residual: the sum into its own buffer or over x.
  be.fill(own, kNaN);
  be.fill(y, kNaN);
  be.fill(rstd, kNaN);
  Tensor& sum = in_place ? tx : own;
  if (layernorm) {
    be.add_layernorm_forward(sum, y, mean, rstd, tx, tres, tw, bias ? &tb : nullptr, 1e-5);
  } else {
    be.add_rmsnorm_forward(sum, y, rstd, tx, tres, tw, 1e-6);
  }
  out.add(be, sum, "sum");
  out.add(be, y, "y of the sum");
  out.add(be, mean, "mean of the sum");
  out.add(be, rstd, "rstd of the sum");
  return out;
}

// The backward with the residual gradient added to dx: in one op (Backend::*_backward_add, the
// device kernels' fused pass) or as the backward and then add(dx, residual). dx into its own
// buffer or over dy; the weight (and bias) gradients accumulate onto the same start values.
NormOutputs run_backward_add(Backend& be, const NormCase& c, DType dtype, bool layernorm,
                             bool bias, bool in_place, bool fused) {
  NormOperands o(be, c, dtype, 80);
  Tensor &tx = o.x, &tres = o.residual, &tdy = o.dy, &y = o.y, &own = o.own;
  Tensor &tw = o.weight, &tb = o.bias, &dw = o.dweight, &db = o.dbias;
  Tensor &mean = o.mean, &rstd = o.rstd;
  be.fill(mean, 0.0);
  if (layernorm) {
    be.layernorm_forward(y, mean, rstd, tx, tw, bias ? &tb : nullptr, 1e-5);
  } else {
    be.rmsnorm_forward(y, rstd, tx, tw, 1e-6);
  }
  Tensor& dx = in_place ? tdy : own;
  Tensor* dbias = layernorm && bias ? &db : nullptr;
  if (fused && layernorm) {
    be.layernorm_backward_add(dx, dw, dbias, tdy, tx, tw, mean, rstd, tres);
  } else if (fused) {
    be.rmsnorm_backward_add(dx, dw, tdy, tx, tw, rstd, tres);
  } else {
    if (layernorm) {
      be.layernorm_backward(dx, dw, dbias, tdy, tx, tw, mean, rstd);
    } else {
      be.rmsnorm_backward(dx, dw, tdy, tx, tw, rstd);
    }
    be.add(dx, tres, 1.0);
  }
  NormOutputs out;
  out.add(be, dx, "dx + residual");
  out.add(be, dw, "dweight");
  if (dbias != nullptr) out.add(be, db, "dbias");
  return out;
}

// Tolerances (|gpu - cpu| <= atol + rtol |cpu|), those of test_cuda_ops.cpp's norm tests. The
// sum of the fused add is one rounding of an exact f32 sum, as the CPU's add: no f32 part. The
// statistics are f32 row sums in another order (per lane, then a warp tree; the CPU's SIMD
// lanes): 1e-5 relative, 1e-6 absolute (the mean of values in [-2, 2] is near 0). The rest
// derive from those sums (the weight gradients from column sums of at most 37 rows, per channel
// in the same row order as the block-per-row kernels): 2e-5 relative and 5e-5 absolute in f32 -
// f32 rounding of row sums of up to 4104 terms in another order, whose errors grow like
// sqrt(terms) units of 2^-24 (observed on the simulator: below 2e-7 absolute) - plus one
// rounding unit of a 16-bit storage dtype (storage_tolerance).
Tolerance tolerance_for(const std::string& name, DType dtype) {
  if (name == "sum") return storage_tolerance(dtype, 0.0, 0.0);
  if (name.rfind("mean", 0) == 0 || name.rfind("rstd", 0) == 0) return Tolerance{1e-5, 1e-6};
  return storage_tolerance(dtype, 2e-5, 5e-5);
}

class CudaNorms : public CudaTest {};

TEST_F(CudaNorms, BothPathsMatchTheCpuAndRepeatBitForBit) {
  for (const NormCase& c : kCases) {
    for (DType dtype : kStorageTypes) {
      for (int variant = 0; variant < 6; ++variant) {
        // rmsnorm, layernorm without and with bias; each with dx and the sum in their own
        // buffers, and over dy and x.
        const bool layernorm = variant / 2 > 0, bias = variant / 2 == 2;
        const bool in_place = variant % 2 == 1;
        const std::string what = std::string(layernorm ? "layernorm " : "rmsnorm ") +
                                 dtype_name(dtype) + (bias ? " with bias" : "") +
                                 (in_place ? " in place" : "") + ", " + c.what;
        const NormOutputs want = run_norms(cpu(), c, dtype, layernorm, bias, in_place);
        const NormOutputs got = run_norms(gpu(), c, dtype, layernorm, bias, in_place);
        const NormOutputs again = run_norms(gpu(), c, dtype, layernorm, bias, in_place);
        ASSERT_EQ(want.names, got.names) << what;
        for (size_t i = 0; i < want.names.size(); ++i) {
          const std::string name = what + ": " + want.names[i];
          expect_close(want.values[i], got.values[i], tolerance_for(want.names[i], dtype), name);
          EXPECT_EQ(got.bits[i], again.bits[i]) << name << " differs between two runs";
        }
      }
    }
  }
}

// The norm backward with the residual gradient added in its pass gives on the GPU the bytes of
// the backward followed by add(dx, residual) - its contract - on both kernel paths, with dx in
// its own buffer and over dy; and the CPU's values (whose default runs those two ops).
TEST_F(CudaNorms, BackwardWithTheResidualGivesTheBytesOfBackwardThenAdd) {
  for (const NormCase& c : kCases) {
    for (DType dtype : kStorageTypes) {
      for (int variant = 0; variant < 6; ++variant) {
        const bool layernorm = variant / 2 > 0, bias = variant / 2 == 2;
        const bool in_place = variant % 2 == 1;
        const std::string what = std::string(layernorm ? "layernorm " : "rmsnorm ") +
                                 dtype_name(dtype) + (bias ? " with bias" : "") +
                                 (in_place ? " over dy" : "") + ", " + c.what;
        const NormOutputs unfused =
            run_backward_add(gpu(), c, dtype, layernorm, bias, in_place, false);
        const NormOutputs fused = run_backward_add(gpu(), c, dtype, layernorm, bias, in_place, true);
        const NormOutputs want = run_backward_add(cpu(), c, dtype, layernorm, bias, in_place, true);
        ASSERT_EQ(fused.names, unfused.names) << what;
        for (size_t i = 0; i < fused.names.size(); ++i) {
          const std::string name = what + ": " + fused.names[i];
          EXPECT_EQ(fused.bits[i], unfused.bits[i]) << name << ": fused differs from unfused";
          expect_close(want.values[i], fused.values[i], tolerance_for("dx", dtype), name);
        }
      }
    }
  }
}

// The residual must be a buffer of its own, shaped and typed as dx: a clear error otherwise, on
// the device backend and on the CPU's default alike.
TEST_F(CudaNorms, BackwardWithTheResidualRejectsDxsOwnBuffer) {
  for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
    Tensor x = be->zeros({4, 8}, DType::kF32, MemoryCategory::kOther);
    Tensor dy = be->zeros({4, 8}, DType::kF32, MemoryCategory::kOther);
    Tensor dx = be->zeros({4, 8}, DType::kF32, MemoryCategory::kOther);
    Tensor w = be->zeros({8}, DType::kF32, MemoryCategory::kOther);
    Tensor dw = be->zeros({8}, DType::kF32, MemoryCategory::kOther);
    Tensor rstd = be->zeros({4}, DType::kF32, MemoryCategory::kOther);
    Tensor narrow = be->zeros({4, 4}, DType::kF32, MemoryCategory::kOther);
    try {
      be->rmsnorm_backward_add(dx, dw, dy, x, w, rstd, dx);
      ADD_FAILURE() << "the residual was dx's own buffer";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("rmsnorm_backward_add"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("own buffer"), std::string::npos) << e.what();
    }
    EXPECT_THROW(be->rmsnorm_backward_add(dx, dw, dy, x, w, rstd, narrow), ShapeError);
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
