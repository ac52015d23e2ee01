// The per-head query/key RMSNorm ops on the CUDA backend (cuda_qk_norm.cu) against the CPU
// oracle, for f32, bf16 and f16 (the CPU runs the same dtype: its f32 twins compute in f32 and
// round once, as the kernels do). Every output is poisoned first; the weight gradients
// accumulate onto nonzero start values, in the inputs' dtype and, for 16-bit inputs, in f32.
// Proven: the forward's y and rstd within the f32 rounding of a D-term sum, value heads copied
// bit for bit; the backward's d_qkv_in (value heads copied bit for bit) and both weight
// gradients within the bounds stated at each check; the same bytes when run again; bad calls,
// a dq_weight / dk_weight dtype mismatch (one finishing kernel type on CUDA) and f64 refused.
// Shapes: 1, 7, 300 and 6000 tokens (several and many 64-token blocks of the weight gradients'
// partial sums, the last one partial; 6000 tokens of 3 heads are more head rows than the
// forward grid has warps); (H, KVH) = (1, 1), (4, 2), (8, 8); D = 5, 64, 128, 257.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "backend/qk_norm_test_inputs.h"
#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace test_cuda_qk_norm {

class CudaQkNorm : public CudaTest {};

constexpr DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};

using Inputs = qk_norm_test::QkInputs;

struct QkCase : qk_norm_test::QkShape {
  double eps;
  const char* what;
};

// eps 0.5 in some: where a misplaced eps changes the result far beyond rounding (for x in
// [-2, 2], mean(x^2) is about 1.3; Qwen3's 1e-6 would hide it).
const QkCase kCases[] = {
    {{1, 1, 1, 5}, 1e-6, "one token, H = KVH = 1, D = 5"},
    {{1, 8, 8, 257}, 0.5, "one token, H = KVH = 8, D = 257"},
    {{7, 4, 2, 64}, 1e-6, "7 tokens, GQA 4 / 2, D = 64"},
    {{7, 1, 1, 257}, 0.5, "7 tokens, D = 257: 8 or 9 elements per lane"},
    {{300, 4, 2, 128}, 1e-6, "300 tokens (5 blocks of 64, the last partial), GQA, D = 128"},
    {{300, 8, 8, 5}, 0.5, "300 tokens, H = KVH = 8, D = 5"},
    {{300, 1, 1, 64}, 1e-6, "300 tokens, H = KVH = 1, D = 64"},
    {{300, 8, 8, 257}, 1e-6, "300 tokens, H = KVH = 8, D = 257"},
    {{6000, 1, 1, 5}, 0.5, "6000 tokens: 18000 head rows over the grid's 16896 warps, 94 blocks"},
};

std::string describe(const QkCase& c, DType dtype) {
  return std::string(c.what) + ", " + dtype_name(dtype);
}

// `values` as `dtype` stores them, widened back to double: what both backends compute on.
std::vector<double> stored(const std::vector<float>& values, DType dtype) {
  std::vector<double> out;
  out.reserve(values.size());
  for (float v : values) {
    if (dtype == DType::kBF16) v = round_to_bf16(v);
    if (dtype == DType::kF16) v = round_to_f16(v);
    out.push_back(v);
  }
  return out;
}

Tensor poisoned(Backend& be, const Shape& shape, DType dtype) {
  Tensor t = be.empty(shape, dtype, MemoryCategory::kOther);
  be.fill(t, std::nan(""));
  return t;
}

// f32's unit roundoff.
const double kF32Unit = std::ldexp(1.0, -24);

// expect_close with an extra allowance per element: |gpu - cpu| <= atol + rtol * |cpu| +
// extra[i] (a bound relative to the scale of the terms an element cancels from).
void expect_close_plus(const std::vector<double>& cpu, const std::vector<double>& gpu,
                       Tolerance tol, const std::vector<double>& extra, const std::string& what) {
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  ASSERT_EQ(cpu.size(), extra.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double limit = tol.atol + tol.rtol * std::fabs(cpu[i]) + extra[i];
    if (!(std::fabs(gpu[i] - cpu[i]) <= limit) && reported++ < 5) {
      ADD_FAILURE() << what << "[" << i << "]: cpu " << cpu[i] << " gpu " << gpu[i] << " (limit "
                    << limit << ")";
    }
  }
}

