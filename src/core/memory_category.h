// What a block of memory is for. Every allocation names one, so memory claims (ZeRO's per-rank
// model-state bytes, activation peaks) can be checked by tests instead of estimated.
#pragma once
#include <cstddef>

namespace zero {

enum class MemoryCategory : int {
  kParams = 0,
  kGrads,
  kOptimizer,
  kActivations,
  kComm,
  kWorkspace,
  kOther,
};
inline constexpr size_t kNumMemoryCategories = 7;

inline const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParams: return "params";
    case MemoryCategory::kGrads: return "grads";
    case MemoryCategory::kOptimizer: return "optimizer";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kComm: return "comm";
    case MemoryCategory::kWorkspace: return "workspace";
    case MemoryCategory::kOther: return "other";
  }
  return "unknown";
}

}  // namespace zero
