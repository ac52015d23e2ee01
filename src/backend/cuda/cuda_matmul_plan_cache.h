// The cache of cuBLASLt matmul plans (descriptors, layouts and the algorithm the heuristic chose)
// that CublasLtMatmul (cuda_matmul.h) keeps, so a training step's few hundred products pay for
// cublasLtMatmulAlgoGetHeuristic once per distinct product instead of once per call.
//
// MatmulPlanKey holds everything the descriptors and the heuristic's answer depend on; what is
// not in it (the a/b/c/bias addresses beyond their alignment, alpha, the beta value, the
// workspace address, the stream) must not change the plan. In particular:
//  - Addresses enter as their alignment class (the largest power of two <= 256 dividing them):
//    the preference tells the heuristic those alignments, and the heuristic reads the bias
//    pointer's value for its alignment (cublasLt.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER), so the
//    bias alignment is keyed too. The bias pointer itself is set on the cached descriptor before
//    each call.
//  - cublasLtMatmulAlgoGetHeuristic takes no alpha or beta, so its answer cannot depend on them;
//    "beta is zero" is keyed anyway (it costs at most a second plan per shape) so a plan chosen
//    for an overwrite is never reused for an accumulation should a later cuBLASLt look at it.
//
// Header-only and free of CUDA headers: the key and the cache are tested without a GPU or the
// toolkit (tests/backend/test_matmul_plan_cache.cpp).
//
// Threading: not synchronised. A cache belongs to one CublasLtMatmul, which belongs to one
// CudaBackend, which one host thread drives (cuda_backend.h); use it from that thread only.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>

#include "backend/cuda/cuda_gemm_operands.h"
#include "core/check.h"
#include "core/dtype.h"

namespace zero::backend::cuda {

// The largest power of two (at most 256) dividing the address, in bytes: the alignment cuBLASLt
// may assume for an operand there (null counts as 256-byte aligned).
inline uint32_t pointer_alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

struct MatmulPlanKey {
  DType dtype = DType::kF32;
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0;       // elements
  int64_t lda = 0, ldb = 0, ldc = 0;  // elements
  bool beta_zero = true;
  bool c_f32 = false;
  bool bias = false;                   // the bias epilogue
  DType bias_dtype = DType::kF32;      // kF32 when !bias, so bias-free keys compare equal
  uint32_t bias_alignment = 0;         // bytes; 0 when !bias
  uint32_t a_alignment = 0, b_alignment = 0, c_alignment = 0;  // bytes (c is also d)
  uint64_t workspace_bytes = 0;
  GemmOperands::Epilogue epilogue = GemmOperands::Epilogue::kNone;  // the GELU epilogues
  int64_t ld_aux = 0;               // elements; 0 without a GELU epilogue
  uint32_t aux_alignment = 0;       // bytes; 0 without a GELU epilogue

  bool operator==(const MatmulPlanKey&) const = default;
};

// The key of `op` run with a workspace of `workspace_bytes`. The bias has op's dtype (the only
// bias cuda_matmul.cpp fuses).
inline MatmulPlanKey make_plan_key(const GemmOperands& op, size_t workspace_bytes) {
  MatmulPlanKey key;
  key.dtype = op.dtype;
  key.transpose_a = op.transpose_a;
  key.transpose_b = op.transpose_b;
  key.m = op.m;
  key.n = op.n;
  key.k = op.k;
  key.lda = op.lda;
  key.ldb = op.ldb;
  key.ldc = op.ldc;
  key.beta_zero = op.beta == 0.0f;
  key.c_f32 = op.c_f32;
  key.bias = op.bias != nullptr;
  if (key.bias) {
    key.bias_dtype = op.dtype;
    key.bias_alignment = pointer_alignment(op.bias);
  }
  key.a_alignment = pointer_alignment(op.a);
  key.b_alignment = pointer_alignment(op.b);
  key.c_alignment = pointer_alignment(op.c);
  key.workspace_bytes = workspace_bytes;
  key.epilogue = op.epilogue;
  if (op.epilogue != GemmOperands::Epilogue::kNone) {
    key.ld_aux = op.ld_aux;
    key.aux_alignment = pointer_alignment(op.aux);
  }
  return key;
}

struct MatmulPlanKeyHash {
  size_t operator()(const MatmulPlanKey& key) const noexcept {
    uint64_t h = 0x243f6a8885a308d3ULL;
    const auto mix = [&h](uint64_t value) {
      // Combine, then scramble (splitmix64's finaliser) so nearby shapes spread over buckets.
      h ^= value + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
      h ^= h >> 30;
      h *= 0xbf58476d1ce4e5b9ULL;
      h ^= h >> 27;
      h *= 0x94d049bb133111ebULL;
      h ^= h >> 31;
    };
    mix(static_cast<uint64_t>(key.dtype));
    mix(static_cast<uint64_t>(key.transpose_a) | static_cast<uint64_t>(key.transpose_b) << 1 |
        static_cast<uint64_t>(key.beta_zero) << 2 | static_cast<uint64_t>(key.bias) << 3 |
        static_cast<uint64_t>(key.c_f32) << 4);
    mix(static_cast<uint64_t>(key.m));
    mix(static_cast<uint64_t>(key.n));
    mix(static_cast<uint64_t>(key.k));
    mix(static_cast<uint64_t>(key.lda));
    mix(static_cast<uint64_t>(key.ldb));
    mix(static_cast<uint64_t>(key.ldc));
    mix(static_cast<uint64_t>(key.bias_dtype));
    mix(static_cast<uint64_t>(key.bias_alignment) << 32 | key.a_alignment);
    mix(static_cast<uint64_t>(key.b_alignment) << 32 | key.c_alignment);
    mix(key.workspace_bytes);
    mix(static_cast<uint64_t>(key.epilogue) << 32 | key.aux_alignment);
    mix(static_cast<uint64_t>(key.ld_aux));
    return static_cast<size_t>(h);
  }
};

// A least-recently-used map from MatmulPlanKey to Plan (CublasLtMatmul's RAII plan; any movable
// type in tests). A found or inserted plan stays at the same address until it is evicted, which
// happens only inside a later insert.
template <class Plan>
class MatmulPlanCache {
 public:
  explicit MatmulPlanCache(size_t capacity) : capacity_(capacity) {
    ZERO_CHECK(capacity > 0, "a matmul plan cache needs room for one plan");
  }
  MatmulPlanCache(const MatmulPlanCache&) = delete;
  MatmulPlanCache& operator=(const MatmulPlanCache&) = delete;

  // The plan for `key`, now the most recently used; nullptr when there is none.
  Plan* find(const MatmulPlanKey& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->plan;
  }

  // Stores `plan` for `key` (which must be absent), evicting the least recently used plan when
  // the cache is full.
  Plan& insert(const MatmulPlanKey& key, Plan plan) {
    ZERO_CHECK(!index_.contains(key), "a matmul plan is inserted once per key");
    if (entries_.size() == capacity_) {
      index_.erase(entries_.back().key);
      entries_.pop_back();
      ++evictions_;
    }
    entries_.push_front(Entry{key, std::move(plan)});
    index_.emplace(key, entries_.begin());
    return entries_.front().plan;
  }

  // Drops every plan (their destructors run in most-recently-used order).
  void clear() {
    index_.clear();
    entries_.clear();
  }

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    MatmulPlanKey key;
    Plan plan;
  };
  size_t capacity_;
  uint64_t evictions_ = 0;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<MatmulPlanKey, typename std::list<Entry>::iterator, MatmulPlanKeyHash> index_;
};

}  // namespace zero::backend::cuda