// One forward and backward on a backend: the outputs as doubles and as bytes.
struct Outputs {
  std::vector<double> y, rstd, dx, dq, dk;
  std::vector<std::vector<uint8_t>> bytes;  // y, rstd, dx, dq, dk
};

Outputs run(Backend& be, const QkCase& c, const Inputs& in, DType dtype, DType grad_dtype) {
  const Shape fused{c.rows, c.columns()};
  const Tensor x = upload(be, in.x, fused, dtype);
  const Tensor wq = upload(be, in.wq, {c.dim}, dtype);
  const Tensor wk = upload(be, in.wk, {c.dim}, dtype);
  Tensor y = poisoned(be, fused, dtype);
  Tensor rstd = poisoned(be, {c.rows, c.normed()}, DType::kF32);
  be.qk_rmsnorm_forward(y, rstd, x, wq, wk, c.heads, c.kv_heads, c.eps);
  Tensor dx = poisoned(be, fused, dtype);
  Tensor dq = upload(be, in.dq_start, {c.dim}, grad_dtype);
  Tensor dk = upload(be, in.dk_start, {c.dim}, grad_dtype);
  be.qk_rmsnorm_backward(dx, dq, dk, upload(be, in.dy, fused, dtype), x, wq, wk, rstd, c.heads,
                         c.kv_heads);
  Outputs out{download(be, y), download(be, rstd), download(be, dx), download(be, dq),
              download(be, dk), {}};
  for (const Tensor* t : {&y, &rstd, &dx, &dq, &dk}) out.bytes.push_back(download_bytes(be, *t));
  return out;
}

// want and got byte for byte (the first mismatch and the count reported, not the bytes).
void expect_same_bytes(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                       const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t differing = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i] && differing++ == 0) first = i;
  }
  EXPECT_EQ(differing, 0u) << what << ": " << differing << " bytes differ, the first at byte "
                           << first;
}

// The bytes of the value heads of a fused buffer of `dtype`, in order.
std::vector<uint8_t> value_head_bytes(const QkCase& c, const std::vector<uint8_t>& fused,
                                      DType dtype) {
  const auto size = static_cast<int64_t>(dtype_size(dtype));
  std::vector<uint8_t> v;
  for (int64_t t = 0; t < c.rows; ++t) {
    const auto first = fused.begin() + (t * c.per_row() + c.normed()) * c.dim * size;
    v.insert(v.end(), first, first + c.kv_heads * c.dim * size);
  }
  return v;
}

// The scales the backward's rounding errors are relative to, from the stored inputs: per
// element of d_qkv_in s (|g w| + s |x| mean_j |g_j w_j x_j s|) (value heads 0); per channel of
// a weight gradient the sum of |g x s| over the heads it collects, plus |start|.
struct Scales {
  std::vector<double> dx, dq, dk;
};
Scales backward_scales(const QkCase& c, const Inputs& in, DType dtype, DType grad_dtype) {
  const std::vector<double> x = stored(in.x, dtype), dy = stored(in.dy, dtype);
  const std::vector<double> wq = stored(in.wq, dtype), wk = stored(in.wk, dtype);
  Scales s{std::vector<double>(x.size(), 0.0), stored(in.dq_start, grad_dtype),
           stored(in.dk_start, grad_dtype)};
  for (double& v : s.dq) v = std::fabs(v);
  for (double& v : s.dk) v = std::fabs(v);
  const auto dim = static_cast<size_t>(c.dim);
  for (int64_t t = 0; t < c.rows; ++t) {
    for (int64_t head = 0; head < c.normed(); ++head) {
      const size_t at = static_cast<size_t>(t * c.per_row() + head) * dim;
      const bool query = head < c.heads;
      const std::vector<double>& w = query ? wq : wk;
      std::vector<double>& dw = query ? s.dq : s.dk;
      double squares = 0.0;
      for (size_t i = 0; i < dim; ++i) squares += x[at + i] * x[at + i];
      const double r = 1.0 / std::sqrt(squares / static_cast<double>(dim) + c.eps);
      double mean = 0.0;
      for (size_t i = 0; i < dim; ++i) {
        mean += std::fabs(dy[at + i] * w[i] * x[at + i] * r) / static_cast<double>(dim);
        dw[i] += std::fabs(dy[at + i] * x[at + i] * r);
      }
      for (size_t i = 0; i < dim; ++i) {
        s.dx[at + i] = r * (std::fabs(dy[at + i] * w[i]) + r * std::fabs(x[at + i]) * mean);
      }
    }
  }
  return s;
}

