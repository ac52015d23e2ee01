// Every CUDA op against the CPU oracle on random inputs at awkward sizes (no multiple of any
// tile), outputs poisoned with NaN before each run, for f32, bf16 and f16 storage. Tolerances:
// pointwise ops whose CUDA arithmetic repeats the CPU's operation order (fill, conversions,
// stochastic rounding, add, scale, embedding, RoPE, Adam/Lion/Adagrad) must match bit for bit;
// ops that sum in another order get f32 rounding tolerances scaled by the summation length,
// plus one rounding unit of the stored 16-bit dtype (cuda_test_support.h). Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_support.h"

namespace zero::backend::cuda_test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kStorageTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

class CudaOps : public CudaTest {};

// A fused "store + sum of squares" op (a held gradient's norm taken as it is stored) run three
// ways: the CPU's fused op, the device's fused op, the device's two separate ops.
// `run(backend, fused, sum)` runs one of them and returns the tensor it stored. The device's
// fused op must leave the separate ops' bytes and sum bit for bit, and the CPU's bytes; the CPU
// sums in its own order, so its sum agrees within f64 rounding (or is the same infinity).
template <typename Run>
void expect_fused_sum_of_squares_matches(Backend& cpu_backend, Backend& gpu_backend,
                                         const std::string& what, Run&& run) {
  std::vector<uint8_t> stored[3];
  double sums[3] = {};
  for (int r = 0; r < 3; ++r) {
    Backend& be = r == 0 ? cpu_backend : gpu_backend;
    Tensor sum = be.empty({1}, DType::kF64, MemoryCategory::kOther);
    const Tensor out = run(be, r != 2, sum);
    stored[r] = download_bytes(be, out);
    be.copy_to_host(&sums[r], sum);
  }
  EXPECT_EQ(stored[1], stored[0]) << what;
  EXPECT_EQ(stored[1], stored[2]) << what;
  EXPECT_EQ(std::memcmp(&sums[1], &sums[2], sizeof(double)), 0)
      << what << ": " << sums[1] << " vs " << sums[2];
  if (std::isinf(sums[0])) {
    EXPECT_EQ(sums[1], sums[0]) << what;
  } else {
    EXPECT_NEAR(sums[1], sums[0], 1e-12 * sums[0]) << what;
  }
}

TEST_F(CudaOps, FillAndConversionsMatchTheCpuBitForBit) {
  const std::vector<float> values = random_values(1000, 1, -70000.0f, 70000.0f);
  for (DType src : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    for (DType dst : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
      Tensor cs = upload(cpu(), values, {1000}, src);
      Tensor gs = upload(gpu(), values, {1000}, src);
      Tensor cd = cpu().empty({1000}, dst, MemoryCategory::kOther);
      Tensor gd = gpu().empty({1000}, dst, MemoryCategory::kOther);
      cpu().copy(cd, cs);
      gpu().copy(gd, gs);
      EXPECT_EQ(download_bytes(cpu(), cd), download_bytes(gpu(), gd))
          << dtype_name(src) << " -> " << dtype_name(dst);
    }
  }
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64,
                      DType::kU8}) {
    Tensor c = cpu().empty({37}, dtype, MemoryCategory::kOther);
    Tensor g = gpu().empty({37}, dtype, MemoryCategory::kOther);
    const double value = dtype_is_floating(dtype) ? 1.0 / 3.0 : 7.0;
    cpu().fill(c, value);
    gpu().fill(g, value);
    EXPECT_EQ(download_bytes(cpu(), c), download_bytes(gpu(), g)) << dtype_name(dtype);
  }
}

TEST_F(CudaOps, StochasticRoundingUsesTheSameBitsAsTheCpu) {
  const std::vector<float> values = random_values(5003, 2, -3.0f, 3.0f);
  Tensor cs = upload(cpu(), values, {5003}, DType::kF32);
  Tensor gs = upload(gpu(), values, {5003}, DType::kF32);
  Tensor cd = cpu().empty({5003}, DType::kBF16, MemoryCategory::kOther);
  Tensor gd = gpu().empty({5003}, DType::kBF16, MemoryCategory::kOther);
  cpu().stochastic_round_to_bf16(cd, cs, 0x1234, 99);
  gpu().stochastic_round_to_bf16(gd, gs, 0x1234, 99);
  EXPECT_EQ(download_bytes(cpu(), cd), download_bytes(gpu(), gd));
}

// Offset 0: 16-byte vectors and a tail; offset 1: the element-wise kernel.
TEST_F(CudaOps, AddAndScaleMatchTheCpuBitForBit) {
  for (DType dtype : kStorageTypes) {
    for (int64_t offset : {0, 1}) {
      const std::vector<float> y = random_values(3002, 3), x = random_values(3002, 4);
      Tensor cy = upload(cpu(), y, {3002}, dtype).view(offset, {3001});
      Tensor gy = upload(gpu(), y, {3002}, dtype).view(offset, {3001});
      Tensor cx = upload(cpu(), x, {3002}, dtype).view(offset, {3001});
      Tensor gx = upload(gpu(), x, {3002}, dtype).view(offset, {3001});
      cpu().add(cy, cx, 0.37);
      gpu().add(gy, gx, 0.37);
      cpu().scale(cy, -1.7);
      gpu().scale(gy, -1.7);
      EXPECT_EQ(download_bytes(cpu(), cy), download_bytes(gpu(), gy))
          << dtype_name(dtype) << " offset " << offset;
    }
  }
}

// The fused acc += round(x) (the micro-batch gradient rounded to the parameters' dtype, summed
// into the f32 accumulator) gives the CPU's composition of copy, copy and add bit for bit: on
// 16-byte-aligned buffers (four elements per access, then a tail) and on views at an odd offset.
TEST_F(CudaOps, AddRoundedMatchesCopyCopyAddBitForBit) {
  const int64_t n = 1003;
  const std::vector<float> acc0 = random_values(n + 1, 50, -3.0f, 3.0f);
  const std::vector<float> x = random_values(n + 1, 51, -70000.0f, 70000.0f);
  for (DType through : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t offset : {0, 1}) {
      std::vector<uint8_t> results[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor acc = upload(*be, acc0, {n + 1}, DType::kF32).view(offset, {n});
        Tensor tx = upload(*be, x, {n + 1}, DType::kF32).view(offset, {n});
        be->add_rounded(acc, tx, through);
        results[slot++] = download_bytes(*be, acc);
      }
      EXPECT_EQ(results[0], results[1]) << dtype_name(through) << " offset " << offset;
    }
  }
}

