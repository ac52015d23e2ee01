// offload::CpuOptimizerStep against Backend::optimizer_update on the CPU backend: every optimizer
// kind, gradient dtype and state dtype, several steps, segments with and without decay, a gap
// between segments, lengths that leave vector tails, and more than one chunk per segment.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <string>

#include "cpu_step_harness.h"
#include "offload/simd_target.h"

namespace zero::offload {
namespace {

using backend::OptimizerKind;
using testing::Partition;
using testing::Reference;
using testing::bits_at;

// The reference (backend/cpu/cpu_optimizers.cpp) is compiled with this test's flags. Without FMA
// in the baseline (ZERO_NATIVE=OFF) nothing can be fused in it: the step must then give its bits
// exactly (Lamb's parameters excepted, see below). With -march=native (the default preset) GCC
// contracts a*b+c inside the reference, while this library is built with -ffp-contract=off and
// never does. One fused product changes a result by an ulp of that product, which is many ulps
// of the result where terms cancel (b1 m + (1-b1) g near 0), so bounds are relative to the
// operands: |step - reference| <= kRelative * max |operand| per element. The update of a weight
// amplifies such a difference where it divides by a small denominator (Adam's L2 gradient
// g + wd p cancelling to about eps; a bf16 moment rounded the other way changes later updates by
// 2^-8): a few weights then move by a fraction of lr, so with a fusing reference up to
// kFusedOutliers of the weights may exceed the operand bound, each by less than
// kOutlierLrs * lr per step.
#if defined(__FMA__)
constexpr bool kReferenceFuses = true;
#else
constexpr bool kReferenceFuses = false;
#endif
constexpr double kRelativeF32 = 16.0 * 0x1p-24;  // a few f32 roundings, compounded over steps
constexpr double kRelativeBF16 = 0x1p-7;          // a bf16 state can round the other way: 1 bf16 ulp
constexpr double kFusedOutliers = 0.005;
constexpr double kOutlierLrs = 8.0;
// Lamb sums its norms in a fixed blocked order where the reference sums serially: the trust ratio
// may differ in its last double bits and lr * trust round to a neighbouring float, so even an
// unfused reference may differ by about one f32 rounding of the update (within the operand bound).

// 36867 elements: a 1000-element decayed segment, a 3-element bias, a decayed segment that spans
// three chunks of CpuOptimizerStep::kChunkElements, an empty segment, an untouched gap of 10
// elements [36767, 36777), and an odd no-decay tail.
constexpr int64_t kNumel = 36867;
const backend::ParamSegment kSegments[] = {
    {0, 1000, true}, {1000, 3, false}, {1003, 35764, true}, {36767, 0, true}, {36777, 90, false}};

bool in_segment(int64_t i) {
  return std::any_of(std::begin(kSegments), std::end(kSegments),
                     [i](const backend::ParamSegment& s) { return i >= s.offset && i < s.offset + s.length; });
}

struct Case {
  OptimizerKind kind;
  bool adam_w_mode;
  DType grad_dtype;
  DType state_dtype;
  DType copy_dtype;  // kF32: no 16-bit copy
  double grad_scale;
  bool bias_correction = true;
  double clip = 1.0;