std::vector<double> scaled(const std::vector<double>& v, double factor) {
  std::vector<double> out(v);
  for (double& x : out) x *= factor;
  return out;
}

// The gradient dtypes of `dtype`'s inputs: its own, and f32 for 16-bit inputs.
std::vector<DType> grad_dtypes(DType dtype) {
  if (dtype == DType::kF32) return {DType::kF32};
  return {dtype, DType::kF32};
}

TEST_F(CudaQkNorm, ForwardAndBackwardMatchTheCpu) {
  for (const QkCase& c : kCases) {
    const Inputs in(c, 31);
    for (DType dtype : kDtypes) {
      for (DType grad_dtype : grad_dtypes(dtype)) {
        const std::string what = describe(c, dtype) + ", gradients in " + dtype_name(grad_dtype);
        const Outputs want = run(cpu(), c, in, dtype, grad_dtype);
        const Outputs got = run(gpu(), c, in, dtype, grad_dtype);
        // y and rstd: products and quotients of one sum of D squares, which both sides add in
        // f32 in their own order (the CPU's SIMD lanes, the GPU's strided lanes and a warp
        // tree). Each side's relative error is at most (D / 2 + 6) units of f32 (the sum's
        // D - 1 roundings of positive terms halved by the square root, then the mean, eps,
        // sqrt, division and the two products): (D + 12) units apart. 16-bit y: plus the one
        // rounding of the stored value (storage_tolerance); rstd is f32 for every dtype.
        const double sum_rtol = static_cast<double>(c.dim + 12) * kF32Unit;
        expect_close(want.y, got.y, storage_tolerance(dtype, sum_rtol, 0.0), what + " y");
        expect_close(want.rstd, got.rstd, {sum_rtol, 0.0}, what + " rstd");
        // Value heads are copied, not computed: the input's bytes exactly.
        const std::vector<uint8_t> x_bytes = host_bytes(in.x, dtype);
        expect_same_bytes(value_head_bytes(c, x_bytes, dtype),
                          value_head_bytes(c, got.bytes[0], dtype), what + " y's value heads");
        const std::vector<uint8_t> dy_bytes = host_bytes(in.dy, dtype);
        expect_same_bytes(value_head_bytes(c, dy_bytes, dtype),
                          value_head_bytes(c, got.bytes[2], dtype),
                          what + " d_qkv_in's value heads");

        const Scales s = backward_scales(c, in, dtype, grad_dtype);
        // d_qkv_in = s (g w - x s mean(g w x s)): each side computes it in f32 from its own s
        // (relative error (D / 2 + 6) units, entering the second term three times) and a
        // D-term row sum (D units of the mean of |g w x s|), plus a few roundings - at most
        // (3 D + 32) units of the scale s (|g w| + s |x| mean |g w x s|) per side, so
        // (6 D + 64) apart: a bound on the scale, not on dx, which can cancel to ~0. 16-bit:
        // one rounding of the stored value on top.
        const double dim = static_cast<double>(c.dim);
        expect_close_plus(want.dx, got.dx, storage_tolerance(dtype, 0.0, 0.0),
                          scaled(s.dx, (6 * dim + 64) * kF32Unit), what + " d_qkv_in");
        // Weight gradients: start + the sum over T = N H (N KVH) head rows of g x s, each term
        // off by (D / 2 + 8) units (s and two products) and the sum in any order (the CPU by
        // 128-token blocks, the GPU by 64-token blocks then the blocks across 32 warps) by at
        // most T units of the sum of the terms' magnitudes: (2 T + D + 20) units of
        // (|start| + sum |g x s|) apart. 16-bit gradients: one rounding of the stored sum.
        const auto tokens = static_cast<double>(c.rows);
        const double tq = tokens * static_cast<double>(c.heads);
        const double tk = tokens * static_cast<double>(c.kv_heads);
        const Tolerance grad_tol = storage_tolerance(grad_dtype, 0.0, 0.0);
        expect_close_plus(want.dq, got.dq, grad_tol, scaled(s.dq, (2 * tq + dim + 20) * kF32Unit),
                          what + " dq_weight");
        expect_close_plus(want.dk, got.dk, grad_tol, scaled(s.dk, (2 * tk + dim + 20) * kF32Unit),
                          what + " dk_weight");
      }
    }
  }
}

