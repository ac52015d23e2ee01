// Which kernels the tensor-core attention (cuda_attention_mma.cu) runs, for A/B runs on a GPU
// and for the tests that compare the choices bit for bit: every choice gives the same bytes.
// Host-only; not thread-safe against concurrent launches (set a choice before, not during, a
// forward or backward).
#pragma once

#include <optional>

namespace zero::backend::cuda {

enum class AttentionForwardKernels {
  kV1,  // 16 query rows a warp: 8 warps (128 rows) a block, 4 for sequences of 128 or less
  // 32 query rows a warp in two 16-row tiles, 4 warps (128 rows) a block, for sequences over 128:
  // every V fragment read from shared memory feeds two products, not one, and a warp's P V
  // chains are twice as long (towards the FlashAttention-2 shape). Same per-row arithmetic in
  // the same order as kV1.
  kV2TwoRowTiles,
};

enum class AttentionBackwardKernels {
  kV1,  // mma_attention_dq + mma_attention_dkv (the default)
  // mma_attention_dkv_v2 and, where it has a configuration, mma_attention_dq_v2 (same results,
  // bit for bit; cuda_attention_mma_backward_v2.cu), in three shapes:
  kV2,            // 4 warps, 32 queries per part
  kV2Hoisted,     // 4 warps, K and V fragments in registers (D = 128: K, 16 queries a part)
  kV2EightWarps,  // 8 warps (128 keys a block), 32 queries per part
};

// Where the backward's dQ kernel gets dS = P (dP - delta) from.
enum class AttentionDqSource {
  kRecompute,  // it recomputes S = Q K^T and dP = dO V^T (the default)
  // The dK/dV kernel (whichever ZERO_CUDA_ATTENTION_BWD picks) also stores its dS (bf16/f16, as
  // rounded for its dK product) to a scratch of attention_backward_ds_bytes, and dQ = dS K runs
  // from it after (mma_attention_dq_from_ds): 5 products of 64 x 64 x D a tile pair instead of 7,
  // for 2 bytes a pair written and read. dK and dV keep their bytes; dQ sums the same products
  // in the same order from dS computed transposed (bit-identical where the tensor cores add a
  // product and its transpose alike, as the simulator does).
  kStoredDs,
};

// The choices in effect: the one the setter gave, else the environment's, read once on the first
// call (any value not listed throws ConfigError naming the variable and the values it takes):
//   ZERO_CUDA_ATTENTION_FWD: "v1" or unset: kV1, "v2": kV2TwoRowTiles;
//   ZERO_CUDA_ATTENTION_BWD: "v1" or unset: kV1, "v2": kV2, "v2-hoist": kV2Hoisted,
//                            "v2-w8": kV2EightWarps;
//   ZERO_CUDA_ATTENTION_DQ: "recompute" or unset: kRecompute, "stored-ds": kStoredDs.
AttentionForwardKernels attention_forward_kernels();
AttentionBackwardKernels attention_backward_kernels();
AttentionDqSource attention_dq_source();

// Override the environment's choice (std::nullopt: back to it). For tests.
void set_attention_forward_kernels(std::optional<AttentionForwardKernels> kernels);
void set_attention_backward_kernels(std::optional<AttentionBackwardKernels> kernels);
void set_attention_dq_source(std::optional<AttentionDqSource> source);

}  // namespace zero::backend::cuda