  std::string name() const {
    const char* kinds[] = {"Adam", "Lamb", "Lion", "Adagrad"};
    return std::string(kinds[static_cast<int>(kind)]) + (kind == OptimizerKind::kAdam ? (adam_w_mode ? "W" : "-L2") : "") +
           " grads " + dtype_name(grad_dtype) + " state " + dtype_name(state_dtype) + " copy " +
           (copy_dtype == DType::kF32 ? "none" : dtype_name(copy_dtype)) + " scale " + std::to_string(grad_scale) +
           (bias_correction ? "" : " no-bias-correction") + (clip != 1.0 ? " clip " + std::to_string(clip) : "");
  }
};

backend::OptimizerHyper hyper_for(const Case& c, int64_t step) {
  backend::OptimizerHyper h;
  h.lr = c.kind == OptimizerKind::kLion ? 1e-3 : 1e-2;
  h.beta1 = 0.9;
  h.beta2 = c.kind == OptimizerKind::kLion ? 0.99 : 0.999;
  h.eps = c.kind == OptimizerKind::kAdagrad ? 1e-10 : 1e-8;
  h.weight_decay = 0.1;
  h.adam_w_mode = c.adam_w_mode;
  h.bias_correction = c.bias_correction;
  h.step = step;
  return h;
}

// The largest update one step can make, in units of lr (Adam's m_hat / sqrt(v_hat) <= ~3.2 at
// step 1 with these betas; Lamb's trust <= 10 times a direction of that size plus decay).
constexpr double kMaxUpdateOverLr = 100.0;

struct Mismatch {
  int64_t differing = 0;  // elements whose bits differ
  int64_t beyond = 0;     // elements beyond the bound
  std::string first;      // description of the first element beyond the bound
  int64_t outliers = 0;    // beyond the bound but within the outlier bound
  void add(const char* what, int64_t i, double ours, double ref, double bound, double outlier_bound = 0.0) {
    if (ours == ref || (std::isnan(ours) && std::isnan(ref))) return;
    ++differing;
    const double diff = std::abs(ours - ref);
    if (diff <= bound) return;
    if (diff <= outlier_bound) {
      ++outliers;
      return;
    }
    if (beyond++ == 0) {
      first = std::string(what) + "[" + std::to_string(i) + "]: " + std::to_string(ours) + " vs reference " +
              std::to_string(ref) + ", bound " + std::to_string(bound);
    }
  }
};

// Runs `steps` updates through the step and the reference and compares master and state after
// each, and the 16-bit copy against the rounding of the step's own master weights (exactly).
void run_case(const Case& c, int steps = 4) {
  SCOPED_TRACE(c.name() + " on " + active_simd_target());
  Partition part(c.kind, kNumel, c.grad_dtype, c.state_dtype, c.copy_dtype, 11);
  Reference ref(part);
  CpuOptimizerStep step(c.kind);
  const double state_relative = c.state_dtype == DType::kBF16 ? kRelativeBF16 : kRelativeF32;
  for (int t = 1; t <= steps; ++t) {
    part.fill_grads(static_cast<uint64_t>(t));
    const backend::OptimizerHyper h = hyper_for(c, t);
    // Operands of this step, from the reference before it.
    // dp_old: how far the two runs' weights already are apart; with L2 decay it enters g + wd p.
    std::vector<double> p_old(kNumel), g_eff(kNumel), dp_old(kNumel);
    std::vector<std::vector<double>> s_old(ref.state.size(), std::vector<double>(kNumel));
    std::vector<std::vector<double>> ds_old = s_old;  // and how far the states are apart
    for (int64_t i = 0; i < kNumel; ++i) {
      p_old[i] = ref.master.data<float>()[i];
      dp_old[i] = std::abs(static_cast<double>(part.master.data<float>()[i]) - p_old[i]);
      g_eff[i] = std::abs(testing::read_float(part.grads, i) * c.grad_scale * c.clip) + h.weight_decay * std::abs(p_old[i]);
      for (size_t k = 0; k < ref.state.size(); ++k) {
        s_old[k][i] = testing::read_float(ref.state[k], i);
        ds_old[k][i] = std::abs(testing::read_float(part.state[k], i) - s_old[k][i]);
      }
    }
    step.step(part.buffers(), kSegments, h, c.grad_scale, c.clip);
    ref.step(c.kind, part.grads, kSegments, h, c.grad_scale, c.clip);
    Mismatch master, state;
    for (int64_t i = 0; i < kNumel; ++i) {
      const double ours = part.master.data<float>()[i], theirs = ref.master.data<float>()[i];
      const double p_scale = std::max({std::abs(p_old[i]), std::abs(theirs), kMaxUpdateOverLr * h.lr});
      const double lamb_trust = c.kind == OptimizerKind::kLamb ? 10.0 : 1.0;
      master.add("master", i, ours, theirs, kRelativeF32 * p_scale,
                 kReferenceFuses ? kOutlierLrs * lamb_trust * h.lr * t : 0.0);
      for (size_t k = 0; k < part.state.size(); ++k) {
        // exp_avg mixes g; exp_avg_sq and Adagrad's sum_sq mix g^2.
        const bool squares = k == 1 || c.kind == OptimizerKind::kAdagrad;
        const double g_term = squares ? g_eff[i] * g_eff[i] : g_eff[i];
        const double s_new = testing::read_float(ref.state[k], i);
        const double carried = ds_old[k][i] +
                               h.weight_decay * dp_old[i] * (squares ? 2.0 * g_eff[i] + h.weight_decay * dp_old[i] : 1.0);
        const double bound = state_relative * std::max({std::abs(s_old[k][i]), std::abs(s_new), g_term}) + carried;
        state.add(k == 0 ? "state0" : "state1", i, testing::read_float(part.state[k], i), s_new, bound);
      }
      if (part.copy.defined()) {
        const float rounded = in_segment(i) ? part.master.data<float>()[i] : 1234.0f;  // outside: the sentinel stays
        const uint32_t expected =
            c.copy_dtype == DType::kBF16 ? float_to_bf16_bits(rounded) : float_to_f16_bits(rounded);
        ASSERT_EQ(bits_at(part.copy, i), expected) << "copy element " << i << " step " << t;
      }
    }
    EXPECT_EQ(master.beyond, 0) << "step " << t << ": " << master.first;
    EXPECT_LE(master.outliers, static_cast<int64_t>(kFusedOutliers * kNumel)) << "step " << t;
    EXPECT_EQ(state.beyond, 0) << "step " << t << ": " << state.first;
    if (!kReferenceFuses) {
      EXPECT_EQ(state.differing, 0) << "step " << t << ": the unfused reference's state bits";
      if (c.kind != OptimizerKind::kLamb) {
        EXPECT_EQ(master.differing, 0) << "step " << t;
      }
    }
    if (t == steps) {
      std::printf("%-70s bits differ from the reference in %lld master (%lld outliers) / %lld state elements of %lld\n",
                  c.name().c_str(), static_cast<long long>(master.differing), static_cast<long long>(master.outliers),
                  static_cast<long long>(state.differing), static_cast<long long>(kNumel));
    }
  }
  // The gap between segments is untouched.
  Partition fresh(c.kind, kNumel, c.grad_dtype, c.state_dtype, c.copy_dtype, 11);
  for (int64_t i = 36767; i < 36777; ++i) {
    EXPECT_EQ(bits_at(part.master, i), bits_at(fresh.master, i)) << i;
    for (size_t k = 0; k < part.state.size(); ++k) EXPECT_EQ(bits_at(part.state[k], i), 0u) << i;
  }
}

TEST(CpuOptimizerStep, MatchesBackendForEveryKindGradAndStateDtype) {
  const OptimizerKind kinds[] = {OptimizerKind::kAdam, OptimizerKind::kAdam, OptimizerKind::kLamb,
                                 OptimizerKind::kLion, OptimizerKind::kAdagrad};
  const DType copies[] = {DType::kBF16, DType::kF16, DType::kF32};
  int index = 0;
  for (int k = 0; k < 5; ++k) {
    for (DType grad : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (DType state : {DType::kF32, DType::kBF16}) {
        Case c{kinds[k], k == 0, grad, state, copies[index % 3], index % 2 == 0 ? 1.0 : 1.0 / 3.0, true,
               index % 4 == 1 ? 0.7 : 1.0};
        ++index;
        run_case(c);
      }
    }
  }
}

TEST(CpuOptimizerStep, BiasCorrectionOffAndL2Decay) {
  run_case({OptimizerKind::kAdam, true, DType::kF32, DType::kF32, DType::kBF16, 1.0, false});
  run_case({OptimizerKind::kAdam, false, DType::kBF16, DType::kF32, DType::kBF16, 0.25, false});
  run_case({OptimizerKind::kLamb, true, DType::kF32, DType::kF32, DType::kF16, 1.0, false});
}

// Every target the CPU can run, the scalar fallback included, gives the same bits.
TEST(CpuOptimizerStep, EverySimdTargetGivesTheSameBits) {
  const std::vector<std::string> targets = available_simd_targets();
  ASSERT_FALSE(targets.empty());
  std::printf("SIMD targets: ");
  for (const std::string& t : targets) std::printf("%s ", t.c_str());
  std::printf("(active: %s)\n", active_simd_target().c_str());
  EXPECT_NE(std::find(targets.begin(), targets.end(), active_simd_target()), targets.end());
  EXPECT_EQ(active_simd_target(), targets.front()) << "the best target runs by default";
  const Case cases[] = {{OptimizerKind::kAdam, true, DType::kBF16, DType::kF32, DType::kBF16, 1.0 / 3.0, true, 0.7},
                        {OptimizerKind::kAdam, false, DType::kF16, DType::kBF16, DType::kF16, 1.0},
                        {OptimizerKind::kLamb, true, DType::kF16, DType::kF32, DType::kBF16, 0.5},
                        {OptimizerKind::kLion, true, DType::kF32, DType::kBF16, DType::kF16, 1.0},
                        {OptimizerKind::kAdagrad, true, DType::kBF16, DType::kF32, DType::kBF16, 1.0}};
  for (const Case& c : cases) {
    std::vector<Partition> results;
    for (const std::string& target : targets) {
      ScopedSimdTarget force(target);
      ASSERT_EQ(active_simd_target(), target);
      Partition part(c.kind, kNumel, c.grad_dtype, c.state_dtype, c.copy_dtype, 5);
      CpuOptimizerStep step(c.kind);
      for (int t = 1; t <= 3; ++t) {
        part.fill_grads(static_cast<uint64_t>(t) + 100);
        step.step(part.buffers(), kSegments, hyper_for(c, t), c.grad_scale, c.clip);
      }
      results.push_back(std::move(part));
    }
    EXPECT_EQ(active_simd_target(), targets.front()) << "the automatic choice is restored";
    for (size_t r = 1; r < results.size(); ++r) {
      SCOPED_TRACE(c.name() + ": " + targets[r] + " vs " + targets[0]);
      for (int64_t i = 0; i < kNumel; ++i) {
        ASSERT_EQ(bits_at(results[r].master, i), bits_at(results[0].master, i)) << "master " << i;
        for (size_t k = 0; k < results[r].state.size(); ++k) {
          ASSERT_EQ(bits_at(results[r].state[k], i), bits_at(results[0].state[k], i)) << "state " << k << " " << i;
        }
        ASSERT_EQ(bits_at(results[r].copy, i), bits_at(results[0].copy, i)) << "copy " << i;
      }
    }
  }
}

// The 16-bit copy is core/half.h's rounding of the new master weight for the values where
// rounding is delicate: ties either way, f16 subnormals and overflow, f32 subnormals, Inf, NaN.
TEST(CpuOptimizerStep, ParamCopyRoundsLikeCoreOnEveryTarget) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e30f,
                               std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc12345u),
                               std::numeric_limits<float>::denorm_min(), -1e-40f, 0x1p-14f, 0x1p-15f, 0x1p-24f,
                               0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f, 0x1.4p-24f, 0x1.7fep-15f, 6.1e-5f, 5.96e-8f};
  // bf16 ties (both parities), f16 ties (both parities) and their neighbours.
  for (uint32_t base : {0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f801000u, 0x3f803000u, 0x477fe000u, 0x387fe000u}) {
    for (int delta = -1; delta <= 1; ++delta) values.push_back(std::bit_cast<float>(base + static_cast<uint32_t>(delta)));
  }
  uint64_t s = 3;
  while (values.size() < 301) {  // and random bit patterns of every exponent
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(testing::next_random(s))));
  }
  const auto n = static_cast<int64_t>(values.size());
  const backend::ParamSegment all[] = {{0, n, true}};
  for (const std::string& target : available_simd_targets()) {
    ScopedSimdTarget force(target);
    for (DType copy_dtype : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(target + std::string(" copy ") + dtype_name(copy_dtype));
      // Lion with lr 0 and no decay computes p * 1 - 0 * sign = p: every master weight stays as it
      // is (NaNs stay NaN), so the copy sees exactly these values.
      Partition part(OptimizerKind::kLion, n, DType::kF32, DType::kF32, copy_dtype, 1);
      for (int64_t i = 0; i < n; ++i) part.master.data<float>()[i] = values[static_cast<size_t>(i)];
      backend::OptimizerHyper h;
      h.lr = 0.0;
      h.weight_decay = 0.0;
      CpuOptimizerStep(OptimizerKind::kLion).step(part.buffers(), all, h);
      for (int64_t i = 0; i < n; ++i) {
        const float w = part.master.data<float>()[i];
        const float original = values[static_cast<size_t>(i)];
        if (!std::isnan(original)) {
          ASSERT_EQ(w, original) << i;
        } else {
          ASSERT_TRUE(std::isnan(w)) << i;
        }
        const uint32_t expected = copy_dtype == DType::kBF16 ? float_to_bf16_bits(w) : float_to_f16_bits(w);
        ASSERT_EQ(bits_at(part.copy, i), expected)
            << "value " << std::hexfloat << w << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(w) << ")";
      }
    }
  }
}

