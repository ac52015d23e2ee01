// Tests for the fused CPU softmax cross-entropy: losses and gradients against a long-double
// reference and finite differences, f32 accuracy over the whole exp range, ignore_index,
// in-place (aliased) gradients, huge logits, grad_scale, NaN propagation and bad targets.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_cross_entropy.h"
#include "core/error.h"
#include "support/gradcheck.h"

namespace zero::backend::cpu {
namespace cross_entropy_test {

using testing::converted;
using testing::finite_difference;
using testing::random_tensor;
using testing::relative_error;
using testing::value_at;

constexpr int64_t kIgnore = -100;

Tensor targets_tensor(DType dtype, const std::vector<int64_t>& values) {
  Tensor t = Tensor::zeros_host({static_cast<int64_t>(values.size())}, dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::kI64) {
      t.data<int64_t>()[i] = values[i];
    } else {
      t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
  }
  return t;
}

// Loss and gradient of every row, from the logits as stored, in long double.
struct Reference {
  std::vector<long double> losses;
  Tensor dlogits;  // f64
};

Reference reference(const Tensor& logits, const std::vector<int64_t>& targets,
                    int64_t ignore_index, double grad_scale) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  Reference ref{std::vector<long double>(static_cast<size_t>(rows), 0.0L),
                Tensor::zeros_host(logits.shape(), DType::kF64)};
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t t = targets[static_cast<size_t>(i)];
    if (t == ignore_index) continue;
    auto x = [&](int64_t j) { return static_cast<long double>(value_at(logits, i * vocab + j)); };
    long double m = -std::numeric_limits<long double>::infinity();
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, x(j));
    long double s = 0.0L;
    for (int64_t j = 0; j < vocab; ++j) s += std::exp(x(j) - m);
    ref.losses[static_cast<size_t>(i)] = -std::log(std::exp(x(t) - m) / s);
    for (int64_t j = 0; j < vocab; ++j) {
      const long double p = std::exp(x(j) - m) / s;
      ref.dlogits.data<double>()[i * vocab + j] =
          static_cast<double>(grad_scale * (p - (j == t ? 1.0L : 0.0L)));
    }
  }
  return ref;
}

double max_loss_error(const Tensor& losses, const Reference& ref) {
  double worst = 0.0;
  for (int64_t i = 0; i < losses.numel(); ++i) {
    const long double r = ref.losses[static_cast<size_t>(i)];
    worst = std::max(worst, static_cast<double>(std::fabs(value_at(losses, i) - r) /
                                                std::max(1.0L, std::fabs(r))));
  }
  return worst;
}

std::vector<int64_t> random_targets(int64_t rows, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, vocab - 1);
  std::vector<int64_t> t;
  for (int64_t i = 0; i < rows; ++i) t.push_back(dist(rng));
  return t;
}

TEST(CpuCrossEntropy, MatchesLongDoubleReferenceInF64AndF32) {
  const int64_t rows = 6, vocab = 37;
  const std::vector<int64_t> targets = random_targets(rows, vocab, 1);
  Tensor logits64 = random_tensor({rows, vocab}, DType::kF64, 2, -5.0, 5.0);
  Tensor logits32 = converted(logits64, DType::kF32);
  for (DType id_dtype : {DType::kI32, DType::kI64}) {
    Tensor tg = targets_tensor(id_dtype, targets);
    {
      Reference ref = reference(logits64, targets, kIgnore, 1.0);
      Tensor losses = Tensor::zeros_host({rows}, DType::kF64);
      Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF64);
      softmax_cross_entropy(losses, &dl, logits64, tg, kIgnore, 1.0);
      // f64 throughout: errors are a few f64 ulps.
      EXPECT_LT(max_loss_error(losses, ref), 1e-14);
      EXPECT_LT(relative_error(dl, ref.dlogits), 1e-14);
    }
    {
      // f32: reference on the same rounded logits. exp is a ~2 ulp polynomial, the sums and the
      // loss are formed in double and rounded once, so the loss is within a few f32 ulps
      // (~2e-7 relative); each gradient entry sees exp, a rounded 1/sum and a product: <= ~4 ulp.
      Reference ref = reference(logits32, targets, kIgnore, 1.0);
      Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
      Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF32);
      softmax_cross_entropy(losses, &dl, logits32, tg, kIgnore, 1.0);
      EXPECT_LT(max_loss_error(losses, ref), 3e-7);
      EXPECT_LT(relative_error(dl, ref.dlogits), 5e-7);
    }
  }
}

