// Tests for the CPU embedding kernels: exact gathers, scatter-add gradients against finite
// differences, bitwise determinism across thread counts, and rejection of bad ids and shapes.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_embedding.h"
#include "core/error.h"
#include "backend/tensor_difference.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace {

using testing::converted;
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::value_at;
using testing::weighted_sum;

Tensor ids_tensor(const Shape& shape, DType dtype, const std::vector<int64_t>& values) {
  Tensor t = Tensor::zeros_host(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI64) {
      t.data<int64_t>()[i] = values[i];
    } else {
      t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
  }
  return t;
}

TEST(CpuEmbedding, ForwardGathersRowsExactlyAndAccumulates) {
  const int64_t vocab = 7, channels = 5;
  const std::vector<int64_t> id_values = {3, 0, 6, 3, 1, 5};
  for (DType id_dtype : {DType::kI32, DType::kI64}) {
    for (DType dtype : {DType::kF32, DType::kF64}) {
      Tensor table = random_tensor({vocab, channels}, dtype, 1);
      Tensor ids = ids_tensor({2, 3}, id_dtype, id_values);
      Tensor out = random_tensor({2, 3, channels}, dtype, 2);
      Tensor base = converted(out, DType::kF64);
      embedding_forward(out, ids, table, /*accumulate=*/true);
      for (int64_t n = 0; n < 6; ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          // Accumulating adds one rounding in f32; compare against the same rounding.
          const double t = value_at(table, id_values[n] * channels + c);
          const double b = value_at(base, n * channels + c);
          const double expected =
              dtype == DType::kF32 ? static_cast<double>(static_cast<float>(b) +
                                                         static_cast<float>(t))
                                   : b + t;
          ASSERT_EQ(value_at(out, n * channels + c), expected);
        }
      }
      embedding_forward(out, ids, table, /*accumulate=*/false);
      for (int64_t n = 0; n < 6; ++n) {
        for (int64_t c = 0; c < channels; ++c) {
          ASSERT_EQ(value_at(out, n * channels + c), value_at(table, id_values[n] * channels + c));
        }
      }
    }
  }
}

// L = sum(probe * embedding(ids, table)): dL/dtable against central differences in f64, with
// repeated ids (their rows sum) and unused ids (zero gradient), starting from a non-zero dtable.
TEST(CpuEmbedding, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t vocab = 6, channels = 4;
  Tensor table = random_tensor({vocab, channels}, DType::kF64, 3);
  Tensor ids = ids_tensor({7}, DType::kI64, {2, 5, 2, 0, 2, 5, 3});
  Tensor probe = random_tensor({7, channels}, DType::kF64, 4);
  Tensor out = Tensor::zeros_host({7, channels}, DType::kF64);
  auto loss = [&] {
    embedding_forward(out, ids, table, false);
    return weighted_sum(out, probe);
  };
  Tensor fd = finite_difference(table, loss);
  Tensor d0 = random_tensor({vocab, channels}, DType::kF64, 5);
  Tensor dtable = converted(d0, DType::kF64);
  embedding_backward(dtable, probe, ids);
  // Central differences are accurate to ~1e-10 here (see gradcheck.h).
  EXPECT_LT(relative_error(difference(dtable, d0), fd), 1e-6);
  // Row 1 and 4 are never looked up: untouched.
  for (int64_t c = 0; c < channels; ++c) {
    EXPECT_EQ(value_at(dtable, 1 * channels + c), value_at(d0, 1 * channels + c));
    EXPECT_EQ(value_at(dtable, 4 * channels + c), value_at(d0, 4 * channels + c));
  }
}

TEST(CpuEmbedding, F32BackwardMatchesF64) {
  const int64_t vocab = 9, channels = 24, n = 50;
  std::vector<int64_t> id_values;
  for (int64_t i = 0; i < n; ++i) id_values.push_back((i * 7) % vocab);
  Tensor ids = ids_tensor({n}, DType::kI32, id_values);
  Tensor dout32 = random_tensor({n, channels}, DType::kF32, 6);
  Tensor dtable32 = Tensor::zeros_host({vocab, channels}, DType::kF32);
  Tensor dtable64 = Tensor::zeros_host({vocab, channels}, DType::kF64);
  embedding_backward(dtable32, dout32, ids);
  embedding_backward(dtable64, converted(dout32, DType::kF64), ids);
  // Each row sums ~6 f32 values in order: at most ~6 roundings of 6e-8 relative, so 1e-6
  // norm-wise is a bound with margin.
  EXPECT_LT(relative_error(dtable32, dtable64), 1e-6);
  EXPECT_GT(relative_error(dtable32, dtable64), 0.0);  // really summed in f32
}

