// The tensor-core attention's kernel choices (ZERO_CUDA_ATTENTION_FWD, _BWD and _DQ, see
// backend/cuda/cuda_attention_kernel_choice.h) against v1, on the simulator (preset cuda-sim) as
// on a GPU; test_cuda_ops.cpp checks the defaults against the CPU oracle.
//   - The forward's v2 (two row tiles a warp) runs every row's arithmetic in v1's order: the
//     same bytes of out and lse.
//   - The backward's v2 dK/dV kernels multiply the same fragments in the same order per output
//     element as v1 and skip only terms that are exact zeros: the same bytes, so any difference
//     is a bug (a fragment, mask or skip mistake), not rounding.
//   - ZERO_CUDA_ATTENTION_DQ=stored-ds: each dK/dV kernel (the same dK and dV bytes) stores dS
//     and dQ runs from it: within a few roundings of v1's dQ.
// Shapes: GQA and MQA, sliding windows that cut across 64- and 128-key blocks, sequence lengths
// that are no multiple of 64, head dims 64 and 128, bf16 and f16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "backend/cuda/cuda_attention_kernel_choice.h"
#include "backend/cuda/cuda_kernels.h"
#include "core/error.h"
#include "cuda_test_support.h"
#include "support/env_guard.h"

namespace zero::backend::cuda_test {
namespace {

using cuda::AttentionBackwardKernels;
using cuda::AttentionDqSource;
using cuda::AttentionForwardKernels;

struct VariantCase {
  int64_t batch, seq, heads, kv_heads, head_dim, window;
};

std::string describe(const VariantCase& c, DType dtype) {
  return "B=" + std::to_string(c.batch) + " T=" + std::to_string(c.seq) +
         " H=" + std::to_string(c.heads) + " KVH=" + std::to_string(c.kv_heads) +
         " D=" + std::to_string(c.head_dim) + " window=" + std::to_string(c.window) + " " +
         dtype_name(dtype);
}

// Restores the environment's choices however the test ends.
struct KernelChoiceReset {
  ~KernelChoiceReset() {
    cuda::set_attention_forward_kernels(std::nullopt);
    cuda::set_attention_backward_kernels(std::nullopt);
    cuda::set_attention_dq_source(std::nullopt);
  }
};

class CudaAttentionVariants : public CudaTest {};

TEST_F(CudaAttentionVariants, V2KernelsGiveTheBytesOfV1AndTheStoredDsPathClose) {
  const KernelChoiceReset reset;
  // Overrides, so that this test's calls leave the environment unread (the environment tests
  // below read it first when the whole binary runs in one process).
  cuda::set_attention_forward_kernels(AttentionForwardKernels::kV1);
  cuda::set_attention_dq_source(AttentionDqSource::kRecompute);
  const VariantCase cases[] = {
      {1, 37, 2, 1, 64, 0},     // one partial tile, GQA
      {2, 130, 4, 2, 64, 0},    // three 64-key blocks, two 128-key blocks
      {1, 200, 2, 2, 64, 45},   // a window that ends inside a key block
      {1, 257, 2, 1, 128, 0},   // MQA, one key past 256
      {2, 96, 2, 1, 128, 70},   // a window wider than a 64-key block
      {1, 150, 3, 3, 128, 1},   // a window of one: the diagonal alone
      {1, 192, 2, 1, 64, 130},  // a window wider than a 128-key block
  };
  const AttentionBackwardKernels variants[] = {AttentionBackwardKernels::kV2Hoisted,
                                               AttentionBackwardKernels::kV2EightWarps};
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (const VariantCase& c : cases) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      const std::string what = describe(c, dtype);
      const int64_t width = c.heads + 2 * c.kv_heads;
      const std::vector<float> qkv =
          random_values(c.batch * c.seq * width * c.head_dim, 61, -2.0f, 2.0f);
      const std::vector<float> dout = random_values(c.batch * c.seq * c.heads * c.head_dim, 62);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      // q, k, v as views into one fused buffer, as the attention block lays them out.
      Tensor fused = upload(gpu(), qkv, {c.batch, c.seq, width, c.head_dim}, dtype);
      Tensor q = fused.narrow(2, 0, c.heads);
      Tensor k = fused.narrow(2, c.heads, c.kv_heads);
      Tensor v = fused.narrow(2, c.heads + c.kv_heads, c.kv_heads);
      Tensor out =
          gpu().empty({c.batch, c.seq, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
      Tensor lse = gpu().empty({c.batch, c.heads, c.seq}, DType::kF32, MemoryCategory::kOther);
      gpu().attention_forward(out, lse, q, k, v, scale, c.window);
      Tensor tdout = upload(gpu(), dout, {c.batch, c.seq, c.heads, c.head_dim}, dtype);
      Tensor dfused =
          gpu().empty({c.batch, c.seq, width, c.head_dim}, dtype, MemoryCategory::kOther);
      Tensor dq = dfused.narrow(2, 0, c.heads);
      Tensor dk = dfused.narrow(2, c.heads, c.kv_heads);
      Tensor dv = dfused.narrow(2, c.heads + c.kv_heads, c.kv_heads);
      auto backward_bytes = [&](AttentionBackwardKernels kernels) {
        cuda::set_attention_backward_kernels(kernels);
        gpu().fill(dfused, kNaN);  // every element must be written
        gpu().attention_backward(dq, dk, dv, tdout, q, k, v, out, lse, scale, c.window);
        return download_bytes(gpu(), dfused);
      };
      const std::vector<uint8_t> v1 = backward_bytes(AttentionBackwardKernels::kV1);
      const std::vector<double> v1_values = download(gpu(), dfused);
      bool all_finite = true;
      for (double x : v1_values) all_finite = all_finite && std::isfinite(x);
      ASSERT_TRUE(all_finite) << what << ": v1 left NaN or inf in dq/dk/dv";
      for (AttentionBackwardKernels kernels : variants) {
        EXPECT_EQ(backward_bytes(kernels), v1)
            << what << ", choice " << static_cast<int>(kernels) << ": dq/dk/dv differ from v1";
      }
      // dQ from the stored dS, after each dK/dV kernel: dK and dV keep v1's bytes. dS is
      // computed transposed (K Q^T): equal bits where the tensor cores add a product and its
      // transpose alike (the simulator does), otherwise a last-bit difference in some dS
      // entries, so dQ within a few 16-bit roundings of v1's - a wrong fragment, tile or mask
      // is off by O(1).
      double dq_rms = 0.0;
      for (size_t e = 0; e < v1_values.size(); ++e) {
        if (static_cast<int64_t>(e / c.head_dim % width) < c.heads) {
          dq_rms += v1_values[e] * v1_values[e];
        }
      }
      dq_rms = std::sqrt(dq_rms / static_cast<double>(c.batch * c.seq * c.heads * c.head_dim));
      cuda::set_attention_dq_source(AttentionDqSource::kStoredDs);
      // v1 last: its run leaves complete tiles in the scratch the next call's allocation may
      // reuse, which would hide a kernel that misses some (fresh device memory is poisoned).
      for (AttentionBackwardKernels kernels :
           {variants[1], variants[0], AttentionBackwardKernels::kV1}) {
        backward_bytes(kernels);
        const std::vector<double> stored = download(gpu(), dfused);
        ASSERT_EQ(stored.size(), v1_values.size());
        int64_t dq_off = 0, dkv_off = 0;
        for (size_t e = 0; e < v1_values.size(); ++e) {
          const bool in_dq = static_cast<int64_t>(e / c.head_dim % width) < c.heads;
          const double diff = std::abs(stored[e] - v1_values[e]);
          if (in_dq) {
            if (!(diff <= 1.0 / 64 * (std::abs(v1_values[e]) + dq_rms))) ++dq_off;
          } else if (!(diff == 0.0)) {
            ++dkv_off;
          }
        }
        EXPECT_EQ(dq_off, 0) << what << ", dK/dV choice " << static_cast<int>(kernels)
                             << ": dq from the stored dS is off v1's by more than roundings";
        EXPECT_EQ(dkv_off, 0) << what << ", dK/dV choice " << static_cast<int>(kernels)
                              << ": dk/dv differ from v1's when storing dS";
      }
      cuda::set_attention_dq_source(AttentionDqSource::kRecompute);
    }
  }
}

TEST_F(CudaAttentionVariants, ForwardV2GivesTheBytesOfV1) {
  const KernelChoiceReset reset;
  // v2 applies to sequences over 128 (shorter ones keep v1's 64-row blocks).
  const VariantCase cases[] = {
      {1, 129, 2, 1, 64, 0},    // one query past a 128-row block, GQA
      {2, 200, 2, 2, 64, 45},   // a window that ends inside a key tile
      {1, 257, 2, 1, 128, 0},   // MQA, one key past 256
      {1, 300, 3, 3, 128, 1},   // a window of one: the diagonal alone
      {1, 192, 2, 1, 64, 130},  // a window wider than a 128-row block
      {2, 150, 2, 1, 128, 70},  // a window wider than a 64-key tile
  };
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (const VariantCase& c : cases) {
    for (DType dtype : {DType::kBF16, DType::kF16}) {
      const std::string what = describe(c, dtype);
      const int64_t width = c.heads + 2 * c.kv_heads;
      const std::vector<float> qkv =
          random_values(c.batch * c.seq * width * c.head_dim, 63, -2.0f, 2.0f);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
      Tensor fused = upload(gpu(), qkv, {c.batch, c.seq, width, c.head_dim}, dtype);
      Tensor q = fused.narrow(2, 0, c.heads);
      Tensor k = fused.narrow(2, c.heads, c.kv_heads);
      Tensor v = fused.narrow(2, c.heads + c.kv_heads, c.kv_heads);
      Tensor out =
          gpu().empty({c.batch, c.seq, c.heads, c.head_dim}, dtype, MemoryCategory::kOther);
      Tensor lse = gpu().empty({c.batch, c.heads, c.seq}, DType::kF32, MemoryCategory::kOther);
      auto forward_bytes = [&](AttentionForwardKernels kernels) {
        cuda::set_attention_forward_kernels(kernels);
        gpu().fill(out, kNaN);  // every element must be written
        gpu().fill(lse, kNaN);
        gpu().attention_forward(out, lse, q, k, v, scale, c.window);
        std::vector<uint8_t> bytes = download_bytes(gpu(), out);
        const std::vector<uint8_t> lse_bytes = download_bytes(gpu(), lse);
        bytes.insert(bytes.end(), lse_bytes.begin(), lse_bytes.end());
        return bytes;
      };
      const std::vector<uint8_t> v1 = forward_bytes(AttentionForwardKernels::kV1);
      bool all_finite = true;
      for (double x : download(gpu(), out)) all_finite = all_finite && std::isfinite(x);
      for (double x : download(gpu(), lse)) all_finite = all_finite && std::isfinite(x);
      ASSERT_TRUE(all_finite) << what << ": v1 left NaN or inf in out/lse";
      EXPECT_EQ(forward_bytes(AttentionForwardKernels::kV2TwoRowTiles), v1)
          << what << ": the forward's v2 differs from v1 in out or lse";
    }
  }
}

// One environment choice: `bad` throws a ConfigError naming the variable, its value and the
// `listed` values; `good` gives `chosen`; an override (`other`) wins over the environment until
// cleared. The environment is read once, on the first call without an override: a value that
// throws is read again next time (the static's initialisation did not complete), a valid one
// stays. Restores the variable however the check ends.
template <typename Choice>
void check_environment_choice(const char* variable, const char* bad, const char* listed,
                              const char* good, Choice chosen, Choice other,
                              const std::function<Choice()>& get,
                              void (*set)(std::optional<Choice>)) {
  set(std::nullopt);
  const test_support::EnvGuard guard(variable, bad);
  try {
    get();
    ADD_FAILURE() << variable << "=" << bad << " was accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(std::string(variable) + "=" + bad), std::string::npos) << message;
    EXPECT_NE(message.find(listed), std::string::npos) << message;
  }
  ASSERT_EQ(setenv(variable, good, 1), 0);
  EXPECT_EQ(get(), chosen);
  set(other);
  EXPECT_EQ(get(), other);
  set(std::nullopt);
  EXPECT_EQ(get(), chosen);
}

TEST_F(CudaAttentionVariants, EnvironmentNamesTheBackwardChoiceAndRejectsOthers) {
  // v2: the removed shape (v2-hoist beat it on every measured shape).
  check_environment_choice<AttentionBackwardKernels>(
      "ZERO_CUDA_ATTENTION_BWD", "v2", "v2-hoist, v1, v2-w8", "v2-w8",
      AttentionBackwardKernels::kV2EightWarps, AttentionBackwardKernels::kV1,
      [] { return cuda::attention_backward_kernels(); }, &cuda::set_attention_backward_kernels);
}

TEST_F(CudaAttentionVariants, EnvironmentNamesTheDqSourceAndRejectsOthers) {
  // "auto" (left cached for the tests below, as an unset variable would be): the default by shape.
  check_environment_choice<AttentionDqSource>(
      "ZERO_CUDA_ATTENTION_DQ", "stored", "auto, recompute, stored-ds", "auto",
      AttentionDqSource::kStoredDs, AttentionDqSource::kRecompute,
      [] { return cuda::attention_dq_source(256, 64); }, &cuda::set_attention_dq_source);
  EXPECT_EQ(cuda::attention_dq_source(4097, 128), AttentionDqSource::kRecompute);
}

TEST_F(CudaAttentionVariants, EnvironmentNamesTheForwardChoiceAndRejectsOthers) {
  // v2-hoist: a backward choice, not a forward one. "auto": the default by head dimension.
  check_environment_choice<AttentionForwardKernels>(
      "ZERO_CUDA_ATTENTION_FWD", "v2-hoist", "auto, v1, v2", "auto",
      AttentionForwardKernels::kV2TwoRowTiles, AttentionForwardKernels::kV1,
      [] { return cuda::attention_forward_kernels(128); }, &cuda::set_attention_forward_kernels);
  EXPECT_EQ(cuda::attention_forward_kernels(64), AttentionForwardKernels::kV1);
}

// The defaults by shape, as the H200 measured them (cuda_attention_kernel_choice.h): the forward's
// v2 at D = 128 and v1 at D = 64; dQ from a stored dS up to 32 D tokens, recomputed past that so
// that the backward's memory stays linear in long sequences.
TEST(CudaAttentionDefaults, FollowTheHeadDimensionAndTheSequenceLength) {
  EXPECT_EQ(cuda::default_attention_forward_kernels(128), AttentionForwardKernels::kV2TwoRowTiles);
  EXPECT_EQ(cuda::default_attention_forward_kernels(64), AttentionForwardKernels::kV1);
  EXPECT_EQ(cuda::default_attention_dq_source(2048, 128), AttentionDqSource::kStoredDs);
  EXPECT_EQ(cuda::default_attention_dq_source(4096, 128), AttentionDqSource::kStoredDs);
  EXPECT_EQ(cuda::default_attention_dq_source(4097, 128), AttentionDqSource::kRecompute);
  EXPECT_EQ(cuda::default_attention_dq_source(1024, 64), AttentionDqSource::kStoredDs);
  EXPECT_EQ(cuda::default_attention_dq_source(2049, 64), AttentionDqSource::kRecompute);
  EXPECT_EQ(cuda::default_attention_dq_source(131072, 128), AttentionDqSource::kRecompute);
}

// Past the default length the backward asks for no dS scratch (its memory stays O(T)); within it,
// the causal triangle of 64 x 64 two-byte tiles per batch x head slice.
TEST(CudaAttentionDefaults, TheStoredDsScratchIsAskedForOnlyWhereItIsUsed) {
  const KernelChoiceReset reset;
  cuda::set_attention_dq_source(std::nullopt);
  const char* forced = std::getenv("ZERO_CUDA_ATTENTION_DQ");
  if (forced != nullptr && std::string(forced) != "auto") {
    GTEST_SKIP() << "ZERO_CUDA_ATTENTION_DQ=" << forced << " forces the dQ source";
  }
  cuda::AttentionArgs a;
  a.dtype = DType::kBF16;
  a.batch = 2;
  a.heads = a.kv_heads = 3;
  a.head_dim = 64;
  a.seq = 2048;  // 32 tiles of 64: 32 * 33 / 2 = 528 tiles a slice
  EXPECT_EQ(cuda::attention_backward_ds_bytes(a), size_t{2} * 2 * 3 * 528 * 64 * 64);
  a.seq = 2049;
  EXPECT_EQ(cuda::attention_backward_ds_bytes(a), 0u);
  a.dtype = DType::kF32;  // the CUDA-core kernels: no tensor-core dS
  a.seq = 256;
  EXPECT_EQ(cuda::attention_backward_ds_bytes(a), 0u);
}

// The tensor-core kernels put the row blocks in the grid's y (heaviest first), which holds at
// most 65535 blocks: a sequence past 65535 blocks of 64 rows must go to the CUDA-core kernels
// (row blocks in x) instead of failing to launch.
TEST(CudaAttentionGrid, SequencesPastTheRowBlockLimitTakeTheCudaCoreKernels) {
  cuda::AttentionArgs a;
  a.dtype = DType::kBF16;
  a.batch = 1;
  a.heads = a.kv_heads = 2;
  a.head_dim = 64;
  a.seq = int64_t{65535} * 64;
  EXPECT_TRUE(cuda::mma_attention_supported(a, false));
  EXPECT_TRUE(cuda::mma_attention_supported(a, true));
  a.seq += 1;
  EXPECT_FALSE(cuda::mma_attention_supported(a, false));
  EXPECT_FALSE(cuda::mma_attention_supported(a, true));
}

}  // namespace
}  // namespace zero::backend::cuda_test