// d(grad_scale * sum of losses)/d logits against central differences in f64, one row ignored.
TEST(CpuCrossEntropy, GradientMatchesFiniteDifferences) {
  const int64_t rows = 4, vocab = 9;
  const double grad_scale = 0.7;
  Tensor logits = random_tensor({rows, vocab}, DType::kF64, 3, -2.0, 2.0);
  Tensor tg = targets_tensor(DType::kI64, {4, kIgnore, 0, 8});
  Tensor losses = Tensor::zeros_host({rows}, DType::kF64);
  auto loss = [&] {
    softmax_cross_entropy(losses, nullptr, logits, tg, kIgnore, 1.0);
    double s = 0.0;
    for (int64_t i = 0; i < rows; ++i) s += losses.data<double>()[i];
    return grad_scale * s;
  };
  Tensor fd = finite_difference(logits, loss);
  Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF64);
  softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, grad_scale);
  // Central differences are accurate to ~1e-10 here (see gradcheck.h).
  EXPECT_LT(relative_error(dl, fd), 1e-6);
}

TEST(CpuCrossEntropy, IgnoredRowsGiveZeroLossAndZeroGradient) {
  const int64_t rows = 5, vocab = 11;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 4, -3.0, 3.0);
  for (int64_t ignore : {kIgnore, int64_t{2}}) {  // also an ignore_index inside [0, V)
    const std::vector<int64_t> targets = {1, ignore, 7, ignore, 2};
    Tensor tg = targets_tensor(DType::kI32, targets);
    Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
    Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF32);
    for (int64_t i = 0; i < dl.numel(); ++i) dl.data<float>()[i] = std::nanf("");
    for (int64_t i = 0; i < rows; ++i) losses.data<float>()[i] = std::nanf("");
    softmax_cross_entropy(losses, &dl, logits, tg, ignore, 1.0);
    Reference ref = reference(logits, targets, ignore, 1.0);
    EXPECT_LT(max_loss_error(losses, ref), 3e-7);
    EXPECT_LT(relative_error(dl, ref.dlogits), 5e-7);
    for (int64_t i : {int64_t{1}, int64_t{3}}) {
      EXPECT_EQ(losses.data<float>()[i], 0.0f);
      for (int64_t j = 0; j < vocab; ++j) ASSERT_EQ(dl.data<float>()[i * vocab + j], 0.0f);
    }
    if (ignore == 2) {
      EXPECT_EQ(losses.data<float>()[4], 0.0f);  // target 2 is ignored there
    }
  }
}

TEST(CpuCrossEntropy, InPlaceGradientEqualsSeparateBuffer) {
  const int64_t rows = 7, vocab = 300;
  const std::vector<int64_t> targets = random_targets(rows, vocab, 5);
  Tensor tg = targets_tensor(DType::kI64, targets);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Tensor logits = random_tensor({rows, vocab}, dtype, 6, -4.0, 4.0);
    Tensor losses = Tensor::zeros_host({rows}, dtype);
    Tensor dl = Tensor::zeros_host({rows, vocab}, dtype);
    softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 0.5);
    Tensor in_place = converted(logits, dtype);
    Tensor losses2 = Tensor::zeros_host({rows}, dtype);
    softmax_cross_entropy(losses2, &in_place, in_place, tg, kIgnore, 0.5);
    EXPECT_EQ(std::memcmp(in_place.raw_data(), dl.raw_data(), dl.nbytes()), 0) << dtype_name(dtype);
    EXPECT_EQ(std::memcmp(losses2.raw_data(), losses.raw_data(), losses.nbytes()), 0);
  }
}

