// Which kernels the tensor-core attention backward (cuda_attention_mma.cu) runs, for A/B runs on
// a GPU and for the tests that compare them bit for bit. Host-only; not thread-safe against
// concurrent launches (set it before, not during, a backward).
#pragma once

#include <optional>

namespace zero::backend::cuda {

enum class AttentionBackwardKernels {
  kV1,  // mma_attention_dq + mma_attention_dkv (the default)
  // mma_attention_dkv_v2 and, where it has a configuration, mma_attention_dq_v2 (same results,
  // bit for bit; cuda_attention_mma_backward_v2.cu), in three shapes:
  kV2,            // 4 warps, 32 queries per part
  kV2Hoisted,     // 4 warps, K and V fragments in registers (D = 128: K, 16 queries a part)
  kV2EightWarps,  // 8 warps (128 keys a block), 32 queries per part
};

// The choice in effect: the one set_attention_backward_kernels gave, else the environment's
// ZERO_CUDA_ATTENTION_BWD ("v1" or unset: kV1, "v2": kV2, "v2-hoist": kV2Hoisted, "v2-w8":
// kV2EightWarps; read once, on the first call; any other value throws ConfigError naming it).
AttentionBackwardKernels attention_backward_kernels();

// Overrides the environment's choice (std::nullopt: back to it). For tests.
void set_attention_backward_kernels(std::optional<AttentionBackwardKernels> kernels);

}  // namespace zero::backend::cuda
