// CudaBackend's matrix products: argument checks, then cuBLASLt (cuda_matmul.h) on the current
// stream, with the fallbacks cuBLASLt needs (a bias it cannot fuse, operands at addresses it has
// no kernel for) and pitched copies of operands whose rows are not 16-byte aligned.
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_arg_checks.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/error.h"

namespace zero::backend {

using cuda_internal::Checks;
using cuda_internal::leading_rows;

// ---- pitched operands ------------------------------------------------------------------------
//
// A matrix whose rows do not start on 16-byte boundaries (a leading dimension of 50257 bf16
// elements: GPT-2's logits) keeps cuBLASLt off its fast Hopper kernels, whose TMA loads need
// 16-byte strides, and onto much slower ones. For a product big enough to matter such operands
// are copied into pitched scratch (rows padded to 16 bytes) and c copied back: one extra pass
// over each, small next to the product. ZERO_CUDA_PITCHED_GEMM=0 turns it off (to measure it).

namespace {

int64_t padded_ld(int64_t ld, size_t element) {
  const auto per_16_bytes = static_cast<int64_t>(16 / element);
  return (ld + per_16_bytes - 1) / per_16_bytes * per_16_bytes;
}

bool misaligned(int64_t ld, size_t element) {
  return (static_cast<size_t>(ld) * element) % 16 != 0;
}

}  // namespace

bool CudaBackend::pitch_pays(const cuda::GemmOperands& op) const {
  static const bool enabled = [] {
    const char* choice = std::getenv("ZERO_CUDA_PITCHED_GEMM");
    return choice == nullptr || std::strcmp(choice, "0") != 0;
  }();
  if (!enabled) return false;
  // Below about 2 GFLOP the copies would cost more than the slow kernel loses.
  const double flops = 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) *
                       static_cast<double>(op.k);
  const size_t element = dtype_size(op.dtype);
  const size_t c_element = op.c_f32 ? sizeof(float) : element;
  return flops >= 2e9 && (misaligned(op.lda, element) || misaligned(op.ldb, element) ||
                          misaligned(op.ldc, c_element));
}

Tensor CudaBackend::pitched_copy(const void* src, int64_t rows, int64_t cols, int64_t ld,
                                 int64_t pitched_ld, size_t element) {
  Tensor copy = scratch(static_cast<size_t>(rows) * static_cast<size_t>(pitched_ld) * element);
  ZERO_CUDA_CHECK(cudaMemcpy2DAsync(copy.raw_data(), static_cast<size_t>(pitched_ld) * element,
                                    src, static_cast<size_t>(ld) * element,
                                    static_cast<size_t>(cols) * element,
                                    static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                                    current()));
  return copy;
}

bool CudaBackend::gemm_pitched(const cuda::GemmOperands& op) {
  const size_t element = dtype_size(op.dtype);
  const size_t c_element = op.c_f32 ? sizeof(float) : element;
  cuda::GemmOperands p = op;
  Tensor a, b, c;
  if (misaligned(op.lda, element)) {
    const int64_t rows = op.transpose_a ? op.k : op.m, cols = op.transpose_a ? op.m : op.k;
    p.lda = padded_ld(op.lda, element);
    a = pitched_copy(op.a, rows, cols, op.lda, p.lda, element);
    p.a = a.raw_data();
  }
  if (misaligned(op.ldb, element)) {
    const int64_t rows = op.transpose_b ? op.n : op.k, cols = op.transpose_b ? op.k : op.n;
    p.ldb = padded_ld(op.ldb, element);
    b = pitched_copy(op.b, rows, cols, op.ldb, p.ldb, element);
    p.b = b.raw_data();
  }
  const bool pitched_c = misaligned(op.ldc, c_element);
  if (pitched_c) {
    p.ldc = padded_ld(op.ldc, c_element);
    if (op.beta != 0.0f) {
      c = pitched_copy(op.c, op.m, op.n, op.ldc, p.ldc, c_element);
    } else {
      c = scratch(static_cast<size_t>(op.m) * static_cast<size_t>(p.ldc) * c_element);
    }
    p.c = c.raw_data();
  }
  if (!run_matmul(p)) {
    return false;  // the unpitched paths take it (nothing was written to op.c)
  }
  if (pitched_c) {
    ZERO_CUDA_CHECK(cudaMemcpy2DAsync(op.c, static_cast<size_t>(op.ldc) * c_element, p.c,
                                      static_cast<size_t>(p.ldc) * c_element,
                                      static_cast<size_t>(op.n) * c_element,
                                      static_cast<size_t>(op.m), cudaMemcpyDeviceToDevice,
                                      current()));
  }
  return true;
}

