// CpuOptimizerStep: the optimizer update of ZeRO-Offload, run on the host over one flat
// partition, as DeepSpeed's cpu_adam does. One fused pass per element reads the f32 master
// weight, the optimizer state and the gradient (f32, bf16 or f16, times grad_scale) and writes
// the master weight, the state and, optionally, the 16-bit parameter copy the device receives
// (bf16 or f16, rounded to nearest even). Adam/AdamW, Lion and Adagrad are one pass; Lamb needs
// the norms of each segment first, so it reads the partition once more (nothing is written in
// that first pass).
//
// SIMD: Highway with runtime dispatch (simd_target.h says which target runs). Threads: OpenMP
// over fixed chunks of kChunkElements inside each segment, so results never depend on the
// thread count.
//
// Results (checked by tests/offload): the formulas, the f32 constants and the order of f32
// operations are those of Backend::optimizer_update on the CPU backend
// (backend/cpu/cpu_optimizers.cpp; bf16 state widened and rounded back as optim::Optimizer does),
// evaluated without fused multiply-add and with exact sqrt and division. So:
//  * Adam/AdamW, Lion, Adagrad: bit-identical to that reference compiled without contraction
//    (any build without FMA in its baseline, e.g. ZERO_NATIVE=OFF). A reference compiled with
//    -march=native lets GCC fuse a*b+c inside it, which changes a result by an ulp of one
//    product (more where terms cancel; tests/offload states the bounds); the step itself gives
//    the same bits on every SIMD target and the scalar fallback. Compiling
//    backend/cpu/cpu_optimizers.cpp with -ffp-contract=off would make the two equal everywhere.
//  * Lamb: moments bit-identical as above; the trust ratio sums p^2 and u^2 in double in a fixed
//    16-lane order per chunk (the reference sums serially), so it may differ in the last bits of
//    the double ratio and then the parameters by about an ulp of the update (the tests have not
//    seen it happen: lr * trust rounded to f32 absorbs such differences).
//  * grad_scale, clip_coefficient: the gradient is multiplied by float(grad_scale), then by
//    float(clip_coefficient), before anything else: exactly Backend::scale(grads, grad_scale),
//    Backend::scale(grads, clip_coefficient), then the update (a factor of 1 is skipped).
//
// Memory: plain host memory owned by the caller (pageable or pinned; Tensor::borrow wraps memory
// from any allocator). No alignment is required; 64-byte aligned buffers avoid split cache
// lines and are faster.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "backend/optimizer_kernels.h"
#include "core/tensor.h"

namespace zero::offload {

// The buffers of one partition, all contiguous host tensors with the same number of elements.
// Tensors are handles: the step writes through them into the caller's memory.
struct CpuStepBuffers {
  Tensor master;             // f32 master weights, read and written
  Tensor grads;              // f32, bf16 or f16, read only
  std::vector<Tensor> state; // as Backend::optimizer_update: Adam/Lamb {exp_avg, exp_avg_sq},
                             // Lion {exp_avg}, Adagrad {sum_sq}; all f32 or all bf16
  Tensor param_copy;         // optional (undefined: none): bf16 or f16, written
};

// Number of state buffers `kind` needs.
size_t state_buffer_count(backend::OptimizerKind kind);

// Bytes one step reads plus writes over `numel` elements with these buffers (Lamb counts both
// passes): the figure to compare with memory bandwidth.
int64_t step_traffic_bytes(backend::OptimizerKind kind, const CpuStepBuffers& buffers);

class CpuOptimizerStep {
 public:
  // Elements per work chunk: large enough to amortise dispatch and scheduling, small enough to
  // balance threads and to keep Lamb's per-chunk direction scratch (4 bytes each) in L2.
  static constexpr int64_t kChunkElements = 16384;

  // threads: OpenMP threads per step; 0 uses omp_get_max_threads().
  explicit CpuOptimizerStep(backend::OptimizerKind kind, int threads = 0);

  backend::OptimizerKind kind() const { return kind_; }
  int threads() const { return threads_; }

  // One update of the partition. `segments` are element ranges of the partition (each with its
  // weight-decay flag); they must not overlap, and elements outside every segment are left
  // untouched (as is their 16-bit copy). `hyper.step` is the 1-based step count. The gradient is
  // read as (g * float(grad_scale)) * float(clip_coefficient): the engine's averaging/unscaling
  // multiply and its clipping multiply (Backend::scale each), fused into the read with the same
  // two roundings. Throws ShapeError for buffers that do not fit together and UnsupportedError
  // for dtypes the step does not take.
  void step(const CpuStepBuffers& buffers, std::span<const backend::ParamSegment> segments,
            const backend::OptimizerHyper& hyper, double grad_scale = 1.0, double clip_coefficient = 1.0);

 private:
  backend::OptimizerKind kind_;
  int threads_;
  std::vector<float> lamb_direction_;  // per-thread chunk scratch, reused across steps
};

}  // namespace zero::offload
