// The attention kernel choices (cuda_attention_kernel_choice.h): a test's override, else the
// environment's value, parsed once, else the measured default for the call's shape.
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

// The value `variable` names among `choices`; unset: the first one's value (std::nullopt for
// "auto": the default by shape).
template <typename Kernels>
std::optional<Kernels> parse_choice(
    const char* variable,
    std::initializer_list<std::pair<std::string_view, std::optional<Kernels>>> choices) {
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

AttentionForwardKernels default_attention_forward_kernels(int64_t head_dim) {
  return head_dim >= 128 ? AttentionForwardKernels::kV2TwoRowTiles : AttentionForwardKernels::kV1;
}

AttentionDqSource default_attention_dq_source(int64_t seq, int64_t head_dim) {
  return seq <= kStoredDsMaxSeqPerHeadDim * head_dim ? AttentionDqSource::kStoredDs
                                                     : AttentionDqSource::kRecompute;
}

AttentionForwardKernels attention_forward_kernels(int64_t head_dim) {
  const int chosen = forward_override.load();
  if (chosen >= 0) return static_cast<AttentionForwardKernels>(chosen);
  static const std::optional<AttentionForwardKernels> from_environment =
      parse_choice<AttentionForwardKernels>("ZERO_CUDA_ATTENTION_FWD",
                                            {{"auto", std::nullopt},
                                             {"v1", AttentionForwardKernels::kV1},
                                             {"v2", AttentionForwardKernels::kV2TwoRowTiles}});
  return from_environment.value_or(default_attention_forward_kernels(head_dim));
}

AttentionBackwardKernels attention_backward_kernels() {
  const int chosen = backward_override.load();
  if (chosen >= 0) return static_cast<AttentionBackwardKernels>(chosen);
  static const std::optional<AttentionBackwardKernels> from_environment =
      parse_choice<AttentionBackwardKernels>(
          "ZERO_CUDA_ATTENTION_BWD", {{"v2-hoist", AttentionBackwardKernels::kV2Hoisted},
                                      {"v1", AttentionBackwardKernels::kV1},
                                      {"v2-w8", AttentionBackwardKernels::kV2EightWarps}});
  return *from_environment;
}

AttentionDqSource attention_dq_source(int64_t seq, int64_t head_dim) {
  const int chosen = dq_source_override.load();
  if (chosen >= 0) return static_cast<AttentionDqSource>(chosen);
  static const std::optional<AttentionDqSource> from_environment =
      parse_choice<AttentionDqSource>("ZERO_CUDA_ATTENTION_DQ",
                                      {{"auto", std::nullopt},
                                       {"recompute", AttentionDqSource::kRecompute},
                                       {"stored-ds", AttentionDqSource::kStoredDs}});
  return from_environment.value_or(default_attention_dq_source(seq, head_dim));
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