// ---- matrix products -------------------------------------------------------------------------

void CudaBackend::gemm(const cuda::GemmOperands& op) {
  if (op.m == 0 || op.n == 0) return;
  if (op.k == 0) {
    // An empty inner dimension: c = beta c (+ bias). cuBLASLt rejects zero-sized operands.
    ZERO_CHECK(op.bias == nullptr, "bias with an empty product is handled by linear_product");
    const DType c_dtype = op.c_f32 ? DType::kF32 : op.dtype;
    const size_t c_element = dtype_size(c_dtype);
    if (op.beta == 0.0f) {
      // 0.0 is all-zero bits in every floating dtype; only c's n columns of each row.
      ZERO_CUDA_CHECK(cudaMemset2DAsync(op.c, static_cast<size_t>(op.ldc) * c_element, 0,
                                        static_cast<size_t>(op.n) * c_element,
                                        static_cast<size_t>(op.m), current()));
    } else {
      Tensor c = Tensor::borrow(op.c, {op.m, op.ldc}, c_dtype, device(), nullptr);
      Tensor view = c.narrow(1, 0, op.n);
      scale(view, op.beta);
    }
    return;
  }
  if (!matmul_workspace_.defined()) {
    // cuBLASLt's recommended workspace for Hopper; one buffer, kept for the backend's life.
    matmul_workspace_ = scratch(size_t{32} << 20);
  }
  // A 16-bit c that the product adds to, or that two parts along k add up: summed in f32 and
  // rounded once (gemm_through_f32). Only a contiguous c: it is copied whole.
  const bool sixteen_bit_c = !op.c_f32 && op.dtype != DType::kF32;
  const bool summable = sixteen_bit_c && op.ldc == op.n && op.bias == nullptr;
  if (summable && op.beta != 0.0f) {
    gemm_through_f32(op);
    return;
  }
  if (split_enabled()) {
    const cuda::GemmSplit split = cuda::split_unaligned_dimension(op);
    const bool inner = split.along == cuda::GemmSplit::Along::kInner;
    if (inner && summable) {
      gemm_through_f32(op);  // splits there, both parts adding into the f32 sum
      return;
    }
    if (split.along != cuda::GemmSplit::Along::kNone && !(inner && sixteen_bit_c)) {
      ++split_products_;
      gemm(split.main);  // each part may split again along its next unaligned dimension
      gemm(split.tail);  // along k: beta 1, onto the main part
      return;
    }
  }
  if (pitch_pays(op) && gemm_pitched(op)) return;
  if (run_matmul(op)) return;
  cuda::GemmOperands plain = op;
  if (op.bias != nullptr) {
    // No bias-epilogue algorithm for this shape: broadcast the bias, then add the product.
    ZERO_CHECK(op.ldc == op.n, "bias fallback needs a contiguous c");
    cuda::launch_broadcast_rows(op.c, op.bias, op.dtype, op.m, op.n, current());
    plain.bias = nullptr;
    plain.beta = 1.0f;
    gemm(plain);  // a 16-bit c added to goes through the f32 sum (gemm_through_f32)
    return;
  }
  gemm_realigned(plain);
}

// c (16-bit, contiguous) = alpha op(a) op(b) + beta c through an f32 sum: cuBLASLt rounds more
// than once where it adds to a 16-bit c (an H200: 2 bf16 units off for beta = 1, dw-like
// products, mechanism not established) and the two parts of a k split would round twice. The
// sum starts as beta c (or is overwritten), takes the product in f32 - split there if it pays -
// and is rounded into c once.
void CudaBackend::gemm_through_f32(const cuda::GemmOperands& op) {
  const size_t cells = static_cast<size_t>(op.m) * static_cast<size_t>(op.n);
  Tensor sum = scratch(cells * sizeof(float));
  Tensor sum_view = Tensor::borrow(sum.raw_data(), {op.m, op.n}, DType::kF32, device(), nullptr);
  Tensor c = Tensor::borrow(op.c, {op.m, op.n}, op.dtype, device(), nullptr);
  cuda::GemmOperands wide = op;
  wide.c = sum.raw_data();
  wide.ldc = op.n;
  wide.c_f32 = true;
  if (op.beta != 0.0f) {
    copy(sum_view, c);
    if (op.beta != 1.0f) scale(sum_view, op.beta);
    wide.beta = 1.0f;
  }
  gemm(wide);
  copy(c, sum_view);
}