TEST_F(CudaOps, RoundInPlaceMatchesCopyCopyBitForBit) {
  const int64_t n = 1003;
  const std::vector<float> x = random_values(n + 1, 52, -70000.0f, 70000.0f);
  for (DType through : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t offset : {0, 1}) {  // 1: not 16-byte aligned, the scalar loop
      std::vector<uint8_t> results[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor values = upload(*be, x, {n + 1}, DType::kF32).view(offset, {n});
        be->round_in_place(values, through);
        results[slot++] = download_bytes(*be, values);
      }
      EXPECT_EQ(results[0], results[1]) << dtype_name(through) << " offset " << offset;
    }
  }
}

// The fused rounding + sum of squares (a held gradient's norm taken as it is stored) leaves the
// values of round_in_place and the sum of sum_squares over them, bit for bit, on the device and
// against the CPU - over three reduction chunks (the last one partial). f16's range
// (+-70000 > 65504) puts infinities in the sum, as an overflow must.
TEST_F(CudaOps, RoundingWithItsSumOfSquaresHasTheBitsOfTheTwoOps) {
  const int64_t n = 2 * 65536 + 37;
  const std::vector<float> x = random_values(n, 53, -70000.0f, 70000.0f);
  for (DType through : {DType::kBF16, DType::kF16, DType::kF32}) {
    expect_fused_sum_of_squares_matches(
        cpu(), gpu(), dtype_name(through), [&](Backend& be, bool fused, Tensor& sum) {
          Tensor tx = upload(be, x, {n}, DType::kF32);
          if (fused) {
            be.round_in_place_sum_squares(tx, through, sum);
          } else {
            be.round_in_place(tx, through);
            be.sum_squares(sum, tx, false);
          }
          return tx;
        });
  }
}

TEST_F(CudaOps, MatmulMatchesTheCpuForEveryTransposeAndDtype) {
  const int64_t m = 37, n = 53, k = 71;
  for (DType dtype : kStorageTypes) {
    for (int ta = 0; ta < 2; ++ta) {
      for (int tb = 0; tb < 2; ++tb) {
        const Shape a_shape = ta ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = tb ? Shape{n, k} : Shape{k, n};
        const std::vector<float> a = random_values(m * k, 5), b = random_values(k * n, 6);
        const std::vector<float> c0 = random_values(m * n, 7);
        std::vector<double> results[2];
        int slot = 0;
        for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
          // a at an odd element offset of its buffer: operands need not be 256-byte aligned.
          std::vector<float> a_padded(1, 0.0f);
          a_padded.insert(a_padded.end(), a.begin(), a.end());
          Tensor ta_t = upload(*be, a_padded, {m * k + 1}, dtype).view(1, a_shape);
          Tensor tb_t = upload(*be, b, b_shape, dtype);
          Tensor c = upload(*be, c0, {m, n}, dtype);
          be->matmul(c, ta_t, ta != 0, tb_t, tb != 0, 0.75, 0.5);
          results[slot++] = download(*be, c);
        }
        // f32: products summed in another order (cuBLASLt's split of K): a few ulps of the
        // sum of |terms| <= K = 71 here, so 1e-5 relative plus 2e-5 absolute.
        expect_close(
            results[0], results[1], storage_tolerance(dtype, 1e-5, 2e-5),
            std::string("matmul ") + dtype_name(dtype) + (ta ? " aT" : "") + (tb ? " bT" : ""));
      }
    }
  }
}

TEST_F(CudaOps, LinearForwardAndBackwardMatchTheCpu) {
  const int64_t rows = 45, in = 67, out = 29;
  for (DType dtype : kStorageTypes) {
    // bias_mode 0: none; 1: its own buffer (cuBLASLt's bias epilogue); 2: a view at an odd
    // offset, as biases sit inside the flat parameter buffer (copied aligned for the epilogue).
    for (int bias_mode : {0, 1, 2}) {
      const bool with_bias = bias_mode != 0;
      const std::vector<float> x = random_values(rows * in, 8), w = random_values(out * in, 9);
      const std::vector<float> bias = random_values(out, 10), dy = random_values(rows * out, 11);
      const std::vector<float> dw0 = random_values(out * in, 12), db0 = random_values(out, 13);
      std::vector<double> results[2][4];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor tx = upload(*be, x, {5, 9, in}, dtype), tw = upload(*be, w, {out, in}, dtype);
        std::vector<float> padded(3, 0.0f);
        padded.insert(padded.end(), bias.begin(), bias.end());
        Tensor tb = bias_mode == 2 ? upload(*be, padded, {out + 3}, dtype).view(3, {out})
                                   : upload(*be, bias, {out}, dtype);
        Tensor tdy = upload(*be, dy, {5, 9, out}, dtype);
        Tensor y = be->empty({5, 9, out}, dtype, MemoryCategory::kOther);
        be->fill(y, kNaN);
        be->linear_forward(y, tx, tw, with_bias ? &tb : nullptr);
        Tensor dx = be->empty({5, 9, in}, dtype, MemoryCategory::kOther);
        be->fill(dx, kNaN);
        Tensor dw = upload(*be, dw0, {out, in}, dtype), db = upload(*be, db0, {out}, dtype);
        be->linear_backward(&dx, dw, with_bias ? &db : nullptr, tdy, tx, tw);
        results[slot][0] = download(*be, y);
        results[slot][1] = download(*be, dx);
        results[slot][2] = download(*be, dw);
        results[slot][3] = download(*be, db);
        ++slot;
      }
      const char* names[] = {"y", "dx", "dw (accumulated)", "dbias (accumulated)"};
      for (int i = 0; i < 4; ++i) {
        const Tolerance tol = storage_tolerance(dtype, 1e-5, 3e-5);
        const std::string what = std::string("linear ") + dtype_name(dtype) + " bias mode " +
                                 std::to_string(bias_mode) + " " + names[i];
        if (i == 0 && bias_mode != 0) {  // mode 2 too: an aligned copy of the bias, same epilogue
          expect_close_after_bias_epilogue(results[0][i], results[1][i], bias, dtype, tol, what);
        } else {
          expect_close(results[0][i], results[1][i], tol, what);
        }
      }
    }
  }
}

