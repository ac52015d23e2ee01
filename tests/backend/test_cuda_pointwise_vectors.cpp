// The two paths of the CUDA RoPE and activation kernels (cuda_rope.cu, cuda_activations.cu):
// 16-byte vectors where the bases are 16-byte aligned and rows are whole vectors, the scalar
// kernels otherwise. RoPE must match the CPU bit for bit on both paths. The activations call
// tanhf/expf, which differ from glibc's by an ulp or two (test_cuda_ops.cpp's tolerance), so
// their vector path is compared with the CPU to that tolerance and with the scalar path (the
// same inputs one element past a 16-byte boundary) bit for bit. f32, bf16 and f16 storage.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

class CudaPointwiseVectors : public CudaTest {};

// `values` in `dtype` as a contiguous `shape` view starting `skew` elements into its buffer
// (skew 1 puts a 16-bit or f32 view off every 16-byte boundary: the scalar kernels).
Tensor upload_skewed(Backend& be, const std::vector<float>& values, const Shape& shape,
                     DType dtype, int64_t skew) {
  std::vector<float> padded(static_cast<size_t>(skew), 0.0f);
  padded.insert(padded.end(), values.begin(), values.end());
  return upload(be, padded, {static_cast<int64_t>(padded.size())}, dtype).view(skew, shape);
}
Tensor poisoned_skewed(Backend& be, const Shape& shape, DType dtype, int64_t skew) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  Tensor buffer = be.empty({numel + skew}, dtype, MemoryCategory::kOther);
  be.fill(buffer, kNaN);
  return buffer.view(skew, shape);
}

struct ActivationShape {
  int64_t rows, inner;
};

// gelu, gelu backward, swiglu, swiglu backward, and swiglu backward in place (dgate_up is
// gate_up's buffer, which the kernels allow), the bytes of each output.
constexpr size_t kInPlace = 4;
std::vector<std::vector<uint8_t>> run_activations(Backend& be, DType dtype, ActivationShape s,
                                                  int64_t skew) {
  const int64_t width = 2 * s.inner;
  // GELU over 3 elements fewer than [rows, 2 * inner]: a count that is no multiple of a vector.
  const int64_t gelu_n = s.rows * width - 3;
  const std::vector<float> x = random_values(s.rows * width, 41, -4.0f, 4.0f);
  const std::vector<float> dy = random_values(s.rows * width, 42);
  Tensor gx = upload_skewed(be, {x.begin(), x.begin() + gelu_n}, {gelu_n}, dtype, skew);
  Tensor gdy = upload_skewed(be, {dy.begin(), dy.begin() + gelu_n}, {gelu_n}, dtype, skew);
  Tensor gate_up = upload_skewed(be, x, {s.rows, width}, dtype, skew);
  Tensor in_place = upload_skewed(be, x, {s.rows, width}, dtype, skew);
  Tensor sdy = upload_skewed(be, {dy.begin(), dy.begin() + s.rows * s.inner}, {s.rows, s.inner},
                             dtype, skew);
  Tensor y = poisoned_skewed(be, {gelu_n}, dtype, skew);
  Tensor dx = poisoned_skewed(be, {gelu_n}, dtype, skew);
  Tensor sy = poisoned_skewed(be, {s.rows, s.inner}, dtype, skew);
  Tensor dgu = poisoned_skewed(be, {s.rows, width}, dtype, skew);
  be.gelu_forward(y, gx);
  be.gelu_backward(dx, gdy, gx);
  be.swiglu_forward(sy, gate_up);
  be.swiglu_backward(dgu, sdy, gate_up);
  be.swiglu_backward(in_place, sdy, in_place);
  std::vector<std::vector<uint8_t>> out;
  for (const Tensor* t : {&y, &dx, &sy, &dgu, &in_place}) out.push_back(download_bytes(be, *t));
  return out;
}

std::vector<double> widen(const std::vector<uint8_t>& bytes, DType dtype) {
  const int64_t n = static_cast<int64_t>(bytes.size() / dtype_size(dtype));
  CpuBackend cpu;
  Tensor t = cpu.empty({n}, dtype, MemoryCategory::kOther);
  cpu.copy_from_host(t, bytes.data());
  return download(cpu, t);
}

