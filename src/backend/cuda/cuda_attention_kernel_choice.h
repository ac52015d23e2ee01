// Which kernels the tensor-core attention (cuda_attention_mma.cu) runs. The defaults are the
// ones an H200 measured fastest (bench/gpu_speed_notes.md, attempt 9: commit beee794, the
// llama-1b and gpt2-124m workloads); the environment and the setters keep the others selectable
// for A/B runs and for the tests that compare the choices bit for bit (every choice gives the
// same bytes of out, lse, dK and dV; a stored-dS dQ is within a few roundings of a recomputed one).
// Host-only; not thread-safe against concurrent launches (set a choice before, not during, a
// forward or backward).
#pragma once

#include <cstdint>
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
  // mma_attention_dkv_v2 with the warp's K (and, at D = 64, V) fragments held in registers, and
  // at D = 64 a dQ kernel with its Q/dO fragments in registers (D = 128: v1's dQ kernel). The
  // default: dK/dV 2.7 ms faster than v1's on the llama (16 layers) with a stored dS.
  kV2Hoisted,
  kV1,  // mma_attention_dq + mma_attention_dkv: the simplest, the variants' bit-for-bit reference
  // mma_attention_dkv_v2 and mma_attention_dq_v2 with 8 warps a block (128 keys, 32 queries a
  // part): kept as the candidate for the recomputed dQ of long sequences, where its 8-warp dQ
  // has not been measured apart from its dK/dV (bench/gpu_speed_notes.md, attempt 9).
  kV2EightWarps,
};

// Where the backward's dQ kernel gets dS = P (dP - delta) from.
enum class AttentionDqSource {
  kRecompute,  // it recomputes S = Q K^T and dP = dO V^T: no memory beyond the outputs
  // The dK/dV kernel also stores its dS (bf16/f16, as rounded for its dK product) to a scratch of
  // attention_backward_ds_bytes, and dQ = dS K runs from it after (mma_attention_dq_from_ds):
  // 5 products of 64 x 64 x D a tile pair instead of 7, for 2 bytes a pair written and read.
  // dK and dV keep their bytes; dQ sums the same products in the same order from dS computed
  // transposed (bit-identical where the tensor cores add a product and its transpose alike, as
  // the simulator does). The scratch is the causal triangle of 64 x 64 tiles of each batch x
  // head slice, about T^2 bytes a slice: T / (2 D) times the bytes of q.
  kStoredDs,
};

// The stored dS is the default while its scratch is at most 16 times the bytes of q, i.e. for
// sequences up to 32 x head_dim tokens (D = 128: 4096; D = 64: 2048); longer ones recompute, so
// the backward's memory stays linear in the sequence (the long-sequence work relies on that).
inline constexpr int64_t kStoredDsMaxSeqPerHeadDim = 32;

// The defaults by shape (what the getters below return with no override and the variable unset
// or "auto"): the forward's v2 at D = 128 (6.1-6.3 ms against v1's 7.2-7.7 on the llama), v1 at
// D = 64 (2.00 ms against v2's 2.09-2.14 on GPT-2); the stored dS up to the length above.
AttentionForwardKernels default_attention_forward_kernels(int64_t head_dim);
AttentionDqSource default_attention_dq_source(int64_t seq, int64_t head_dim);

// The choices in effect for a call: the one the setter gave, else the environment's, read once
// on the first call (any value not listed throws ConfigError naming the variable and the values
// it takes), else the default:
//   ZERO_CUDA_ATTENTION_FWD: "auto" or unset: by head dimension; "v1": kV1, "v2": kV2TwoRowTiles;
//   ZERO_CUDA_ATTENTION_BWD: "v2-hoist" or unset: kV2Hoisted; "v1": kV1; "v2-w8": kV2EightWarps;
//   ZERO_CUDA_ATTENTION_DQ: "auto" or unset: by sequence length; "recompute", "stored-ds".
AttentionForwardKernels attention_forward_kernels(int64_t head_dim);
AttentionBackwardKernels attention_backward_kernels();
AttentionDqSource attention_dq_source(int64_t seq, int64_t head_dim);

// Override the environment's choice (std::nullopt: back to it). For tests.
void set_attention_forward_kernels(std::optional<AttentionForwardKernels> kernels);
void set_attention_backward_kernels(std::optional<AttentionBackwardKernels> kernels);
void set_attention_dq_source(std::optional<AttentionDqSource> source);

}  // namespace zero::backend::cuda
