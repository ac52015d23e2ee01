// Internal to src/offload: the per-chunk SIMD kernels behind CpuOptimizerStep, one entry point
// per optimizer kind, each dispatched at run time to the best Highway target of the CPU
// (cpu_optimizer_kernels.cpp). A chunk is a run [begin, begin + count) of one ParamSegment; the
// caller (cpu_optimizer.cpp) validates the buffers, splits segments into chunks and spreads the
// chunks over OpenMP threads. Every kernel is the f32 sequence of Backend::optimizer_update
// (backend/cpu/cpu_optimizers.cpp), operation for operation, so the constants below are computed
// exactly as that file computes them.
#pragma once
#include <cstdint>

#include "backend/optimizer_kernels.h"

namespace zero::offload::kernels {

// How the elements of one buffer are stored. 16-bit values are read exactly and written rounded
// to nearest even (core/half.h's rules, NaN kept quiet, subnormals kept).
enum class Storage : uint8_t { kF32, kBF16, kF16 };

// Base pointers of the flat partition (element 0); a kernel touches [begin, begin + count) only.
struct ChunkBuffers {
  float* master = nullptr;
  const void* grads = nullptr;
  Storage grad_storage = Storage::kF32;
  void* state[2] = {nullptr, nullptr};
  Storage state_storage = Storage::kF32;  // kF32 or kBF16
  void* param_copy = nullptr;             // nullptr: no 16-bit copy
  Storage copy_storage = Storage::kBF16;  // kBF16 or kF16
  // The gradient is read as (g * grad_scale) * clip_coefficient, two f32 roundings as two
  // Backend::scale calls make; a factor of 1 is skipped (multiplying by 1 changes nothing).
  float grad_scale = 1.0f;
  float clip_coefficient = 1.0f;
};

// Adam/AdamW for one segment (weight decay `wd` already chosen by the segment's flag).
struct AdamConstants {
  float b1, b2, one_minus_b1, one_minus_b2, step_size, inv_sqrt_bc2, eps, decay, l2;
  bool decoupled;
};
AdamConstants adam_constants(const backend::OptimizerHyper& h, double wd);

// Lamb: the update direction u = m_hat / (sqrt(v_hat) + eps) + wd p, then p -= step u.
struct LambConstants {
  float b1, b2, one_minus_b1, one_minus_b2, eps, wd, inv_bc1, inv_bc2;
};
LambConstants lamb_constants(const backend::OptimizerHyper& h, double wd);

struct LionConstants {
  float b1, b2, one_minus_b1, one_minus_b2, lr, keep;
};
LionConstants lion_constants(const backend::OptimizerHyper& h, double wd);

struct AdagradConstants {
  float lr, eps, l2;
};
AdagradConstants adagrad_constants(const backend::OptimizerHyper& h, double wd);

void adam_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdamConstants& c);
// Lamb's first pass: reads master, grads and state (writes nothing there) and stores the
// direction u of elements [begin, begin + count) into direction[0, count).
void lamb_direction_chunk(const ChunkBuffers& b, int64_t begin, int64_t count,
                          const LambConstants& c, float* direction);
// Lamb's second pass: recomputes m, v and u, writes them and p -= step * u.
void lamb_apply_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LambConstants& c,
                      float step);
void lion_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const LionConstants& c);
void adagrad_chunk(const ChunkBuffers& b, int64_t begin, int64_t count, const AdagradConstants& c);

}  // namespace zero::offload::kernels