// 16-bit gradients are read exactly: every f16 and bf16 bit pattern that is finite.
TEST(CpuOptimizerStep, SixteenBitGradientsAreReadExactly) {
  const int64_t n = 65536;
  const backend::ParamSegment all[] = {{0, n, true}};
  for (const std::string& target : available_simd_targets()) {
    ScopedSimdTarget force(target);
    for (DType grad_dtype : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(target + std::string(" grads ") + dtype_name(grad_dtype));
      // Adagrad with lr 0: sum_sq = g * g, which shows the gradient the kernel read (squared
      // exactly enough to compare against the widened value squared in f32).
      Partition part(OptimizerKind::kAdagrad, n, grad_dtype, DType::kF32, DType::kF32, 1);
      for (int64_t i = 0; i < n; ++i) {
        const auto pattern = static_cast<uint16_t>(i);
        if (grad_dtype == DType::kBF16) {
          part.grads.data<bf16>()[i] = bf16{pattern};
        } else {
          part.grads.data<f16>()[i] = f16{pattern};
        }
      }
      backend::OptimizerHyper h;
      h.lr = 0.0;
      CpuOptimizerStep(OptimizerKind::kAdagrad).step(part.buffers(), all, h);
      for (int64_t i = 0; i < n; ++i) {
        const float g = testing::read_float(part.grads, i);
        const float expected = g * g;
        const float got = part.state[0].data<float>()[i];
        if (std::isnan(expected)) {
          ASSERT_TRUE(std::isnan(got)) << i;
        } else {
          ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected)) << "pattern " << i;
        }
      }
    }
  }
}