// Products big enough (>= 2 GFLOP) with an output width whose rows are not 16-byte aligned (1001
// columns, as GPT-2's 50257-column logits) take the pitched path (cuda_backend_matmul.cpp):
// operands copied into 16-byte-pitched scratch, c copied back; dy pitched once for both
// backward products.
TEST_F(CudaOps, LargeProductsWithUnalignedRowsMatchTheCpu) {
  const int64_t rows = 2048, in = 768, out = 1001;
  for (DType dtype : {DType::kBF16, DType::kF32}) {
    const std::vector<float> x = random_values(rows * in, 40), w = random_values(out * in, 41);
    const std::vector<float> bias = random_values(out, 42), dy = random_values(rows * out, 43);
    const std::vector<float> dw0 = random_values(out * in, 44);
    std::vector<double> results[2][3];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tx = upload(*be, x, {rows, in}, dtype), tw = upload(*be, w, {out, in}, dtype);
      Tensor tb = upload(*be, bias, {out}, dtype), tdy = upload(*be, dy, {rows, out}, dtype);
      Tensor y = be->empty({rows, out}, dtype, MemoryCategory::kOther);
      be->fill(y, kNaN);
      be->linear_forward(y, tx, tw, &tb);
      Tensor dx = be->empty({rows, in}, dtype, MemoryCategory::kOther);
      be->fill(dx, kNaN);
      Tensor dw = upload(*be, dw0, {out, in}, dtype);
      be->linear_backward(&dx, dw, nullptr, tdy, tx, tw);
      results[slot][0] = download(*be, y);
      results[slot][1] = download(*be, dx);
      results[slot][2] = download(*be, dw);
      ++slot;
    }
    // Sums of up to K = 2048 products of values in [-1, 1] in another order: f32 rounding of
    // the partial sums, a few ulps of sqrt(K)-sized values: 1e-5 relative plus 5e-4 absolute.
    const char* names[] = {"y", "dx", "dw (accumulated)"};
    for (int i = 0; i < 3; ++i) {
      const Tolerance tol = storage_tolerance(dtype, 1e-5, 5e-4);
      const std::string what = std::string("pitched linear ") + dtype_name(dtype) + " " + names[i];
      if (i == 0) {
        expect_close_after_bias_epilogue(results[0][i], results[1][i], bias, dtype, tol, what);
      } else {
        expect_close(results[0][i], results[1][i], tol, what);
      }
    }
  }
}

TEST_F(CudaOps, EmbeddingMatchesTheCpuAndItsBackwardIsDeterministic) {
  const int64_t vocab = 53, channels = 70;
  std::vector<int64_t> ids;
  for (int i = 0; i < 301; ++i) ids.push_back((i * 17 + i / 7) % vocab);  // repeats, any order
  ids[5] = 0;
  ids[6] = vocab - 1;
  const int64_t n = static_cast<int64_t>(ids.size());
  for (DType dtype : kStorageTypes) {
    const std::vector<float> table = random_values(vocab * channels, 14);
    const std::vector<float> dout = random_values(n * channels, 15);
    const std::vector<float> dtable0 = random_values(vocab * channels, 16);
    std::vector<uint8_t> out_bytes[2], grad_bytes[2];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tids = upload_ids(*be, ids);
      Tensor tt = upload(*be, table, {vocab, channels}, dtype);
      Tensor out = upload(*be, dout, {n, channels}, dtype);
      be->embedding_forward(out, tids, tt, /*accumulate=*/true);
      Tensor tdout = upload(*be, dout, {n, channels}, dtype);
      Tensor dt = upload(*be, dtable0, {vocab, channels}, dtype);
      be->embedding_backward(dt, tdout, tids);
      out_bytes[slot] = download_bytes(*be, out);
      grad_bytes[slot] = download_bytes(*be, dt);
      ++slot;
    }
    // Same additions in the same order (token order per vocabulary row), f32, one rounding.
    EXPECT_EQ(out_bytes[0], out_bytes[1]) << "embedding_forward " << dtype_name(dtype);
    EXPECT_EQ(grad_bytes[0], grad_bytes[1]) << "embedding_backward " << dtype_name(dtype);
  }
  // i32 ids, run twice: identical bits.
  std::vector<int32_t> ids32(ids.begin(), ids.end());
  const std::vector<float> dout = random_values(n * channels, 17);
  std::vector<uint8_t> runs[2];
  for (auto& run : runs) {
    Tensor tids = upload_ids(gpu(), ids32);
    Tensor tdout = upload(gpu(), dout, {n, channels}, DType::kF32);
    Tensor dt = gpu().zeros({vocab, channels}, DType::kF32, MemoryCategory::kOther);
    gpu().embedding_backward(dt, tdout, tids);
    run = download_bytes(gpu(), dt);
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// Long runs of one id (a small vocabulary's batch) are summed 32 rows at a time per warp: runs
// of 1, 31, 32, 33 and 700 occurrences, interleaved, over channels that are no multiple of the
// warp's 64-channel chunk, must still give the CPU's bits (the same adds in position order).
TEST_F(CudaOps, EmbeddingBackwardOfLongRunsHasTheCpuBits) {
  const int64_t vocab = 12, channels = 130;
  std::vector<int64_t> ids;
  const std::pair<int64_t, int> runs[] = {{1, 1}, {4, 31}, {5, 32}, {7, 33}, {9, 700}};
  for (int i = 0; i < 700; ++i) {
    for (const auto& [id, count] : runs) {
      if (i < count) ids.push_back(id);
    }
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  for (DType dtype : kStorageTypes) {
    const std::vector<float> dout = random_values(n * channels, 31);
    const std::vector<float> dtable0 = random_values(vocab * channels, 32);
    std::vector<uint8_t> bits[2];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tids = upload_ids(*be, ids);
      Tensor tdout = upload(*be, dout, {n, channels}, dtype);
      Tensor dt = upload(*be, dtable0, {vocab, channels}, DType::kF32);
      be->embedding_backward(dt, tdout, tids);
      bits[slot++] = download_bytes(*be, dt);
    }
    EXPECT_EQ(bits[0], bits[1]) << "embedding_backward " << dtype_name(dtype);
  }
}

TEST_F(CudaOps, AnIdOutsideTheVocabularyIsAnErrorAtTheNextRead) {
  Tensor table = gpu().zeros({10, 4}, DType::kF32, MemoryCategory::kOther);
  Tensor ids = upload_ids(gpu(), std::vector<int64_t>{1, 12, 3});
  Tensor out = gpu().empty({3, 4}, DType::kF32, MemoryCategory::kOther);
  gpu().embedding_forward(out, ids, table, false);
  std::vector<float> host(12);
  try {
    gpu().copy_to_host(host.data(), out);
    ADD_FAILURE() << "no error for id 12";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 12"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 10)"), std::string::npos) << e.what();
  }
  gpu().copy_to_host(host.data(), out);  // reported once, then cleared
}