// Large enough for the parallel path; the result must equal a serial in-order sum bitwise and
// not depend on the thread count.
TEST(CpuEmbedding, BackwardIsDeterministicAcrossThreadCounts) {
  const int64_t vocab = 50, channels = 200, n = 300;
  std::vector<int64_t> id_values;
  for (int64_t i = 0; i < n; ++i) id_values.push_back((i * i + 3 * i) % vocab);
  Tensor ids = ids_tensor({n}, DType::kI64, id_values);
  Tensor dout = random_tensor({n, channels}, DType::kF32, 7);
  Tensor reference = Tensor::zeros_host({vocab, channels}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < channels; ++c) {
      reference.data<float>()[id_values[i] * channels + c] += dout.data<float>()[i * channels + c];
    }
  }
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2, 3, 7}) {
    omp_set_num_threads(threads);
    Tensor dtable = Tensor::zeros_host({vocab, channels}, DType::kF32);
    embedding_backward(dtable, dout, ids);
    EXPECT_EQ(std::memcmp(dtable.raw_data(), reference.raw_data(), dtable.nbytes()), 0)
        << threads << " threads";
  }
  omp_set_num_threads(saved_threads);
}

TEST(CpuEmbedding, OutOfRangeIdThrowsBeforeWriting) {
  const int64_t vocab = 7, channels = 3;
  Tensor table = random_tensor({vocab, channels}, DType::kF32, 8);
  for (int64_t bad : {int64_t{7}, int64_t{-1}}) {
    Tensor ids = ids_tensor({6}, DType::kI32, {1, 2, 3, 4, bad, 0});
    Tensor out = Tensor::zeros_host({6, channels}, DType::kF32);
    try {
      embedding_forward(out, ids, table, false);
      ADD_FAILURE() << "no exception for id " << bad;
    } catch (const ShapeError&) {
      ADD_FAILURE() << "a bad id is a data error, not a shape error";
    } catch (const Error& e) {
      const std::string expected = "token id " + std::to_string(bad) +
                                   " at position 4 is outside the vocabulary [0, 7)";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    for (int64_t i = 0; i < out.numel(); ++i) ASSERT_EQ(out.data<float>()[i], 0.0f);

    Tensor dtable = Tensor::zeros_host({vocab, channels}, DType::kF32);
    Tensor dout = random_tensor({6, channels}, DType::kF32, 9);
    EXPECT_THROW(embedding_backward(dtable, dout, ids), Error);
    for (int64_t i = 0; i < dtable.numel(); ++i) ASSERT_EQ(dtable.data<float>()[i], 0.0f);
  }
}

TEST(CpuEmbedding, RejectsMismatchedShapesAndDtypes) {
  Tensor table = Tensor::zeros_host({7, 3}, DType::kF32);
  Tensor ids = ids_tensor({4}, DType::kI64, {0, 1, 2, 3});
  Tensor out_rows = Tensor::zeros_host({5, 3}, DType::kF32);
  EXPECT_THROW(embedding_forward(out_rows, ids, table, false), ShapeError);
  Tensor out_cols = Tensor::zeros_host({4, 2}, DType::kF32);
  EXPECT_THROW(embedding_forward(out_cols, ids, table, false), ShapeError);
  Tensor out64 = Tensor::zeros_host({4, 3}, DType::kF64);
  EXPECT_THROW(embedding_forward(out64, ids, table, false), ShapeError);
  Tensor float_ids = Tensor::zeros_host({4}, DType::kF32);
  Tensor out = Tensor::zeros_host({4, 3}, DType::kF32);
  EXPECT_THROW(embedding_forward(out, float_ids, table, false), ShapeError);
  Tensor table_1d = Tensor::zeros_host({21}, DType::kF32);
  EXPECT_THROW(embedding_forward(out, ids, table_1d, false), ShapeError);
  EXPECT_THROW(embedding_backward(table, out_cols, ids), ShapeError);
  try {
    embedding_forward(out_rows, ids, table, false);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[5, 3]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[7, 3]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zero::backend::cpu
