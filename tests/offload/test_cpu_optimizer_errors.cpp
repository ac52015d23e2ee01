// Bad input to offload::CpuOptimizerStep is a clear zero::Error naming the buffer and the fix,
// and nothing is written before the check fails.
#include <gtest/gtest.h>

#include <bit>
#include <string>

#include "core/error.h"
#include "cpu_step_harness.h"
#include "offload/simd_target.h"

namespace zero::offload {
namespace {

using backend::OptimizerKind;
using testing::Partition;

const backend::ParamSegment kAll[] = {{0, 100, true}};

// Runs `f`, expects an exception of type E whose message contains `needle`.
template <typename E, typename F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CpuOptimizerStepErrors, MismatchedLengthsNameTheBuffer) {
  Partition part(OptimizerKind::kAdam, 100, DType::kBF16, DType::kF32, DType::kBF16, 1);
  CpuOptimizerStep step(OptimizerKind::kAdam);
  const backend::OptimizerHyper h;
  const float before = part.master.data<float>()[0];
  {
    CpuStepBuffers b = part.buffers();
    b.grads = Tensor::zeros_host({99}, DType::kBF16);
    expect_error<ShapeError>([&] { step.step(b, kAll, h); },
                             "grads has 99 elements but master has 100; every buffer of a partition");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.state[1] = Tensor::zeros_host({101}, DType::kF32);
    expect_error<ShapeError>([&] { step.step(b, kAll, h); }, "state has 101 elements but master has 100");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.param_copy = Tensor::zeros_host({50}, DType::kBF16);
    expect_error<ShapeError>([&] { step.step(b, kAll, h); }, "param_copy has 50 elements");
  }
  EXPECT_EQ(part.master.data<float>()[0], before) << "nothing is written when a check fails";
}

TEST(CpuOptimizerStepErrors, StateCountSegmentsAndDtypes) {
  Partition part(OptimizerKind::kAdam, 100, DType::kF32, DType::kF32, DType::kBF16, 1);
  const backend::OptimizerHyper h;
  // Lion takes one state buffer, Adam's two are wrong for it.
  expect_error<ShapeError>([&] { CpuOptimizerStep(OptimizerKind::kLion).step(part.buffers(), kAll, h); },
                           "Lion takes 1 state buffers, got 2");
  CpuOptimizerStep step(OptimizerKind::kAdam);
  const backend::ParamSegment outside[] = {{90, 20, true}};
  expect_error<ShapeError>([&] { step.step(part.buffers(), outside, h); },
                           "segment [90, +20) is outside the 100-element partition");
  const backend::ParamSegment overlapping[] = {{50, 10, true}, {52, 0, true}, {0, 55, false}};
  expect_error<ShapeError>([&] { step.step(part.buffers(), overlapping, h); },
                           "segments [0, +55) and [50, +10) overlap");
  {
    CpuStepBuffers b = part.buffers();
    b.grads = Tensor::zeros_host({100}, DType::kF64);
    expect_error<UnsupportedError>([&] { step.step(b, kAll, h); },
                                   "grads in f64 is not supported; use f32 or bf16 or f16");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.state = {Tensor::zeros_host({100}, DType::kF16), Tensor::zeros_host({100}, DType::kF16)};
    expect_error<UnsupportedError>([&] { step.step(b, kAll, h); }, "state in f16 is not supported; use f32 or bf16");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.state[1] = Tensor::zeros_host({100}, DType::kBF16);
    expect_error<UnsupportedError>([&] { step.step(b, kAll, h); }, "mixed; store all of them in one dtype");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.param_copy = Tensor::zeros_host({100}, DType::kF32);
    expect_error<UnsupportedError>([&] { step.step(b, kAll, h); },
                                   "param_copy in f32 is not supported; use bf16 or f16");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.master = Tensor::zeros_host({100}, DType::kBF16);
    expect_error<UnsupportedError>([&] { step.step(b, kAll, h); }, "master weights in bf16 are not supported");
  }
  {
    CpuStepBuffers b = part.buffers();
    b.grads = Tensor::zeros_host({20, 10}, DType::kF32).narrow(1, 0, 5);  // 100 strided elements
    expect_error<ShapeError>([&] { step.step(b, kAll, h); }, "grads must be a contiguous host tensor");
  }
}

TEST(CpuOptimizerStepErrors, UnknownSimdTargetListsTheAvailableOnes) {
  expect_error<UnsupportedError>([] { ScopedSimdTarget force("AVX9000"); },
                                 "SIMD target \"AVX9000\" is not compiled in or not supported by this CPU; available: " +
                                     available_simd_targets().front());
}

}  // namespace
}  // namespace zero::offload