TEST_F(CudaOps, NormsMatchTheCpuAndTheirWeightGradientsAreDeterministic) {
  const int64_t rows = 300, channels = 197;  // > 2 row blocks, channels no multiple of 32
  for (DType dtype : kStorageTypes) {
    for (bool layernorm : {true, false}) {
      const std::vector<float> x = random_values(rows * channels, 18, -2.0f, 2.0f);
      const std::vector<float> w = random_values(channels, 19), b = random_values(channels, 20);
      const std::vector<float> dy = random_values(rows * channels, 21);
      const std::vector<float> dw0 = random_values(channels, 22), db0 = random_values(channels, 23);
      std::vector<double> res[2][6];
      std::vector<uint8_t> dw_bits[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor tx = upload(*be, x, {rows, channels}, dtype), tw = upload(*be, w, {channels}, dtype);
        Tensor tb = upload(*be, b, {channels}, dtype),
               tdy = upload(*be, dy, {rows, channels}, dtype);
        Tensor y = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
        Tensor mean = be->empty({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor rstd = be->empty({rows}, DType::kF32, MemoryCategory::kOther);
        Tensor dx = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
        for (Tensor* t : {&y, &mean, &rstd, &dx}) be->fill(*t, kNaN);
        Tensor dw = upload(*be, dw0, {channels}, dtype), db = upload(*be, db0, {channels}, dtype);
        if (layernorm) {
          be->layernorm_forward(y, mean, rstd, tx, tw, &tb, 1e-5);
          be->layernorm_backward(dx, dw, &db, tdy, tx, tw, mean, rstd);
        } else {
          be->fill(mean, 0.0);
          be->rmsnorm_forward(y, rstd, tx, tw, 1e-6);
          be->rmsnorm_backward(dx, dw, tdy, tx, tw, rstd);
        }
        res[slot][0] = download(*be, y);
        res[slot][1] = download(*be, mean);
        res[slot][2] = download(*be, rstd);
        res[slot][3] = download(*be, dx);
        res[slot][4] = download(*be, dw);
        res[slot][5] = download(*be, db);
        if (be == &gpu()) {
          // The same call again from the same inputs: identical weight-gradient bits.
          Tensor dw2 = upload(*be, dw0, {channels}, dtype),
                 db2 = upload(*be, db0, {channels}, dtype);
          if (layernorm) {
            be->layernorm_backward(dx, dw2, &db2, tdy, tx, tw, mean, rstd);
          } else {
            be->rmsnorm_backward(dx, dw2, tdy, tx, tw, rstd);
          }
          dw_bits[0] = download_bytes(*be, dw);
          dw_bits[1] = download_bytes(*be, dw2);
        }
        ++slot;
      }
      EXPECT_EQ(dw_bits[0], dw_bits[1]) << "weight gradient not deterministic";
      const char* names[] = {"y", "mean", "rstd", "dx", "dweight", "dbias"};
      // Row sums of 197 terms and column sums of 300: f32 rounding of sums in another order.
      for (int i = 0; i < 6; ++i) {
        const Tolerance tol =
            (i == 1 || i == 2) ? Tolerance{1e-5, 1e-6} : storage_tolerance(dtype, 2e-5, 5e-5);
        expect_close(res[0][i], res[1][i], tol,
                     std::string(layernorm ? "layernorm " : "rmsnorm ") + dtype_name(dtype) + " " +
                         names[i]);
      }
    }
  }
}

// The residual add fused into the norm (add_layernorm_forward / add_rmsnorm_forward): against
// the CPU oracle (which runs add, then the norm), in place (sum over a) and into its own buffer;
// and on the GPU bit-identical to its own unfused add + norm.
TEST_F(CudaOps, ResidualAddFusedWithTheNormMatchesAddThenNorm) {
  const int64_t rows = 300, channels = 197;
  for (DType dtype : kStorageTypes) {
    for (bool layernorm : {true, false}) {
      for (bool in_place : {true, false}) {
        const std::vector<float> a = random_values(rows * channels, 50, -2.0f, 2.0f);
        const std::vector<float> r = random_values(rows * channels, 51, -2.0f, 2.0f);
        const std::vector<float> w = random_values(channels, 52), b = random_values(channels, 53);
        std::vector<double> res[2][4];
        std::vector<uint8_t> unfused_bits[2], fused_bits[2];
        int slot = 0;
        for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
          Tensor ta = upload(*be, a, {rows, channels}, dtype);
          Tensor tr = upload(*be, r, {rows, channels}, dtype);
          Tensor tw = upload(*be, w, {channels}, dtype), tb = upload(*be, b, {channels}, dtype);
          Tensor own = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
          be->fill(own, kNaN);
          Tensor& sum = in_place ? ta : own;
          Tensor y = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
          Tensor mean = be->zeros({rows}, DType::kF32, MemoryCategory::kOther);
          Tensor rstd = be->empty({rows}, DType::kF32, MemoryCategory::kOther);
          be->fill(y, kNaN);
          be->fill(rstd, kNaN);
          if (layernorm) {
            be->add_layernorm_forward(sum, y, mean, rstd, ta, tr, tw, &tb, 1e-5);
          } else {
            be->add_rmsnorm_forward(sum, y, rstd, ta, tr, tw, 1e-6);
          }
          res[slot][0] = download(*be, sum);
          res[slot][1] = download(*be, y);
          res[slot][2] = download(*be, mean);
          res[slot][3] = download(*be, rstd);
          if (be == &gpu()) {
            fused_bits[0] = download_bytes(*be, sum);
            fused_bits[1] = download_bytes(*be, y);
            // The unfused GPU sequence from the same inputs.
            Tensor a2 = upload(*be, a, {rows, channels}, dtype);
            be->add(a2, tr, 1.0);
            Tensor y2 = be->empty({rows, channels}, dtype, MemoryCategory::kOther);
            if (layernorm) {
              be->layernorm_forward(y2, mean, rstd, a2, tw, &tb, 1e-5);
            } else {
              be->rmsnorm_forward(y2, rstd, a2, tw, 1e-6);
            }
            unfused_bits[0] = download_bytes(*be, a2);
            unfused_bits[1] = download_bytes(*be, y2);
          }
          ++slot;
        }
        const std::string what = std::string(layernorm ? "add+layernorm " : "add+rmsnorm ") +
                                 dtype_name(dtype) + (in_place ? " in place" : "");
        EXPECT_EQ(fused_bits[0], unfused_bits[0]) << what << ": sum differs from add()";
        EXPECT_EQ(fused_bits[1], unfused_bits[1]) << what << ": y differs from add() then the norm";
        // The sum: one rounding of an exact f32 sum, as the CPU's add. The norm: as the norm test.
        expect_close(res[0][0], res[1][0], storage_tolerance(dtype, 0.0, 0.0), what + " sum");
        expect_close(res[0][1], res[1][1], storage_tolerance(dtype, 2e-5, 5e-5), what + " y");
        expect_close(res[0][2], res[1][2], Tolerance{1e-5, 1e-6}, what + " mean");
        expect_close(res[0][3], res[1][3], Tolerance{1e-5, 1e-6}, what + " rstd");
      }
    }
  }
}

TEST_F(CudaOps, ActivationsMatchTheCpu) {
  const int64_t rows = 33, inner = 95;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> x = random_values(rows * 2 * inner, 24, -4.0f, 4.0f);
    const std::vector<float> dy = random_values(rows * 2 * inner, 25);
    std::vector<double> res[2][4];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tx = upload(*be, x, {rows, 2 * inner}, dtype);
      Tensor tdy = upload(*be, dy, {rows, 2 * inner}, dtype);
      Tensor half_dy = upload(*be, std::vector<float>(dy.begin(), dy.begin() + rows * inner),
                              {rows, inner}, dtype);
      Tensor y = be->empty({rows, 2 * inner}, dtype, MemoryCategory::kOther);
      Tensor dx = be->empty({rows, 2 * inner}, dtype, MemoryCategory::kOther);
      Tensor sy = be->empty({rows, inner}, dtype, MemoryCategory::kOther);
      Tensor dgu = be->empty({rows, 2 * inner}, dtype, MemoryCategory::kOther);
      for (Tensor* t : {&y, &dx, &sy, &dgu}) be->fill(*t, kNaN);
      be->gelu_forward(y, tx);
      be->gelu_backward(dx, tdy, tx);
      be->swiglu_forward(sy, tx);
      be->swiglu_backward(dgu, half_dy, tx);
      res[slot][0] = download(*be, y);
      res[slot][1] = download(*be, dx);
      res[slot][2] = download(*be, sy);
      res[slot][3] = download(*be, dgu);
      ++slot;
    }
    // tanhf/expf of CUDA and of glibc differ by an ulp or two: 1e-6 relative in f32.
    const char* names[] = {"gelu", "gelu backward", "swiglu", "swiglu backward"};
    for (int i = 0; i < 4; ++i) {
      expect_close(res[0][i], res[1][i], storage_tolerance(dtype, 1e-6, 1e-6),
                   std::string(names[i]) + " " + dtype_name(dtype));
    }
  }
}