// Fixed chunks: the thread count changes nothing, Lamb's norms included.
TEST(CpuOptimizerStep, ResultsDoNotDependOnThreadCount) {
  for (OptimizerKind kind : {OptimizerKind::kLamb, OptimizerKind::kAdam}) {
    std::vector<Partition> results;
    for (int threads : {1, 2, 3}) {
      Partition part(kind, kNumel, DType::kBF16, DType::kF32, DType::kBF16, 9);
      CpuOptimizerStep step(kind, threads);
      EXPECT_EQ(step.threads(), threads);
      for (int t = 1; t <= 2; ++t) {
        part.fill_grads(static_cast<uint64_t>(t));
        step.step(part.buffers(), kSegments, hyper_for({kind, true, DType::kBF16, DType::kF32, DType::kBF16, 1.0}, t));
      }
      results.push_back(std::move(part));
    }
    for (size_t r = 1; r < results.size(); ++r) {
      for (int64_t i = 0; i < kNumel; ++i) {
        ASSERT_EQ(bits_at(results[r].master, i), bits_at(results[0].master, i)) << i;
      }
    }
  }
}

TEST(CpuOptimizerStep, TrafficCountsWhatTheStepMoves) {
  Partition part(OptimizerKind::kAdam, 100, DType::kBF16, DType::kF32, DType::kBF16, 1);
  // master 4 read + 4 written, grads 2 read, two f32 moments 8 read + 8 written, copy 2 written.
  EXPECT_EQ(step_traffic_bytes(OptimizerKind::kAdam, part.buffers()), 28 * 100);
  Partition lamb(OptimizerKind::kLamb, 100, DType::kF32, DType::kF32, DType::kF32, 1);
  EXPECT_EQ(step_traffic_bytes(OptimizerKind::kLamb, lamb.buffers()), (28 + 4 + 4 + 8) * 100);
}

}  // namespace
}  // namespace zero::offload