uint64_t CudaBackend::gemm_tunings() const { return matmul_->tunings(); }

bool CudaBackend::run_matmul(const cuda::GemmOperands& op) {
  Tensor tuning_c;  // freed when the call returns (the timing has synchronised by then)
  return matmul_->run(op, matmul_workspace_.raw_data(), matmul_workspace_.nbytes(), current(),
                      [&](size_t bytes) {
                        tuning_c = scratch(bytes);
                        return tuning_c.raw_data();
                      });
}

bool CudaBackend::split_enabled() {
  // ZERO_CUDA_GEMM_SPLIT=0 turns the split off (to measure it).
  static const bool enabled = [] {
    const char* choice = std::getenv("ZERO_CUDA_GEMM_SPLIT");
    return choice == nullptr || std::strcmp(choice, "0") != 0;
  }();
  return enabled;
}

// cuBLASLt found no kernel for operands at these addresses (views at odd element offsets of a
// flat buffer): the same product on 256-byte-aligned copies, c copied back. Only each row's
// used elements are copied (2-D copies): a row-strided operand's gaps, and the gap after its
// last row that may lie past its allocation, are neither read nor written.
void CudaBackend::gemm_realigned(const cuda::GemmOperands& op) {
  const size_t element = dtype_size(op.dtype);
  const size_t c_element = op.c_f32 ? sizeof(float) : element;
  const auto copy_rows = [&](void* dst, const void* src, int64_t rows, int64_t cols, int64_t ld,
                             size_t bytes_per) {
    ZERO_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(ld) * bytes_per, src,
                                      static_cast<size_t>(ld) * bytes_per,
                                      static_cast<size_t>(cols) * bytes_per,
                                      static_cast<size_t>(rows), cudaMemcpyDeviceToDevice,
                                      current()));
  };
  const int64_t a_rows = op.transpose_a ? op.k : op.m, a_cols = op.transpose_a ? op.m : op.k;
  const int64_t b_rows = op.transpose_b ? op.n : op.k, b_cols = op.transpose_b ? op.k : op.n;
  const auto bytes_of = [](int64_t rows, int64_t ld, size_t bytes_per) {
    return static_cast<size_t>(rows) * static_cast<size_t>(ld) * bytes_per;
  };
  Tensor a = scratch(bytes_of(a_rows, op.lda, element));
  Tensor b = scratch(bytes_of(b_rows, op.ldb, element));
  Tensor c = scratch(bytes_of(op.m, op.ldc, c_element));
  copy_rows(a.raw_data(), op.a, a_rows, a_cols, op.lda, element);
  copy_rows(b.raw_data(), op.b, b_rows, b_cols, op.ldb, element);
  if (op.beta != 0.0f) copy_rows(c.raw_data(), op.c, op.m, op.n, op.ldc, c_element);
  cuda::GemmOperands aligned = op;
  aligned.a = a.raw_data();
  aligned.b = b.raw_data();
  aligned.c = c.raw_data();
  if (!run_matmul(aligned)) {
    throw UnsupportedError("cuBLASLt has no algorithm for a " + std::string(dtype_name(op.dtype)) +
                           " product [" + std::to_string(op.m) + ", " + std::to_string(op.k) +
                           "] x [" + std::to_string(op.k) + ", " + std::to_string(op.n) + "]");
  }
  copy_rows(op.c, c.raw_data(), op.m, op.n, op.ldc, c_element);
}

