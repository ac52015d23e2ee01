#include "offload/cpu_optimizer.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <string>

#include "core/check.h"
#include "core/error.h"
#include "offload/cpu_optimizer_kernels.h"

namespace zero::offload {
namespace {

using backend::OptimizerKind;
using backend::ParamSegment;
using kernels::Storage;

constexpr const char* kOp = "offload CPU optimizer step";

const char* kind_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam: return "Adam";
    case OptimizerKind::kLamb: return "Lamb";
    case OptimizerKind::kLion: return "Lion";
    case OptimizerKind::kAdagrad: return "Adagrad";
    case OptimizerKind::kMomentum: return "1-bit Adam's momentum";
    case OptimizerKind::kFrozenVarianceAdam: return "1-bit Adam's frozen-variance update";
  }
  return "?";
}

void require_host_buffer(const Tensor& t, const char* name) {
  if (!t.defined() || !t.device().is_cpu() || !t.is_contiguous()) {
    throw ShapeError(std::string(kOp) + ": " + name + " must be a contiguous host tensor, got " +
                     (t.defined() ? t.describe() : std::string("an undefined tensor")));
  }
}

void require_numel(const Tensor& t, const char* name, int64_t numel) {
  if (t.numel() != numel) {
    throw ShapeError(std::string(kOp) + ": " + name + " has " + std::to_string(t.numel()) +
                     " elements but master has " + std::to_string(numel) +
                     "; every buffer of a partition must have the partition's length");
  }
}

// The storage of `t`, which must be one of `allowed` (f32, bf16, f16 in that order).
Storage storage_of(const Tensor& t, const char* name, std::initializer_list<DType> allowed) {
  std::string names;
  for (DType d : allowed) {
    if (t.dtype() == d) return d == DType::kF32 ? Storage::kF32 : (d == DType::kBF16 ? Storage::kBF16 : Storage::kF16);
    names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
  }
  throw UnsupportedError(std::string(kOp) + ": " + name + " in " + dtype_name(t.dtype()) +
                         " is not supported; use " + names);
}

// Segments inside [0, numel) that do not overlap: chunks of different segments then never touch
// the same element, so they can run on any thread in any order.
void check_segments(std::span<const ParamSegment> segments, int64_t numel) {
  std::vector<ParamSegment> sorted;
  for (const ParamSegment& s : segments) {
    if (s.offset < 0 || s.length < 0 || s.offset > numel || s.length > numel - s.offset) {
      throw ShapeError(std::string(kOp) + ": segment [" + std::to_string(s.offset) + ", +" +
                       std::to_string(s.length) + ") is outside the " + std::to_string(numel) +
                       "-element partition");
    }
    if (s.length > 0) sorted.push_back(s);  // an empty segment overlaps nothing
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamSegment& a, const ParamSegment& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < sorted.size(); ++i) {
    const ParamSegment& prev = sorted[i - 1];
    if (sorted[i].offset < prev.offset + prev.length) {
      throw ShapeError(std::string(kOp) + ": segments [" + std::to_string(prev.offset) + ", +" +
                       std::to_string(prev.length) + ") and [" + std::to_string(sorted[i].offset) +
                       ", +" + std::to_string(sorted[i].length) +
                       ") overlap; each element may be updated once per step");
    }
  }
}

struct Chunk {
  size_t segment;
  int64_t begin;  // element of the partition
  int64_t count;
};

std::vector<Chunk> split_into_chunks(std::span<const ParamSegment> segments) {
  std::vector<Chunk> chunks;
  for (size_t s = 0; s < segments.size(); ++s) {
    for (int64_t done = 0; done < segments[s].length; done += CpuOptimizerStep::kChunkElements) {
      chunks.push_back({s, segments[s].offset + done,
                        std::min(CpuOptimizerStep::kChunkElements, segments[s].length - done)});
    }
  }
  return chunks;
}

// sum(x^2) of p and u over one chunk in double, into 16 lanes by element index and then the lanes
// in order: a fixed order, so the result depends neither on the SIMD target nor on threads.
// (Each product of two floats is exact in double.)
constexpr int kSumLanes = 16;

