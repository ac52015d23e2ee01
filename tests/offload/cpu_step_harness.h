// Shared by the tests of offload::CpuOptimizerStep: one partition's buffers with reproducible
// contents, a reference update through Backend::optimizer_update on the CPU backend (bf16 state
// widened and rounded back as optim::Optimizer does; 16-bit gradients widened exactly, then
// Backend::scale by grad_scale and by the clip coefficient, as the engine does), and bit comparisons.
#pragma once
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "offload/cpu_optimizer.h"

namespace zero::offload::testing {

inline uint64_t next_random(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Uniform in [0, 1).
inline double uniform(uint64_t& s) { return static_cast<double>(next_random(s) >> 11) * 0x1.0p-53; }

inline float read_float(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data<float>()[i];
    case DType::kBF16: return to_float(t.data<bf16>()[i]);
    case DType::kF16: return to_float(t.data<f16>()[i]);
    default: ADD_FAILURE() << "unexpected dtype"; return 0.0f;
  }
}

inline void write_float(Tensor& t, int64_t i, float value) {
  switch (t.dtype()) {
    case DType::kF32: t.data<float>()[i] = value; break;
    case DType::kBF16: t.data<bf16>()[i] = to_bf16(value); break;
    case DType::kF16: t.data<f16>()[i] = to_f16(value); break;
    default: ADD_FAILURE() << "unexpected dtype";
  }
}

// The stored bits of element i (f32 bits, or the 16-bit pattern).
inline uint32_t bits_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return std::bit_cast<uint32_t>(t.data<float>()[i]);
    case DType::kBF16: return t.data<bf16>()[i].bits;
    case DType::kF16: return t.data<f16>()[i].bits;
    default: ADD_FAILURE() << "unexpected dtype"; return 0;
  }
}

// Master weights, state and gradient of one partition; the gradient is refilled each step.
struct Partition {
  Tensor master;
  Tensor grads;
  std::vector<Tensor> state;
  Tensor copy;  // undefined when the case writes no 16-bit copy

  Partition(backend::OptimizerKind kind, int64_t n, DType grad_dtype, DType state_dtype, DType copy_dtype,
            uint64_t seed) {
    master = Tensor::zeros_host({n}, DType::kF32);
    grads = Tensor::zeros_host({n}, grad_dtype);
    uint64_t s = seed;
    for (int64_t i = 0; i < n; ++i) master.data<float>()[i] = static_cast<float>(2.0 * uniform(s) - 1.0);
    for (size_t k = 0; k < state_buffer_count(kind); ++k) state.push_back(Tensor::zeros_host({n}, state_dtype));
    if (copy_dtype != DType::kF32) {
      copy = Tensor::zeros_host({n}, copy_dtype);
      // A sentinel that rounding never produces from the test's weights: elements outside every
      // segment must keep it.
      for (int64_t i = 0; i < n; ++i) write_float(copy, i, 1234.0f);
    }
  }

  CpuStepBuffers buffers() const { return {master, grads, state, copy}; }

  // Gradients over many decades (f16 subnormals included), some exact zeros.
  void fill_grads(uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 7;
    for (int64_t i = 0; i < grads.numel(); ++i) {
      const double magnitude = std::exp2(-24.0 * uniform(s));
      const double value = (next_random(s) % 17 == 0) ? 0.0 : (uniform(s) < 0.5 ? -magnitude : magnitude);
      write_float(grads, i, static_cast<float>(value));
    }
  }
};

// Backend::optimizer_update over the same buffers, kept in the same storage dtypes.
struct Reference {
  backend::CpuBackend cpu;
  Tensor master;
  std::vector<Tensor> state;  // stored dtype

  explicit Reference(const Partition& p) {
    master = Tensor::zeros_host({p.master.numel()}, DType::kF32);
    cpu.copy(master, p.master);
    for (const Tensor& s : p.state) {
      state.push_back(Tensor::zeros_host({s.numel()}, s.dtype()));
      cpu.copy(state.back(), s);
    }
  }

  void step(backend::OptimizerKind kind, const Tensor& grads, std::span<const backend::ParamSegment> segments,
            const backend::OptimizerHyper& hyper, double grad_scale, double clip_coefficient = 1.0) {
    const int64_t n = master.numel();
    Tensor g = Tensor::zeros_host({n}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) g.data<float>()[i] = read_float(grads, i);
    if (grad_scale != 1.0) cpu.scale(g, grad_scale);
    if (clip_coefficient != 1.0) cpu.scale(g, clip_coefficient);  // as clipping before an update at grad_scale 1
    std::vector<Tensor> wide;
    for (const Tensor& s : state) {
      wide.push_back(Tensor::zeros_host({n}, DType::kF32));
      for (int64_t i = 0; i < n; ++i) wide.back().data<float>()[i] = read_float(s, i);
    }
    cpu.optimizer_update(kind, master, g, wide, segments, hyper);
    for (size_t k = 0; k < state.size(); ++k) {
      for (int64_t i = 0; i < n; ++i) write_float(state[k], i, wide[k].data<float>()[i]);
    }
  }
};

}  // namespace zero::offload::testing