TEST_F(CudaOps, RopeOnAStridedViewMatchesTheCpuBitForBit) {
  const int64_t b = 2, t = 13, h = 3, d = 10;
  // Tables in x's dtype, and in f32 for 16-bit x (what the model builds: rope_rows in
  // stats_dtype, so bf16 positions keep f32 angles).
  for (DType dtype : kStorageTypes) {
    for (DType table : {dtype, DType::kF32}) {
      // q is a view into a fused [B, T, H + 2, D] buffer, as the attention block lays it out.
      const std::vector<float> fused = random_values(b * t * (h + 2) * d, 26);
      const std::vector<float> cs = random_values(t * d / 2, 27), sn = random_values(t * d / 2, 28);
      std::vector<uint8_t> bits[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor buffer = upload(*be, fused, {b, t, h + 2, d}, dtype);
        Tensor q = buffer.narrow(2, 1, h);
        Tensor tc = upload(*be, cs, {t, d / 2}, table), ts = upload(*be, sn, {t, d / 2}, table);
        be->rope_apply(q, tc, ts, false);
        Tensor k = buffer.narrow(2, 0, 1);
        be->rope_apply(k, tc, ts, true);
        bits[slot++] = download_bytes(*be, buffer);
      }
      EXPECT_EQ(bits[0], bits[1]) << dtype_name(dtype) << " x, " << dtype_name(table) << " tables";
    }
  }
}

struct AttentionCase {
  int64_t batch, seq, heads, kv_heads, head_dim, window;
};