std::array<double, 2> lamb_chunk_sums(const float* p, const float* u, int64_t count) {
  std::array<double, kSumLanes> p_lanes{}, u_lanes{};
  int64_t i = 0;
  for (; i + kSumLanes <= count; i += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) {
      p_lanes[j] += static_cast<double>(p[i + j]) * p[i + j];
      u_lanes[j] += static_cast<double>(u[i + j]) * u[i + j];
    }
  }
  for (int j = 0; i < count; ++i, ++j) {
    p_lanes[j] += static_cast<double>(p[i]) * p[i];
    u_lanes[j] += static_cast<double>(u[i]) * u[i];
  }
  double p_sum = 0.0, u_sum = 0.0;
  for (int j = 0; j < kSumLanes; ++j) {
    p_sum += p_lanes[j];
    u_sum += u_lanes[j];
  }
  return {p_sum, u_sum};
}

}  // namespace

size_t state_buffer_count(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kLamb: return 2;
    case OptimizerKind::kLion:
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kMomentum: return 1;
    case OptimizerKind::kFrozenVarianceAdam: return 2;
  }
  return 0;
}

int64_t step_traffic_bytes(OptimizerKind kind, const CpuStepBuffers& buffers) {
  const auto size = [](const Tensor& t) { return t.defined() ? static_cast<int64_t>(dtype_size(t.dtype())) : 0; };
  int64_t state = 0;
  for (const Tensor& s : buffers.state) state += size(s);
  // master and state are read and written, the gradient read, the copy written.
  int64_t per_element = 2 * size(buffers.master) + size(buffers.grads) + 2 * state + size(buffers.param_copy);
  // Lamb's first pass reads master, gradient and state once more.
  if (kind == OptimizerKind::kLamb) per_element += size(buffers.master) + size(buffers.grads) + state;
  return per_element * buffers.master.numel();
}

CpuOptimizerStep::CpuOptimizerStep(OptimizerKind kind, int threads) : kind_(kind), threads_(threads) {
  ZERO_CHECK(threads >= 0, "thread count " << threads << " must be >= 0 (0: OpenMP's default)");
  if (kind == OptimizerKind::kMomentum || kind == OptimizerKind::kFrozenVarianceAdam) {
    // 1-bit Adam runs at ZeRO stage 0, where nothing is offloaded (the config check says so).
    throw UnsupportedError(std::string(kind_name(kind)) + " has no offloaded CPU step; 1-bit "
                           "Adam runs at ZeRO stage 0 without offload_optimizer");
  }
}