TEST_F(CudaPointwiseVectors, ActivationVectorPathsMatchTheScalarPathsAndTheCpu) {
  // inner 64: whole vectors of every dtype; inner 36: of f32 (4 lanes) but not of 16-bit (8).
  const char* names[] = {"gelu", "gelu backward", "swiglu", "swiglu backward",
                         "swiglu backward in place"};
  for (ActivationShape s : {ActivationShape{6, 64}, ActivationShape{5, 36}}) {
    for (DType dtype : kStorageTypes) {
      const auto vector_path = run_activations(gpu(), dtype, s, 0);
      const auto scalar_path = run_activations(gpu(), dtype, s, 1);
      const auto oracle = run_activations(cpu(), dtype, s, 0);
      for (size_t i = 0; i < vector_path.size(); ++i) {
        const std::string what = std::string(names[i]) + " " + dtype_name(dtype) + " inner " +
                                 std::to_string(s.inner);
        EXPECT_EQ(vector_path[i], scalar_path[i]) << what;
        if (i == kInPlace) {
          // The CPU's loop writes dup before it reads up, so only the device runs it in place.
          EXPECT_EQ(vector_path[i], vector_path[kInPlace - 1]) << what;
        } else {
          expect_close(widen(oracle[i], dtype), widen(vector_path[i], dtype),
                       storage_tolerance(dtype, 1e-6, 1e-6), what);
        }
      }
    }
  }
}

// x is a [B, T, H, D] view into a [B, T, H + extra_heads, D + pad] buffer, starting at head
// first_head and element first_d of each head.
struct RopeCase {
  int64_t batch, seq, heads, head_dim, extra_heads, first_head, pad, first_d;
  const char* what;
};

TEST_F(CudaPointwiseVectors, RopeMatchesTheCpuBitForBitOnBothPaths) {
  const RopeCase cases[] = {
      {2, 5, 2, 128, 0, 0, 0, 0, "contiguous, D 128 (vectors)"},
      {2, 3, 2, 64, 2, 1, 0, 0, "q inside a fused qkv buffer, D 64 (vectors)"},
      {1, 4, 3, 64, 0, 0, 2, 0, "head stride 66 (scalar)"},
      {2, 3, 2, 64, 0, 0, 8, 1, "base one element past a boundary (scalar)"},
      {2, 3, 2, 72, 0, 0, 0, 0, "half 36: f32 vectors, 16-bit scalar"},
      {1, 3, 2, 10, 1, 1, 0, 0, "half 5 (scalar)"},
  };
  for (const RopeCase& c : cases) {
    const int64_t width = c.heads + c.extra_heads, row = c.head_dim + c.pad, half = c.head_dim / 2;
    const std::vector<float> buffer_values = random_values(c.batch * c.seq * width * row, 43);
    const std::vector<float> cs = random_values(c.seq * half, 44);
    const std::vector<float> sn = random_values(c.seq * half, 45);
    for (DType dtype : kStorageTypes) {
      for (DType table : {dtype, DType::kF32}) {
        if (table == DType::kF32 && dtype == DType::kF32) continue;
        // [backend][forward, then the inverse applied to the forward's result]
        std::vector<uint8_t> bits[2][2];
        int slot = 0;
        for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
          Tensor buffer = upload(*be, buffer_values, {c.batch, c.seq, width, row}, dtype);
          Tensor x = buffer.narrow(2, c.first_head, c.heads).narrow(3, c.first_d, c.head_dim);
          Tensor tc = upload(*be, cs, {c.seq, half}, table);
          Tensor ts = upload(*be, sn, {c.seq, half}, table);
          be->rope_apply(x, tc, ts, false);
          bits[slot][0] = download_bytes(*be, buffer);
          be->rope_apply(x, tc, ts, true);
          bits[slot][1] = download_bytes(*be, buffer);
          ++slot;
        }
        const std::string what = std::string(c.what) + ", " + dtype_name(dtype) + " x, " +
                                 dtype_name(table) + " tables";
        EXPECT_EQ(bits[0][0], bits[1][0]) << what;
        EXPECT_EQ(bits[0][1], bits[1][1]) << what << ", inverse";
        EXPECT_NE(bits[0][0], bits[0][1]) << what << ": the inverse changed nothing";
      }
    }
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