void CudaBackend::matmul(Tensor& c, const Tensor& a, bool transpose_a, const Tensor& b,
                         bool transpose_b, double alpha, double beta) {
  const Checks check(device(), "matmul");
  check.contiguous(c, "c").contiguous(a, "a").contiguous(b, "b");
  check.dtype(a, c.dtype(), "a").dtype(b, c.dtype(), "b");
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2) {
    check.fail("a " + shape_to_string(a.shape()) + ", b " + shape_to_string(b.shape()) + " and c " +
               shape_to_string(c.shape()) + " must all be 2-D");
  }
  const int64_t m = transpose_a ? a.size(1) : a.size(0);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  const int64_t kb = transpose_b ? b.size(1) : b.size(0);
  const int64_t n = transpose_b ? b.size(0) : b.size(1);
  if (k != kb || c.size(0) != m || c.size(1) != n) {
    check.fail("op(a) from a " + shape_to_string(a.shape()) + (transpose_a ? " (transposed)" : "") +
               " and op(b) from b " + shape_to_string(b.shape()) +
               (transpose_b ? " (transposed)" : "") + " do not multiply into c " +
               shape_to_string(c.shape()) + "; need op(a) [M,K], op(b) [K,N], c [M,N]");
  }
  cuda::GemmOperands op;
  op.dtype = c.dtype();
  op.transpose_a = transpose_a;
  op.transpose_b = transpose_b;
  op.m = m;
  op.n = n;
  op.k = k;
  op.a = a.raw_data();
  op.lda = a.size(1);
  op.b = b.raw_data();
  op.ldb = b.size(1);
  op.c = c.raw_data();
  op.ldc = n;
  op.alpha = static_cast<float>(alpha);
  op.beta = static_cast<float>(beta);
  gemm(op);
}

void CudaBackend::linear_product(Tensor& y, int64_t ldy, const Tensor& x, const Tensor& w,
                                 const Tensor* bias) {
  const int64_t rows = leading_rows(x), out = w.size(0), in = w.size(1);
  if (in == 0 && bias != nullptr) {
    cuda::launch_broadcast_rows(y.raw_data(), bias->raw_data(), y.dtype(), rows, out, current());
    return;
  }
  cuda::GemmOperands op;
  op.dtype = y.dtype();
  op.transpose_b = true;
  op.m = rows;
  op.n = out;
  op.k = in;
  op.a = x.raw_data();
  op.lda = in;
  op.b = w.raw_data();
  op.ldb = in;
  op.c = y.raw_data();
  op.ldc = ldy;
  Tensor aligned_bias;
  if (bias != nullptr && reinterpret_cast<uintptr_t>(bias->raw_data()) % 16 != 0) {
    // A bias at an unaligned offset of the flat parameter buffer: an aligned copy (out
    // elements) for the epilogue, rather than a broadcast into y that the product then adds to.
    aligned_bias = scratch(bias->nbytes());
    ZERO_CUDA_CHECK(cudaMemcpyAsync(aligned_bias.raw_data(), bias->raw_data(), bias->nbytes(),
                                    cudaMemcpyDeviceToDevice, current()));
  }
  if (bias != nullptr) {
    // cuBLASLt's bias epilogue (16-byte aligned vectors only); gemm falls back to broadcasting
    // where cuBLASLt has no such kernel for the shape.
    op.bias = aligned_bias.defined() ? aligned_bias.raw_data() : bias->raw_data();
  }
  gemm(op);
}

void CudaBackend::linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* bias) {
  const Checks check(device(), "linear_forward");
  const int64_t ldy = row_pitch(y, "linear_forward", "y");
  check_linear_forward(check, y, x, w, bias);
  linear_product(y, ldy, x, w, bias);
}

void CudaBackend::check_linear_forward(const Checks& check, const Tensor& y, const Tensor& x,
                                       const Tensor& w, const Tensor* bias) const {
  check.contiguous(x, "x").contiguous(w, "w");
  check.dtype(x, y.dtype(), "x").dtype(w, y.dtype(), "w");
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1)) {
    check.fail("x " + shape_to_string(x.shape()) + " does not fit w " + shape_to_string(w.shape()) +
               "; w must be [out, in] with in equal to x's last dimension");
  }
  Shape y_shape = x.shape();
  y_shape.back() = w.size(0);
  if (y.shape() != y_shape) {
    check.fail("y " + shape_to_string(y.shape()) + " does not match x and w; expected " +
               shape_to_string(y_shape));
  }
  if (bias != nullptr) {
    check.contiguous(*bias, "bias").dtype(*bias, y.dtype(), "bias");
    if (bias->shape() != Shape{w.size(0)}) {
      check.fail("bias " + shape_to_string(bias->shape()) + " does not match w " +
                 shape_to_string(w.shape()));
    }
    // The bias fallbacks broadcast into contiguous rows.
    if (!y.is_contiguous()) check.contiguous(y, "y (with a bias)");
  }
}