// Offsets of +-1e4 would overflow exp in a naive softmax; one logit 1e4 above the rest makes
// the loss either ~0 or ~1e4.
TEST(CpuCrossEntropy, HugeLogitsStayFiniteAndAccurate) {
  const int64_t rows = 4, vocab = 50;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Tensor logits = random_tensor({rows, vocab}, dtype, 7, -1.0, 1.0);
    for (int64_t j = 0; j < vocab; ++j) {
      testing::set_value_at(logits, 0 * vocab + j, value_at(logits, 0 * vocab + j) + 1e4);
      testing::set_value_at(logits, 1 * vocab + j, value_at(logits, 1 * vocab + j) - 1e4);
    }
    testing::set_value_at(logits, 2 * vocab + 5, 1e4);
    testing::set_value_at(logits, 3 * vocab + 5, 1e4);
    const std::vector<int64_t> targets = {3, 17, 5, 6};
    Tensor tg = targets_tensor(DType::kI32, targets);
    Tensor losses = Tensor::zeros_host({rows}, dtype);
    Tensor dl = Tensor::zeros_host({rows, vocab}, dtype);
    softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 1.0);
    for (int64_t i = 0; i < rows; ++i) ASSERT_TRUE(std::isfinite(value_at(losses, i)));
    for (int64_t i = 0; i < dl.numel(); ++i) ASSERT_TRUE(std::isfinite(value_at(dl, i)));
    Reference ref = reference(logits, targets, kIgnore, 1.0);
    // Relative to max(1, |loss|): the ~1e4 loss of row 3 is one f32 rounding of a double.
    EXPECT_LT(max_loss_error(losses, ref), dtype == DType::kF32 ? 3e-7 : 1e-14);
    EXPECT_LT(relative_error(dl, ref.dlogits), dtype == DType::kF32 ? 5e-7 : 1e-14);
    EXPECT_LT(value_at(losses, 2), 1e-30);
    EXPECT_NEAR(value_at(losses, 3), 1e4 - value_at(logits, 3 * vocab + 6), 1e-2);
  }
}

// f32 logits spread over 90 nats exercise the exp polynomial over its whole range: every
// probability above FLT_MIN must be accurate to a few ulps, smaller ones may flush. Beyond the
// ulps, x - max is itself rounded in f32 (as in any f32 softmax): an absolute error of up to
// |x - max| * 2^-24 in the exponent, i.e. that much relative error in exp.
TEST(CpuCrossEntropy, F32ProbabilitiesAreAccurateOverTheWholeExpRange) {
  const int64_t rows = 3, vocab = 2000;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 8, -90.0, 0.0);
  const std::vector<int64_t> targets = {0, 999, 1999};
  Tensor tg = targets_tensor(DType::kI64, targets);
  Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
  Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF32);
  softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 1.0);
  Reference ref = reference(logits, targets, kIgnore, 1.0);
  EXPECT_LT(max_loss_error(losses, ref), 3e-7);
  std::vector<float> row_max(rows, -std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < dl.numel(); ++i) {
    row_max[i / vocab] = std::max(row_max[i / vocab], logits.data<float>()[i]);
  }
  double worst = 0.0;  // relative error in units of the allowed error
  for (int64_t i = 0; i < dl.numel(); ++i) {
    const double r = ref.dlogits.data<double>()[i];
    const double got = dl.data<float>()[i];
    if (std::fabs(r) > 1e-37) {
      const float m = row_max[i / vocab];
      const double distance = std::fabs(static_cast<double>(logits.data<float>()[i]) - m);
      // exp (~2 ulp) times a rounded 1/sum and a rounding of the product: 5 ulp = 3e-7; plus
      // the rounding of x - max.
      const double allowed = 3e-7 + distance * 0x1p-24;
      worst = std::max(worst, std::fabs(got - r) / std::fabs(r) / allowed);
    } else {
      ASSERT_LT(std::fabs(got - r), 1e-37) << i;
    }
  }
  EXPECT_LT(worst, 1.0);
}