void CpuOptimizerStep::step(const CpuStepBuffers& buffers, std::span<const ParamSegment> segments,
                            const backend::OptimizerHyper& hyper, double grad_scale, double clip_coefficient) {
  ZERO_CHECK(hyper.grad_scale == 1.0,
             "" "the offloaded step takes its scales as grad_scale and clip_coefficient, not "
             "OptimizerHyper::grad_scale (" << hyper.grad_scale << ")");
  require_host_buffer(buffers.master, "master");
  if (buffers.master.dtype() != DType::kF32) {
    throw UnsupportedError(std::string(kOp) + ": master weights in " + dtype_name(buffers.master.dtype()) +
                           " are not supported; they must be f32");
  }
  const int64_t n = buffers.master.numel();
  require_host_buffer(buffers.grads, "grads");
  require_numel(buffers.grads, "grads", n);
  kernels::ChunkBuffers b;
  b.master = buffers.master.data<float>();
  b.grads = buffers.grads.raw_data();
  b.grad_storage = storage_of(buffers.grads, "grads", {DType::kF32, DType::kBF16, DType::kF16});
  const size_t states = state_buffer_count(kind_);
  if (buffers.state.size() != states) {
    throw ShapeError(std::string(kOp) + ": " + kind_name(kind_) + " takes " + std::to_string(states) +
                     " state buffers, got " + std::to_string(buffers.state.size()));
  }
  for (size_t i = 0; i < states; ++i) {
    const Tensor& s = buffers.state[i];
    require_host_buffer(s, "state");
    require_numel(s, "state", n);
    if (s.dtype() != buffers.state.front().dtype()) {
      throw UnsupportedError(std::string(kOp) + ": state buffers in " + dtype_name(buffers.state.front().dtype()) +
                             " and " + dtype_name(s.dtype()) + " mixed; store all of them in one dtype");
    }
    b.state[i] = s.raw_data();
    b.state_storage = storage_of(s, "state", {DType::kF32, DType::kBF16});
  }
  if (buffers.param_copy.defined()) {
    require_host_buffer(buffers.param_copy, "param_copy");
    require_numel(buffers.param_copy, "param_copy", n);
    b.param_copy = buffers.param_copy.raw_data();
    b.copy_storage = storage_of(buffers.param_copy, "param_copy", {DType::kBF16, DType::kF16});
  }
  ZERO_CHECK(std::isfinite(grad_scale) && std::isfinite(clip_coefficient),
             "grad_scale " << grad_scale << " and clip_coefficient " << clip_coefficient << " must be finite");
  b.grad_scale = static_cast<float>(grad_scale);
  b.clip_coefficient = static_cast<float>(clip_coefficient);
  check_segments(segments, n);

  const std::vector<Chunk> chunks = split_into_chunks(segments);
  const auto chunk_count = static_cast<int64_t>(chunks.size());
  const int threads = threads_ > 0 ? threads_ : omp_get_max_threads();
  // Constants with and without weight decay; each segment's flag picks one.
  const double decay[2] = {0.0, hyper.weight_decay};
  const auto wd_index = [&](const Chunk& c) { return segments[c.segment].weight_decay ? 1 : 0; };

  switch (kind_) {
    case OptimizerKind::kAdam: {
      const kernels::AdamConstants c[2] = {kernels::adam_constants(hyper, decay[0]),
                                           kernels::adam_constants(hyper, decay[1])};
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < chunk_count; ++k) {
        kernels::adam_chunk(b, chunks[k].begin, chunks[k].count, c[wd_index(chunks[k])]);
      }
      break;
    }
    case OptimizerKind::kLion: {
      const kernels::LionConstants c[2] = {kernels::lion_constants(hyper, decay[0]),
                                           kernels::lion_constants(hyper, decay[1])};
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < chunk_count; ++k) {
        kernels::lion_chunk(b, chunks[k].begin, chunks[k].count, c[wd_index(chunks[k])]);
      }
      break;
    }
    case OptimizerKind::kAdagrad: {
      const kernels::AdagradConstants c[2] = {kernels::adagrad_constants(hyper, decay[0]),
                                              kernels::adagrad_constants(hyper, decay[1])};
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < chunk_count; ++k) {
        kernels::adagrad_chunk(b, chunks[k].begin, chunks[k].count, c[wd_index(chunks[k])]);
      }
      break;
    }
    case OptimizerKind::kLamb: {
      const kernels::LambConstants c[2] = {kernels::lamb_constants(hyper, decay[0]),
                                           kernels::lamb_constants(hyper, decay[1])};
      // Pass 1: per-chunk sums of p^2 and u^2 (reads only).
      lamb_direction_.resize(static_cast<size_t>(threads) * kChunkElements);
      std::vector<std::array<double, 2>> sums(chunks.size());
      float* scratch = lamb_direction_.data();
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < chunk_count; ++k) {
        float* u = scratch + static_cast<int64_t>(omp_get_thread_num()) * kChunkElements;
        kernels::lamb_direction_chunk(b, chunks[k].begin, chunks[k].count, c[wd_index(chunks[k])], u);
        sums[k] = lamb_chunk_sums(b.master + chunks[k].begin, u, chunks[k].count);
      }
      // Per segment: the chunks' sums in order, then DeepSpeed's clamped trust ratio.
      std::vector<double> p_norm_sq(segments.size(), 0.0), u_norm_sq(segments.size(), 0.0);
      for (size_t k = 0; k < chunks.size(); ++k) {
        p_norm_sq[chunks[k].segment] += sums[k][0];
        u_norm_sq[chunks[k].segment] += sums[k][1];
      }
      std::vector<float> step_size(segments.size());
      for (size_t s = 0; s < segments.size(); ++s) {
        double trust = 1.0;
        if (p_norm_sq[s] > 0.0 && u_norm_sq[s] > 0.0) {
          trust = std::clamp(std::sqrt(p_norm_sq[s]) / std::sqrt(u_norm_sq[s]), hyper.lamb_min_coeff,
                             hyper.lamb_max_coeff);
        }
        step_size[s] = static_cast<float>(hyper.lr * trust);
      }
      // Pass 2: the update.
#pragma omp parallel for schedule(static) num_threads(threads)
      for (int64_t k = 0; k < chunk_count; ++k) {
        kernels::lamb_apply_chunk(b, chunks[k].begin, chunks[k].count, c[wd_index(chunks[k])],
                                  step_size[chunks[k].segment]);
      }
      break;
    }
    case OptimizerKind::kMomentum:
    case OptimizerKind::kFrozenVarianceAdam:
      ZERO_CHECK(false, << kind_name(kind_) << " reached the offloaded step (refused at "
                               "construction)");
  }
}

}  // namespace zero::offload