TEST_F(CudaOps, AttentionMatchesTheCpuWithGqaWindowsAndStridedViews) {
  // Head dims 64 and 128 in bf16/f16 take the tensor-core kernels (cuda_attention_mma.cu), the
  // rest the CUDA-core ones: both over partial and whole 64-row tiles, GQA and windows that cut
  // across tiles.
  const AttentionCase cases[] = {{2, 37, 4, 2, 16, 0},   {1, 70, 3, 1, 24, 9},
                                 {2, 130, 2, 2, 64, 0},  {1, 33, 2, 1, 128, 40},
                                 {1, 5, 2, 2, 256, 0},   {2, 300, 8, 2, 64, 0},
                                 {3, 64, 2, 2, 64, 0},   {1, 200, 2, 1, 128, 70},
                                 {1, 129, 4, 4, 128, 0}};
  for (const AttentionCase& c : cases) {
    for (DType dtype : kStorageTypes) {
      const int64_t width = c.heads + 2 * c.kv_heads;
      const std::vector<float> qkv =
          random_values(c.batch * c.seq * width * c.head_dim, 29, -2.0f, 2.0f);
      const std::vector<float> dout = random_values(c.batch * c.seq * c.heads * c.head_dim, 30);
      // One case with a negative scale: the tensor-core forward folds a positive scale into its
      // exponentials' FFMA and applies any other to the scores first.
      const double sign = &c == &cases[2] ? -1.0 : 1.0;
      const double scale = sign / std::sqrt(static_cast<double>(c.head_dim));
      std::vector<double> res[2][5];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor fused = upload(*be, qkv, {c.batch, c.seq, width, c.head_dim}, dtype);
        Tensor q = fused.narrow(2, 0, c.heads);
        Tensor k = fused.narrow(2, c.heads, c.kv_heads);
        Tensor v = fused.narrow(2, c.heads + c.kv_heads, c.kv_heads);
        Tensor out =
            be->empty({c.batch, c.seq, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
        Tensor lse = be->empty({c.batch, c.heads, c.seq}, DType::kF32, MemoryCategory::kOther);
        be->fill(out, kNaN);
        be->fill(lse, kNaN);
        be->attention_forward(out, lse, q, k, v, scale, c.window);
        Tensor tdout = upload(*be, dout, {c.batch, c.seq, c.heads, c.head_dim}, dtype);
        Tensor dfused =
            be->empty({c.batch, c.seq, width, c.head_dim}, dtype, MemoryCategory::kOther);
        be->fill(dfused, kNaN);
        Tensor dq = dfused.narrow(2, 0, c.heads);
        Tensor dk = dfused.narrow(2, c.heads, c.kv_heads);
        Tensor dv = dfused.narrow(2, c.heads + c.kv_heads, c.kv_heads);
        be->attention_backward(dq, dk, dv, tdout, q, k, v, out, lse, scale, c.window);
        res[slot][0] = download(*be, out);
        res[slot][1] = download(*be, lse);
        res[slot][2] = download(*be, dfused);
        // Deterministic: the same call again gives the same bits.
        be->fill(dfused, kNaN);
        be->attention_backward(dq, dk, dv, tdout, q, k, v, out, lse, scale, c.window);
        res[slot][3] = download(*be, dfused);
        ++slot;
      }
      const std::string what = "attention T=" + std::to_string(c.seq) +
                               " D=" + std::to_string(c.head_dim) +
                               " window=" + std::to_string(c.window) + " " + dtype_name(dtype);
      // Sums over up to T keys and D dims in another order: 2e-5 relative in f32, absolute
      // 1e-4 for gradients summed over T queries (which cancel to small values).
      Tolerance out_tol = storage_tolerance(dtype, 2e-5, 2e-5);
      Tolerance grad_tol = storage_tolerance(dtype, 1e-4, 1e-4);
      if (dtype != DType::kF32 && (c.head_dim == 64 || c.head_dim == 128)) {
        // The tensor-core kernels also round the probabilities (and dS) to the storage type
        // before multiplying, as FlashAttention does: every term of a sum carries up to half a
        // unit of that rounding (2^-9 bf16, 2^-12 f16). Out is a convex combination of V rows:
        // bounded by 4x that unit times the largest |out|. Gradients are sums of such terms
        // that partly cancel, so their bound is 16x the unit times the largest |gradient|.
        // A fragment or masking mistake shows as errors of the size of the values themselves.
        const double unit = dtype == DType::kBF16 ? 1.0 / 512 : 1.0 / 4096;
        out_tol.atol += 4 * unit * max_abs(res[0][0]);
        grad_tol.atol += 16 * unit * max_abs(res[0][2]);
      }
      expect_close(res[0][0], res[1][0], out_tol, what + " out");
      expect_close(res[0][1], res[1][1], Tolerance{1e-5, 1e-5}, what + " lse");
      expect_close(res[0][2], res[1][2], grad_tol, what + " dq/dk/dv");
      EXPECT_EQ(res[1][2], res[1][3]) << what << ": the GPU backward is not deterministic";
    }
  }
}

// The tiled logits loss accumulates a 16-bit product into an f32 weight gradient (its dweight is
// in stats_dtype): dw f32 with x, w, dy in bf16/f16, small and large enough (>= 2 GFLOP with
// 1001-column dy rows) for the pitched path.
TEST_F(CudaOps, LinearBackwardAccumulatesA16BitProductIntoAnF32WeightGradient) {
  struct Size {
    int64_t rows, in, out;
  };
  for (const Size size : {Size{45, 67, 29}, Size{2048, 768, 1001}}) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      const std::vector<float> x = random_values(size.rows * size.in, 50);
      const std::vector<float> w = random_values(size.out * size.in, 51);
      const std::vector<float> dy = random_values(size.rows * size.out, 52);
      const std::vector<float> dw0 = random_values(size.out * size.in, 53);
      std::vector<double> results[2][2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor tx = upload(*be, x, {size.rows, size.in}, dtype);
        Tensor tw = upload(*be, w, {size.out, size.in}, dtype);
        Tensor tdy = upload(*be, dy, {size.rows, size.out}, dtype);
        Tensor dx = be->empty({size.rows, size.in}, dtype, MemoryCategory::kOther);
        be->fill(dx, kNaN);
        Tensor dw = upload(*be, dw0, {size.out, size.in}, DType::kF32);
        be->linear_backward(&dx, dw, nullptr, tdy, tx, tw);
        results[slot][0] = download(*be, dx);
        results[slot][1] = download(*be, dw);
        ++slot;
      }
      // dx as the 16-bit products above; dw kept in f32, so f32 rounding of sums of up to 2048
      // products: 1e-5 relative plus 5e-4 absolute, with no 16-bit rounding unit on top.
      const std::string what = std::string("linear backward ") + dtype_name(dtype) + " rows " +
                               std::to_string(size.rows);
      expect_close(results[0][0], results[1][0], storage_tolerance(dtype, 1e-5, 5e-4),
                   what + " dx");
      expect_close(results[0][1], results[1][1], storage_tolerance(DType::kF32, 1e-5, 5e-4),
                   what + " f32 dw (accumulated)");
    }
  }
}

TEST_F(CudaOps, ANanLogitMakesTheLossNanAsOnTheCpu) {
  // A NaN where a thread starts its row (column 0), mid-row, and last: the CPU's loss is NaN
  // for each; the online max/sum must not drop it.
  const int64_t rows = 3, vocab = 1031;
  const std::vector<int64_t> targets = {5, 6, 7};
  for (DType dtype : kStorageTypes) {
    std::vector<float> logits = random_values(rows * vocab, 54, -4.0f, 4.0f);
    logits[0] = std::nanf("");
    logits[vocab + 500] = std::nanf("");
    logits[2 * vocab + vocab - 1] = std::nanf("");
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tl = upload(*be, logits, {rows, vocab}, dtype);
      Tensor tt = upload_ids(*be, targets);
      Tensor losses = be->empty({rows}, dtype, MemoryCategory::kOther);
      be->softmax_cross_entropy(losses, nullptr, tl, tt, -100, 1.0);
      const std::vector<double> got = download(*be, losses);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_TRUE(std::isnan(got[r]))
            << (be == &cpu() ? "cpu " : "gpu ") << dtype_name(dtype) << " row " << r << ": "
            << got[r];
      }
    }
  }
}