// When the model is confident (p[target] close to 1), the target's gradient p - 1 is small; it
// must not inherit the absolute rounding error of p, which would be huge relative to it.
TEST(CpuCrossEntropy, ConfidentRowsKeepTheTargetGradientAccurate) {
  const int64_t rows = 3, vocab = 37;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 14, -1.0, 1.0);
  const std::vector<int64_t> targets = {4, 20, 36};
  for (int64_t i = 0; i < rows; ++i) {
    logits.data<float>()[i * vocab + targets[static_cast<size_t>(i)]] += 8.0f + 3.0f * i;
  }
  Tensor tg = targets_tensor(DType::kI64, targets);
  Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
  Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF32);
  softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 1.0);
  Reference ref = reference(logits, targets, kIgnore, 1.0);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t k = i * vocab + targets[static_cast<size_t>(i)];
    const double r = ref.dlogits.data<double>()[k];  // -1e-2 .. -1e-5
    // Formed as (e - sum) / sum in double: a few f32 ulps of the result itself, where
    // rounding p to f32 and subtracting 1 would be off by up to 6e-8 / |r| ~ 1e-2 relative.
    EXPECT_LT(std::fabs(dl.data<float>()[k] - r) / std::fabs(r), 1e-6) << "row " << i;
  }
  EXPECT_LT(max_loss_error(losses, ref), 3e-7);
}

TEST(CpuCrossEntropy, GradScaleScalesTheGradientOnly) {
  const int64_t rows = 3, vocab = 64;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 9, -3.0, 3.0);
  Tensor tg = targets_tensor(DType::kI64, {0, 31, 63});
  Tensor l1 = Tensor::zeros_host({rows}, DType::kF32), lq = Tensor::zeros_host({rows}, DType::kF32);
  Tensor g1 = Tensor::zeros_host({rows, vocab}, DType::kF32);
  Tensor gq = Tensor::zeros_host({rows, vocab}, DType::kF32);
  softmax_cross_entropy(l1, &g1, logits, tg, kIgnore, 1.0);
  softmax_cross_entropy(lq, &gq, logits, tg, kIgnore, 0.25);
  EXPECT_EQ(std::memcmp(l1.raw_data(), lq.raw_data(), l1.nbytes()), 0);
  // Scaling by a power of two is exact, so the quarter-scaled gradient is bitwise a quarter.
  for (int64_t i = 0; i < g1.numel(); ++i) {
    ASSERT_EQ(gq.data<float>()[i], 0.25f * g1.data<float>()[i]) << i;
  }
  // Each gradient row is softmax - onehot, which sums to zero.
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0.0;
    for (int64_t j = 0; j < vocab; ++j) s += g1.data<float>()[i * vocab + j];
    EXPECT_LT(std::fabs(s), 1e-6);  // 64 entries of <= 1 with ~1e-7 error each
  }
  softmax_cross_entropy(lq, &gq, logits, tg, kIgnore, 0.0);
  for (int64_t i = 0; i < gq.numel(); ++i) ASSERT_EQ(gq.data<float>()[i], 0.0f);
}

// GPT-2-like row length over several rows takes the parallel path; rows are independent, so
// the results must not depend on the thread count.
TEST(CpuCrossEntropy, WideRowsAreAccurateAndThreadCountIndependent) {
  const int64_t rows = 6, vocab = 5003;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 10, -8.0, 8.0);
  const std::vector<int64_t> targets = random_targets(rows, vocab, 11);
  Tensor tg = targets_tensor(DType::kI32, targets);
  Reference ref = reference(logits, targets, kIgnore, 1.0 / rows);
  const int saved_threads = omp_get_max_threads();
  Tensor results[2] = {Tensor::zeros_host({rows, vocab}, DType::kF32),
                       Tensor::zeros_host({rows, vocab}, DType::kF32)};
  for (int k = 0; k < 2; ++k) {
    omp_set_num_threads(k == 0 ? 1 : 4);
    Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
    softmax_cross_entropy(losses, &results[k], logits, tg, kIgnore, 1.0 / rows);
    EXPECT_LT(max_loss_error(losses, ref), 3e-7);
  }
  omp_set_num_threads(saved_threads);
  EXPECT_LT(relative_error(results[0], ref.dlogits), 5e-7);
  EXPECT_EQ(std::memcmp(results[0].raw_data(), results[1].raw_data(), results[0].nbytes()), 0);
}

