// Matrix products of the CUDA backend through cuBLASLt, on row-major data. f32 products use
// CUBLAS_COMPUTE_32F - true f32, never TF32 - so they match the CPU backend to f32 rounding;
// bf16/f16 products read 16-bit operands, accumulate in f32 and round the result once.
//
// cuBLASLt is column-major: a row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so the operands are handed over swapped, each with the transpose flag its storage needs.
//
// Plans are cached (cuda_matmul_plan_cache.h): the descriptors, layouts and the algorithm
// cublasLtMatmulAlgoGetHeuristic picked are made once per distinct product (shape, strides,
// dtype, bias epilogue, operand alignments, workspace size) and reused, and so is a "no
// algorithm" answer. A training step repeats a small fixed set of products, so after the first
// step no call asks the heuristic; the cache keeps the kMaxPlans most recently used plans.
//
// Threading: a CublasLtMatmul (its handle, cache and cached descriptors, whose bias pointer is
// rewritten on every call) is used from one host thread at a time - the thread driving its
// CudaBackend - and serves that backend's device only (the heuristic's answer is per GPU model).
// Work it enqueued may still be running on any stream when run() returns or a plan is evicted:
// cuBLASLt reads the descriptors while enqueueing, not on the device, so a captured CUDA graph
// keeps the pointers (bias included) that were passed while it was captured.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "backend/cuda/cuda_gemm_operands.h"
#include "backend/cuda/cuda_matmul_plan_cache.h"

namespace zero::backend::cuda {

class CublasLtMatmul {
 public:
  // Plans kept; GPT-2 training needs a few dozen (one per distinct product and alignment).
  static constexpr size_t kMaxPlans = 256;
  static constexpr int kMaxAutotuneCandidates = 16;

  // The algorithms a plan times before it keeps one, from ZERO_CUDA_GEMM_AUTOTUNE: unset or 1,
  // the heuristic's first (the default, deterministic); 2 to kMaxAutotuneCandidates, the
  // heuristic's first that many, each timed on the plan's first call (tune()). An A/B knob for a
  // GPU session: timing noise can pick another algorithm from one run to the next, and another
  // algorithm rounds differently, so autotuned runs are not bit-reproducible. Anything else
  // throws ConfigError naming the variable.
  static int autotune_candidates_from_environment();

  explicit CublasLtMatmul(int autotune_candidates = autotune_candidates_from_environment());
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;

  // c = alpha op(a) op(b) + beta c (+ bias). Returns false, having enqueued nothing, when
  // cuBLASLt has no algorithm for the request (the caller then drops the bias epilogue or copies
  // unaligned operands to aligned buffers); throws for any other failure. m, n, k > 0.
  // `workspace` is device memory of `workspace_bytes`.
  // Autotuning (autotune candidates > 1): on a plan's first call, before the product, each
  // candidate algorithm writes it to device memory that `tuning_scratch(bytes)` provides (op.c's
  // extent: m rows of ldc elements in c's type; beta 0, so op.c is untouched; the memory must
  // stay valid until run returns), a warm-up and kTimedRuns timed calls between two events, and
  // the fastest becomes the plan's algorithm. That synchronises `stream` (once per plan, in the
  // first training step). Without autotuning tuning_scratch is never called.
  static constexpr int kTimedRuns = 3;
  using TuningScratch = std::function<void*(size_t bytes)>;
  bool run(const GemmOperands& op, void* workspace, size_t workspace_bytes, cudaStream_t stream,
           const TuningScratch& tuning_scratch = {});

  // How many calls found their plan cached / made a new one (the heuristic ran), for tests and
  // profiling.
  uint64_t plan_hits() const { return plan_hits_; }
  uint64_t plan_misses() const { return plan_misses_; }
  uint64_t tunings() const { return tunings_; }  // plans tuned
  size_t cached_plans() const { return plans_.size(); }

 private:
  struct Plan;  // cuda_matmul.cpp: RAII descriptors and the chosen algorithm

  // The plan for `key`, asking the heuristic for `candidates` algorithms; `bias` and `aux` are
  // the calling op's bias and GELU-epilogue pointers.
  static std::unique_ptr<Plan> make_plan(cublasLtHandle_t handle, const MatmulPlanKey& key,
                                         const void* bias, void* aux, int candidates);
  // Times plan's candidates (see run) into scratch_c and keeps the fastest.
  void tune(Plan& plan, const GemmOperands& op, void* scratch_c, void* workspace,
            size_t workspace_bytes, cudaStream_t stream);

  cublasLtHandle_t handle_ = nullptr;
  int autotune_candidates_ = 1;
  // unique_ptr keeps Plan's definition in the .cpp; the cache is constructed and destroyed there
  // (so no initialiser here).
  MatmulPlanCache<std::unique_ptr<Plan>> plans_;
  uint64_t plan_hits_ = 0, plan_misses_ = 0, tunings_ = 0;
};

}  // namespace zero::backend::cuda