TEST_F(CudaOps, CrossEntropyMatchesTheCpuWithIgnoredRowsAndInPlaceGradient) {
  const int64_t rows = 19, vocab = 1031;
  std::vector<int64_t> targets;
  for (int64_t r = 0; r < rows; ++r) targets.push_back((r * 97) % vocab);
  targets[3] = -100;
  targets[7] = vocab - 1;
  for (DType dtype : kStorageTypes) {
    const std::vector<float> logits = random_values(rows * vocab, 31, -8.0f, 8.0f);
    std::vector<double> res[2][3];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tl = upload(*be, logits, {rows, vocab}, dtype);
      Tensor tt = upload_ids(*be, targets);
      Tensor losses = be->empty({rows}, dtype, MemoryCategory::kOther);
      be->fill(losses, kNaN);
      Tensor only_loss = be->empty({rows}, dtype, MemoryCategory::kOther);
      be->softmax_cross_entropy(only_loss, nullptr, tl, tt, -100, 1.0);
      be->softmax_cross_entropy(losses, &tl, tl, tt, -100, 0.25);  // dlogits over the logits
      res[slot][0] = download(*be, losses);
      res[slot][1] = download(*be, tl);
      res[slot][2] = download(*be, only_loss);
      ++slot;
    }
    const std::string what = std::string("cross entropy ") + dtype_name(dtype);
    // Losses: a log of an f64 sum of exps computed in f32 (expf vs the CPU's polynomial differ
    // by an ulp): 1e-5 relative. Gradients: probabilities of ~1e-3 with ulp-level differences.
    expect_close(res[0][0], res[1][0], storage_tolerance(dtype, 1e-5, 1e-5), what + " losses");
    expect_close(res[0][1], res[1][1], storage_tolerance(dtype, 1e-5, 1e-8), what + " dlogits");
    expect_close(res[0][2], res[1][2], storage_tolerance(dtype, 1e-5, 1e-5), what + " loss only");
  }
}

TEST_F(CudaOps, SumsMatchTheCpuAndAreDeterministic) {
  const int64_t n = 200003;  // several 64 Ki chunks, the last one partial
  for (DType dtype : kStorageTypes) {
    const std::vector<float> x = random_values(n, 32);
    double values[2][2];
    int slot = 0;
    for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
      Tensor tx = upload(*be, x, {n}, dtype);
      Tensor out = be->zeros({1}, DType::kF64, MemoryCategory::kOther);
      be->sum(out, tx, 0.5, false);
      be->sum(out, tx, 0.5, true);
      values[slot][0] = be->read_scalar(out);
      be->sum_squares(out, tx, false);
      values[slot][1] = be->read_scalar(out);
      ++slot;
    }
    // f64 sums of f32 values in another order: ~1e-15 relative per term, far below 1e-10.
    EXPECT_NEAR(values[0][0], values[1][0], 1e-9 * n) << dtype_name(dtype);
    EXPECT_NEAR(values[0][1], values[1][1], 1e-10 * values[0][1]) << dtype_name(dtype);
  }
  const std::vector<float> x = random_values(n, 33);
  Tensor tx = upload(gpu(), x, {n}, DType::kF32);
  Tensor out = gpu().zeros({1}, DType::kF64, MemoryCategory::kOther);
  gpu().sum_squares(out, tx, false);
  const double first = gpu().read_scalar(out);
  gpu().sum_squares(out, tx, false);
  EXPECT_EQ(first, gpu().read_scalar(out));
  // Inf propagates (the overflow check relies on it).
  std::vector<float> with_inf = x;
  with_inf[n / 2] = std::numeric_limits<float>::infinity();
  Tensor tinf = upload(gpu(), with_inf, {n}, DType::kF32);
  gpu().sum_squares(out, tinf, false);
  EXPECT_FALSE(std::isfinite(gpu().read_scalar(out)));
}

TEST_F(CudaOps, OptimizerUpdatesMatchTheCpu) {
  const int64_t n = 5000;
  const ParamSegment segments[] = {{0, 1200, true}, {1200, 37, false}, {1300, 3700, true}};
  for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kLamb, OptimizerKind::kLion,
                             OptimizerKind::kAdagrad}) {
    for (bool adam_w : {true, false}) {
      OptimizerHyper hyper;
      hyper.lr = 3e-3;
      hyper.weight_decay = 0.1;
      hyper.step = 3;
      hyper.adam_w_mode = adam_w;
      std::vector<double> res[2];
      std::vector<uint8_t> copies[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor p = upload(*be, random_values(n, 34), {n}, DType::kF32);
        Tensor g = upload(*be, random_values(n, 35), {n}, DType::kF32);
        std::vector<Tensor> state = random_optimizer_state(*be, kind, n, 36);
        for (int step = 0; step < 2; ++step) {
          // The second update with clipping folded into its gradient read.
          OptimizerHyper h = hyper;
          h.grad_scale = step == 0 ? 1.0 : 0.37;
          be->optimizer_update(kind, p, g, state, segments, h);
        }
        // A third writing the bf16 copy of the parameters in the same pass (the CPU: update,
        // then copy; the GPU: one kernel), the copy starting as the rounded parameters.
        Tensor copy16 = be->empty({n}, DType::kBF16, MemoryCategory::kOther);
        be->copy(copy16, p);
        be->optimizer_update_with_copy(kind, p, g, state, segments, hyper, copy16);
        copies[slot] = download_bytes(*be, copy16);
        res[slot] = download_update(*be, p, state);
        ++slot;
      }
      if (kind == OptimizerKind::kLamb) {
        // The trust ratio's norms are f64 sums in another order: 1e-6 relative on the step.
        expect_close(res[0], res[1], Tolerance{1e-6, 1e-9}, "lamb");
      } else {
        // Same f32 operations in the same order, no fused multiply-add: the CPU's bits, and
        // the bf16 copy rounded as Backend::copy rounds.
        EXPECT_EQ(res[0], res[1]) << "optimizer kind " << static_cast<int>(kind) << " adam_w "
                                  << adam_w;
        EXPECT_EQ(copies[0], copies[1]) << "optimizer kind " << static_cast<int>(kind)
                                        << " bf16 copy";
      }
    }
  }
}