// No atomics: fixed partial-sum blocks added in a fixed order, so a second run gives the same
// bytes (the engine's bit-identical recompute relies on it).
TEST_F(CudaQkNorm, RunsAgainBitForBit) {
  const QkCase& c = kCases[4];  // 300 tokens: several partial-sum blocks
  const Inputs in(c, 32);
  for (DType dtype : kDtypes) {
    const Outputs first = run(gpu(), c, in, dtype, DType::kF32);
    const Outputs second = run(gpu(), c, in, dtype, DType::kF32);
    const char* names[] = {"y", "rstd", "d_qkv_in", "dq_weight", "dk_weight"};
    for (size_t i = 0; i < first.bytes.size(); ++i) {
      expect_same_bytes(first.bytes[i], second.bytes[i], describe(c, dtype) + " " + names[i]);
    }
  }
}

// Runs `call`, which must throw ShapeError whose message contains every one of `names`.
using qk_norm_test::expect_shape_error;

TEST_F(CudaQkNorm, BadCallsThrowShapeError) {
  CudaBackend& be = gpu();
  const int64_t n = 3, h = 2, kvh = 1, d = 4, cols = (h + 2 * kvh) * d;
  const DType f32 = DType::kF32;
  auto zeros = [&](const Shape& shape, DType dtype) {
    return be.zeros(shape, dtype, MemoryCategory::kOther);
  };
  Tensor x = zeros({n, cols}, f32), y = zeros({n, cols}, f32);
  Tensor wq = zeros({d}, f32), wk = zeros({d}, f32), rstd = zeros({n, h + kvh}, f32);
  Tensor dy = zeros({n, cols}, f32), dx = zeros({n, cols}, f32);
  Tensor dq = zeros({d}, f32), dk = zeros({d}, f32);
  be.qk_rmsnorm_forward(y, rstd, x, wq, wk, h, kvh, 1e-6);  // well-formed: runs
  be.qk_rmsnorm_backward(dx, dq, dk, dy, x, wq, wk, rstd, h, kvh);

  Tensor x_odd = zeros({n, cols + 1}, f32), y_odd = zeros({n, cols + 1}, f32);
  expect_shape_error([&] { be.qk_rmsnorm_forward(y_odd, rstd, x_odd, wq, wk, h, kvh, 1e-6); },
                     {"qkv_in", "columns"}, "a column count that is no multiple of H + 2 KVH");
  expect_shape_error([&] { be.qk_rmsnorm_forward(y, rstd, x, wq, wk, 0, kvh, 1e-6); },
                     {"heads", "at least 1"}, "heads 0");
  expect_shape_error([&] { be.qk_rmsnorm_forward(x, rstd, x, wq, wk, h, kvh, 1e-6); },
                     {"qkv_out", "storage"}, "qkv_out over qkv_in");
  Tensor w_long = zeros({d + 1}, f32);
  expect_shape_error([&] { be.qk_rmsnorm_forward(y, rstd, x, wq, w_long, h, kvh, 1e-6); },
                     {"k_weight"}, "k_weight of D + 1");
  Tensor rstd_bf16 = zeros({n, h + kvh}, DType::kBF16);
  expect_shape_error([&] { be.qk_rmsnorm_forward(y, rstd_bf16, x, wq, wk, h, kvh, 1e-6); },
                     {"rstd"}, "rstd in bf16");
  const Tensor host_w = Tensor::zeros_host({d}, f32);
  expect_shape_error([&] { be.qk_rmsnorm_forward(y, rstd, x, host_w, wk, h, kvh, 1e-6); },
                     {"q_weight"}, "q_weight in host memory");
  expect_shape_error([&] { be.qk_rmsnorm_backward(dy, dq, dk, dy, x, wq, wk, rstd, h, kvh); },
                     {"d_qkv_in", "d_qkv_out", "storage"}, "d_qkv_in over d_qkv_out");
  Tensor rstd_wide = zeros({n, h + 2 * kvh}, f32);
  expect_shape_error(
      [&] { be.qk_rmsnorm_backward(dx, dq, dk, dy, x, wq, wk, rstd_wide, h, kvh); }, {"rstd"},
      "rstd with a column per value head too");
  // The kernels read the weights as the inputs' storage type: f32 weights with bf16 inputs
  // (which the CPU backend takes) are refused here rather than misread.
  Tensor x16 = zeros({n, cols}, DType::kBF16), y16 = zeros({n, cols}, DType::kBF16);
  expect_shape_error([&] { be.qk_rmsnorm_forward(y16, rstd, x16, wq, wk, h, kvh, 1e-6); },
                     {"q_weight", "bf16"}, "f32 weights with bf16 inputs");
}