void CudaBackend::linear_backward(Tensor* dx, Tensor& dw, Tensor* dbias, const Tensor& dy,
                                  const Tensor& x, const Tensor& w) {
  const Checks check(device(), "linear_backward");
  check.contiguous(dw, "dw").contiguous(x, "x").contiguous(w, "w");
  const int64_t ld_dy = row_pitch(dy, "linear_backward", "dy");
  // dw: w's dtype, or an f32 gradient of 16-bit weights (the engine's gradients in 16-bit
  // training, the tiled logits loss's accumulator).
  check.dtype(x, w.dtype(), "x").dtype(dy, w.dtype(), "dy").grad_dtype(dw, w.dtype(), "dw");
  const bool dw_f32 = dw.dtype() != w.dtype();
  if (w.dim() != 2 || x.dim() < 1 || x.size(-1) != w.size(1)) {
    check.fail("x " + shape_to_string(x.shape()) + " does not fit w " + shape_to_string(w.shape()));
  }
  const int64_t rows = leading_rows(x), out = w.size(0), in = w.size(1);
  Shape dy_shape = x.shape();
  dy_shape.back() = out;
  if (dy.shape() != dy_shape)
    check.fail("dy " + shape_to_string(dy.shape()) + " must be " + shape_to_string(dy_shape));
  check.same_shape(dw, w, "dw", "w");
  if (dx != nullptr)
    check.contiguous(*dx, "dx").dtype(*dx, w.dtype(), "dx").same_shape(*dx, x, "dx", "x");
  if (dbias != nullptr) {
    // The column sums read contiguous rows.
    if (!dy.is_contiguous()) check.contiguous(dy, "dy (with dbias)");
    check.contiguous(*dbias, "dbias").grad_dtype(*dbias, w.dtype(), "dbias");
    if (dbias->shape() != Shape{out})
      check.fail("dbias " + shape_to_string(dbias->shape()) + " must be [" + std::to_string(out) +
                 "]");
  }
  // dw[out, in] += dy^T[out, rows] @ x[rows, in]
  cuda::GemmOperands dw_op;
  dw_op.dtype = w.dtype();
  dw_op.transpose_a = true;
  dw_op.m = out;
  dw_op.n = in;
  dw_op.k = rows;
  dw_op.a = dy.raw_data();
  dw_op.lda = ld_dy;
  dw_op.b = x.raw_data();
  dw_op.ldb = in;
  dw_op.c = dw.raw_data();
  dw_op.ldc = in;
  dw_op.beta = 1.0f;
  dw_op.c_f32 = dw_f32;
  // dy feeds both products: when its rows need pitching (see gemm_pitched), copy it once here
  // so neither product copies it again. A dy already padded to 16-byte rows (the LM head's
  // logits: Backend::preferred_row_elements) needs no copy.
  Tensor dy_pitched;
  const size_t element = dtype_size(w.dtype());
  if (pitch_pays(dw_op) && misaligned(ld_dy, element)) {
    dw_op.lda = padded_ld(out, element);
    dy_pitched = pitched_copy(dy.raw_data(), rows, out, ld_dy, dw_op.lda, element);
    dw_op.a = dy_pitched.raw_data();
  }
  if (dx != nullptr) {
    // dx[rows, in] = dy[rows, out] @ w[out, in]
    cuda::GemmOperands op;
    op.dtype = w.dtype();
    op.m = rows;
    op.n = in;
    op.k = out;
    op.a = dw_op.a;
    op.lda = dw_op.lda;
    op.b = w.raw_data();
    op.ldb = in;
    op.c = dx->raw_data();
    op.ldc = in;
    gemm(op);
  }
  gemm(dw_op);
  if (dbias != nullptr && rows > 0) {
    Tensor partials = scratch(cuda::column_sum_scratch_bytes(rows, out));
    cuda::launch_column_sums_accumulate(dbias->raw_data(), dbias->dtype(), dy.raw_data(),
                                        dy.dtype(), rows, out, partials.raw_data(), current());
  }
}

}  // namespace zero::backend