// The chunked schedule (one block per 4 Ki elements of any segment, 16-byte vectors where
// aligned): segments spanning several chunks, offsets that are no multiple of 4 (the scalar
// path), an empty one, gaps left untouched, and more segments than one launch takes (96).
TEST_F(CudaOps, OptimizerUpdatesOverManyUnevenSegmentsMatchTheCpu) {
  std::vector<ParamSegment> segments = {{0, 9000, true}, {9001, 4099, false}, {13100, 0, true},
                                        {13102, 8195, true}};
  int64_t at = 21300;
  for (int i = 0; i < 120; ++i) {  // short ones, every length and alignment mod 4
    segments.push_back({at, 3 + i % 7, i % 3 != 0});
    at += 3 + i % 7 + i % 2;
  }
  const int64_t n = at + 5;
  for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kLion, OptimizerKind::kAdagrad}) {
    for (DType copy_dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
      OptimizerHyper hyper;
      hyper.lr = 2e-3;
      hyper.weight_decay = 0.1;
      hyper.step = 2;
      hyper.grad_scale = 0.5;
      std::vector<double> res[2];
      std::vector<uint8_t> copies[2];
      int slot = 0;
      for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
        Tensor p = upload(*be, random_values(n, 41), {n}, DType::kF32);
        Tensor g = upload(*be, random_values(n, 42), {n}, DType::kF32);
        std::vector<Tensor> state = random_optimizer_state(*be, kind, n, 43);
        Tensor copy = be->empty({n}, copy_dtype, MemoryCategory::kOther);
        be->copy(copy, p);
        be->optimizer_update_with_copy(kind, p, g, state, segments, hyper, copy);
        copies[slot] = download_bytes(*be, copy);
        res[slot] = download_update(*be, p, state);
        ++slot;
      }
      EXPECT_EQ(res[0], res[1]) << "optimizer kind " << static_cast<int>(kind);
      EXPECT_EQ(copies[0], copies[1]) << "optimizer kind " << static_cast<int>(kind) << " copy "
                                      << dtype_name(copy_dtype);
    }
  }
}

// Gradients held in the parameters' 16-bit dtype (sharding/held_unit_gradients.h): the device
// update reading them (8-byte vectors where aligned, else scalars) gives the CPU's bits for an
// f32 gradient of the same values, with or without the parameter copy of their dtype.
TEST_F(CudaOps, OptimizerUpdatesReadingSixteenBitGradientsMatchTheCpuOnF32Ones) {
  std::vector<ParamSegment> segments = {{0, 9000, true}, {9001, 4099, false}, {13102, 8195, true}};
  int64_t at = 21300;
  for (int i = 0; i < 20; ++i) {
    segments.push_back({at, 3 + i % 7, i % 3 != 0});
    at += 3 + i % 7 + i % 2;
  }
  const int64_t n = at + 5;
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    std::vector<float> grads = random_values(n, 47, -2.0f, 2.0f);
    for (float& g : grads) g = dtype == DType::kBF16 ? to_float(to_bf16(g)) : to_float(to_f16(g));
    for (OptimizerKind kind : {OptimizerKind::kAdam, OptimizerKind::kLamb, OptimizerKind::kLion,
                               OptimizerKind::kAdagrad}) {
      for (bool with_copy : {false, true}) {
        OptimizerHyper hyper;
        hyper.lr = 2e-3;
        hyper.weight_decay = 0.1;
        hyper.step = 2;
        hyper.grad_scale = 0.5;
        std::vector<double> res[2];
        std::vector<uint8_t> copies[2];
        int slot = 0;
        for (Backend* be : {static_cast<Backend*>(&cpu()), static_cast<Backend*>(&gpu())}) {
          Tensor p = upload(*be, random_values(n, 48), {n}, DType::kF32);
          // The CPU reads f32 gradients, the device the 16-bit ones.
          Tensor g = upload(*be, grads, {n}, slot == 0 ? DType::kF32 : dtype);
          std::vector<Tensor> state = random_optimizer_state(*be, kind, n, 49);
          Tensor copy = be->empty({n}, dtype, MemoryCategory::kOther);
          be->copy(copy, p);
          if (with_copy) {
            be->optimizer_update_with_copy(kind, p, g, state, segments, hyper, copy);
          } else {
            be->optimizer_update(kind, p, g, state, segments, hyper);
          }
          copies[slot] = download_bytes(*be, copy);
          res[slot] = download_update(*be, p, state);
          ++slot;
        }
        const std::string what = std::string(dtype_name(dtype)) + " kind " +
                                 std::to_string(static_cast<int>(kind)) + " copy " +
                                 std::to_string(with_copy);
        if (kind == OptimizerKind::kLamb) {
          // The trust ratio's norms are f64 sums in another order (OptimizerUpdatesMatchTheCpu).
          expect_close(res[0], res[1], Tolerance{1e-6, 1e-9}, what.c_str());
        } else {
          EXPECT_EQ(res[0], res[1]) << what;
          EXPECT_EQ(copies[0], copies[1]) << what;
        }
      }
    }
  }
  // A 16-bit gradient with a copy of another dtype is refused, naming both.
  Tensor p = gpu().zeros({8}, DType::kF32, MemoryCategory::kOther);
  Tensor g = gpu().zeros({8}, DType::kBF16, MemoryCategory::kOther);
  Tensor copy = gpu().zeros({8}, DType::kF16, MemoryCategory::kOther);
  std::vector<Tensor> state = {gpu().zeros({8}, DType::kF32, MemoryCategory::kOther)};
  const ParamSegment segment{0, 8, false};
  try {
    gpu().optimizer_update_with_copy(OptimizerKind::kLion, p, g, state, {&segment, 1},
                                     OptimizerHyper{}, copy);
    ADD_FAILURE() << "bf16 gradients with an f16 copy accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f16"), std::string::npos) << e.what();
  }
}

// The fused store in the parameters' dtype + sum of squares (a held gradient stored in 16 bits
// with its squared norm) leaves copy()'s bytes and sum_squares's sum over them, bit for bit on
// the device, and the CPU's within f64 rounding - over three reduction chunks, at an offset
// where the source is not 16-byte aligned. f16's range puts infinities in the sum.
TEST_F(CudaOps, CopyWithItsSumOfSquaresHasTheBitsOfTheTwoOps) {
  const int64_t n = 2 * 65536 + 37;
  const std::vector<float> x = random_values(n + 1, 54, -70000.0f, 70000.0f);
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    for (int64_t offset : {0, 1}) {
      const std::string what = std::string(dtype_name(dtype)) + " offset " + std::to_string(offset);
      expect_fused_sum_of_squares_matches(
          cpu(), gpu(), what, [&](Backend& be, bool fused, Tensor& sum) {
            const Tensor src = upload(be, x, {n + 1}, DType::kF32).view(offset, {n});
            Tensor dst = be.empty({n}, dtype, MemoryCategory::kOther);
            be.fill(dst, kNaN);
            if (fused) {
              be.copy_sum_squares(dst, src, sum);
            } else {
              be.copy(dst, src);
              be.sum_squares(sum, dst, false);
            }
            return dst;
          });
    }
  }
}

TEST_F(CudaOps, Float64TensorsAreRefusedNamingTheOp) {
  Tensor x = gpu().zeros({4}, DType::kF64, MemoryCategory::kOther);
  Tensor y = gpu().zeros({4}, DType::kF64, MemoryCategory::kOther);
  try {
    gpu().gelu_forward(y, x);
    ADD_FAILURE() << "f64 accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_forward"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::backend::cuda_test