// dq_weight and dk_weight of different dtypes (both allowed by the shared checks for 16-bit
// inputs, and run by the CPU) are refused: one finishing kernel type serves both.
TEST_F(CudaQkNorm, GradientsOfTwoDtypesAreRefused) {
  const QkCase c{{3, 2, 1, 8}, 1e-6, "3 tokens"};
  const Inputs in(c, 33);
  for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
    const DType bf16 = DType::kBF16;
    const Shape fused{c.rows, c.columns()};
    const Tensor x = upload(*be, in.x, fused, bf16);
    const Tensor wq = upload(*be, in.wq, {c.dim}, bf16), wk = upload(*be, in.wk, {c.dim}, bf16);
    Tensor y = poisoned(*be, fused, bf16), dx = poisoned(*be, fused, bf16);
    Tensor rstd = poisoned(*be, {c.rows, c.normed()}, DType::kF32);
    be->qk_rmsnorm_forward(y, rstd, x, wq, wk, c.heads, c.kv_heads, c.eps);
    Tensor dq = upload(*be, in.dq_start, {c.dim}, DType::kF32);
    Tensor dk = upload(*be, in.dk_start, {c.dim}, bf16);
    const Tensor dy = upload(*be, in.dy, fused, bf16);
    auto call = [&] { be->qk_rmsnorm_backward(dx, dq, dk, dy, x, wq, wk, rstd, 2, 1); };
    if (be == &cpu()) {
      EXPECT_NO_THROW(call());
    } else {
      expect_shape_error(call, {"dq_weight", "dk_weight", "one dtype"}, "f32 dq, bf16 dk");
    }
  }
}

// f64 runs on the CPU backend only: the CUDA backend says so instead of misreading the data.
TEST_F(CudaQkNorm, F64IsUnsupported) {
  const int64_t n = 2, d = 4, cols = 3 * d;
  auto zeros = [&](const Shape& shape) {
    return gpu().zeros(shape, DType::kF64, MemoryCategory::kOther);
  };
  Tensor x = zeros({n, cols}), y = zeros({n, cols}), w = zeros({d}), rstd = zeros({n, 2});
  EXPECT_THROW(gpu().qk_rmsnorm_forward(y, rstd, x, w, w, 1, 1, 1e-6), UnsupportedError);
  Tensor dx = zeros({n, cols}), dy = zeros({n, cols}), dq = zeros({d}), dk = zeros({d});
  EXPECT_THROW(gpu().qk_rmsnorm_backward(dx, dq, dk, dy, x, w, w, rstd, 1, 1), UnsupportedError);
}

}  // namespace test_cuda_qk_norm
}  // namespace zero::backend::cuda_test
