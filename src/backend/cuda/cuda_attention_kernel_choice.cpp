// The attention kernel choices (cuda_attention_kernel_choice.h): a test's override, else the
// environment's value, parsed once.
#include "backend/cuda/cuda_attention_kernel_choice.h"

#include <atomic>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace zero::backend::cuda {
namespace {

// The value `variable` names among `choices` (unset: the first one's value).
template <typename Kernels>
Kernels parse_choice(const char* variable,
                     std::initializer_list<std::pair<std::string_view, Kernels>> choices) {
  const char* value = std::getenv(variable);
  if (value == nullptr) return choices.begin()->second;
  std::string names;
  for (const auto& [name, kernels] : choices) {
    if (name == value) return kernels;
    names += (names.empty() ? "" : ", ") + std::string(name);
  }
  throw ConfigError(std::string(variable) + "=" + value + " is not a kernel choice: say one of " +
                    names + " (the first is the default), or unset it");
}

// -1: no override; otherwise the enum's value.
std::atomic<int> forward_override{-1};
std::atomic<int> backward_override{-1};
std::atomic<int> dq_source_override{-1};

}  // namespace

AttentionForwardKernels attention_forward_kernels() {
  const int chosen = forward_override.load();
  if (chosen >= 0) return static_cast<AttentionForwardKernels>(chosen);
  static const AttentionForwardKernels from_environment = parse_choice<AttentionForwardKernels>(
      "ZERO_CUDA_ATTENTION_FWD",
      {{"v1", AttentionForwardKernels::kV1}, {"v2", AttentionForwardKernels::kV2TwoRowTiles}});
  return from_environment;
}

AttentionBackwardKernels attention_backward_kernels() {
  const int chosen = backward_override.load();
  if (chosen >= 0) return static_cast<AttentionBackwardKernels>(chosen);
  static const AttentionBackwardKernels from_environment = parse_choice<AttentionBackwardKernels>(
      "ZERO_CUDA_ATTENTION_BWD", {{"v1", AttentionBackwardKernels::kV1},
                                  {"v2", AttentionBackwardKernels::kV2},
                                  {"v2-hoist", AttentionBackwardKernels::kV2Hoisted},
                                  {"v2-w8", AttentionBackwardKernels::kV2EightWarps}});
  return from_environment;
}

AttentionDqSource attention_dq_source() {
  const int chosen = dq_source_override.load();
  if (chosen >= 0) return static_cast<AttentionDqSource>(chosen);
  static const AttentionDqSource from_environment = parse_choice<AttentionDqSource>(
      "ZERO_CUDA_ATTENTION_DQ",
      {{"recompute", AttentionDqSource::kRecompute}, {"stored-ds", AttentionDqSource::kStoredDs}});
  return from_environment;
}

void set_attention_forward_kernels(std::optional<AttentionForwardKernels> kernels) {
  forward_override.store(kernels ? static_cast<int>(*kernels) : -1);
}

void set_attention_backward_kernels(std::optional<AttentionBackwardKernels> kernels) {
  backward_override.store(kernels ? static_cast<int>(*kernels) : -1);
}

void set_attention_dq_source(std::optional<AttentionDqSource> source) {
  dq_source_override.store(source ? static_cast<int>(*source) : -1);
}

}  // namespace zero::backend::cuda