// A NaN or +Inf logit (an overflowed forward pass) must surface as a NaN loss and gradient, so
// loss scaling and divergence checks see it instead of a silently finite loss.
TEST(CpuCrossEntropy, NonFiniteLogitsPropagate) {
  const int64_t vocab = 40;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    Tensor logits = random_tensor({2, vocab}, DType::kF32, 12);
    logits.data<float>()[17] = bad;
    Tensor tg = targets_tensor(DType::kI64, {3, 3});
    Tensor losses = Tensor::zeros_host({2}, DType::kF32);
    Tensor dl = Tensor::zeros_host({2, vocab}, DType::kF32);
    softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 1.0);
    EXPECT_TRUE(std::isnan(losses.data<float>()[0])) << bad;
    EXPECT_TRUE(std::isnan(dl.data<float>()[17])) << bad;
    EXPECT_TRUE(std::isfinite(losses.data<float>()[1]));  // other rows are unaffected
  }
}

TEST(CpuCrossEntropy, BadTargetThrowsBeforeWriting) {
  const int64_t rows = 4, vocab = 37;
  Tensor logits = random_tensor({rows, vocab}, DType::kF32, 13);
  for (int64_t bad : {int64_t{37}, int64_t{-1}}) {
    Tensor tg = targets_tensor(DType::kI64, {0, 5, bad, kIgnore});
    Tensor losses = Tensor::zeros_host({rows}, DType::kF32);
    Tensor dl = Tensor::zeros_host({rows, vocab}, DType::kF32);
    try {
      softmax_cross_entropy(losses, &dl, logits, tg, kIgnore, 1.0);
      ADD_FAILURE() << "no exception for target " << bad;
    } catch (const ShapeError&) {
      ADD_FAILURE() << "a bad target is a data error, not a shape error";
    } catch (const Error& e) {
      const std::string expected = "target " + std::to_string(bad) + " at row 2";
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    for (int64_t i = 0; i < rows; ++i) ASSERT_EQ(losses.data<float>()[i], 0.0f);
    for (int64_t i = 0; i < dl.numel(); ++i) ASSERT_EQ(dl.data<float>()[i], 0.0f);
  }
}

TEST(CpuCrossEntropy, RejectsMismatchedShapesAndDtypes) {
  Tensor logits = Tensor::zeros_host({2, 3, 5}, DType::kF32);  // 6 rows
  Tensor tg = targets_tensor(DType::kI32, {0, 1, 2, 3, 4, 0});
  Tensor losses = Tensor::zeros_host({2, 3}, DType::kF32);
  softmax_cross_entropy(losses, nullptr, logits, tg, kIgnore, 1.0);  // leading dims are rows
  EXPECT_NEAR(losses.data<float>()[5], std::log(5.0), 1e-6);

  Tensor tg_short = targets_tensor(DType::kI32, {0, 1, 2});
  EXPECT_THROW(softmax_cross_entropy(losses, nullptr, logits, tg_short, kIgnore, 1.0), ShapeError);
  Tensor losses_short = Tensor::zeros_host({5}, DType::kF32);
  EXPECT_THROW(softmax_cross_entropy(losses_short, nullptr, logits, tg, kIgnore, 1.0), ShapeError);
  Tensor losses64 = Tensor::zeros_host({6}, DType::kF64);
  EXPECT_THROW(softmax_cross_entropy(losses64, nullptr, logits, tg, kIgnore, 1.0), ShapeError);
  Tensor dl_bad = Tensor::zeros_host({6, 4}, DType::kF32);
  EXPECT_THROW(softmax_cross_entropy(losses, &dl_bad, logits, tg, kIgnore, 1.0), ShapeError);
  Tensor float_targets = Tensor::zeros_host({6}, DType::kF32);
  EXPECT_THROW(softmax_cross_entropy(losses, nullptr, logits, float_targets, kIgnore, 1.0),
               ShapeError);
  try {
    softmax_cross_entropy(losses, nullptr, logits, tg_short, kIgnore, 1.0);
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3, 5]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
}

}  // namespace cross_entropy_test
}  // namespace zero::backend::cpu
