// mpi-ranks: 2 4
// UlyssesAttention (model/ulysses_attention.h) on the CPU backend in f64: the sequence is split
// over every rank of the job; each rank's output and its q/k/v gradients equal the rows of one
// full-sequence attention (computed on every rank) to 1e-12 - the same per-head arithmetic, except
// that a replicated KV head's gradient is a sum of its replicas' parts (reassociation only).
// Covers heads that divide the ranks, fewer KV heads than ranks (replication), a sliding window
// (positions are global), and the error for heads that cannot split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/world.h"
#include "core/error.h"
#include "model/ulysses_attention.h"

namespace zero::model {
namespace {

constexpr int64_t kBatch = 2, kSeq = 8, kDim = 4;

Tensor random_host(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::zeros_host(shape, DType::kF64);
  uint64_t x = 0x9E3779B97F4A7C15ULL * seed + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t.data<double>()[i] = static_cast<double>(x % 2001) / 1000.0 - 1.0;
  }
  return t;
}

// [B, T, n, D] view of heads [first, first + n) in a [B * T, width * D] buffer.
Tensor heads(const Tensor& fused, int64_t first, int64_t n) {
  const int64_t row = fused.size(1);
  return Tensor(fused.storage(), fused.dtype(), {kBatch, kSeq, n, kDim}, {kSeq * row, row, kDim, 1},
                fused.offset() + first * kDim);
}

// Rows of rank `rank`'s tokens: [B * T/P, C] from [B * T, C].
Tensor local_rows(const Tensor& full, int rank, int ranks) {
  const int64_t part = kSeq / ranks, cols = full.size(1);
  Tensor out = Tensor::zeros_host({kBatch * part, cols}, DType::kF64);
  for (int64_t b = 0; b < kBatch; ++b) {
    std::copy_n(full.data<double>() + (b * kSeq + rank * part) * cols, part * cols,
                out.data<double>() + b * part * cols);
  }
  return out;
}

void expect_near_all(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  double worst = 0.0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    worst = std::max(worst, std::abs(got.data<double>()[i] - want.data<double>()[i]));
  }
  EXPECT_LE(worst, 1e-12) << what;
}

class UlyssesAttentionTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(UlyssesAttentionTest, MatchesFullSequenceAttention) {
  const auto [h, kvh, window] = GetParam();
  comm::Comm& world = comm::world();
  const int ranks = world.world_size(), rank = world.rank();
  if (kvh % ranks != 0 && ranks % kvh != 0) GTEST_SKIP() << "heads do not split over " << ranks;
  backend::CpuBackend cpu;
  const int64_t width = (h + 2 * kvh) * kDim;
  const double scale = 0.5;
  const Tensor qkv = random_host({kBatch * kSeq, width}, 1);
  const Tensor dout = random_host({kBatch * kSeq, h * kDim}, 2);

  // The whole sequence on one rank.
  Tensor out = Tensor::zeros_host({kBatch * kSeq, h * kDim}, DType::kF64);
  Tensor out_heads = out.reshape({kBatch, kSeq, h, kDim});
  Tensor lse = Tensor::zeros_host({kBatch, h, kSeq}, DType::kF64);
  cpu.attention_forward(out_heads, lse, heads(qkv, 0, h), heads(qkv, h, kvh), heads(qkv, h + kvh, kvh),
                        scale, window);
  Tensor dqkv = Tensor::zeros_host({kBatch * kSeq, width}, DType::kF64);
  Tensor dq = heads(dqkv, 0, h), dk = heads(dqkv, h, kvh), dv = heads(dqkv, h + kvh, kvh);
  cpu.attention_backward(dq, dk, dv, dout.reshape({kBatch, kSeq, h, kDim}), heads(qkv, 0, h),
                         heads(qkv, h, kvh), heads(qkv, h + kvh, kvh), out_heads, lse, scale, window);

  // This rank's part of the sequence, through the all-to-alls.
  UlyssesAttention ulysses;
  const Tensor local_qkv = local_rows(qkv, rank, ranks);
  Tensor local_out = Tensor::zeros_host({local_qkv.size(0), h * kDim}, DType::kF64);
  ulysses.forward(cpu, world, local_out, local_qkv, kBatch, h, kvh, kDim, scale, window, true);
  expect_near_all(local_out, local_rows(out, rank, ranks), "out");
  Tensor local_dqkv = Tensor::zeros_host(local_qkv.shape(), DType::kF64);
  ulysses.backward(cpu, world, local_dqkv, local_rows(dout, rank, ranks));
  expect_near_all(local_dqkv, local_rows(dqkv, rank, ranks), "dq, dk, dv");
}

INSTANTIATE_TEST_SUITE_P(Heads, UlyssesAttentionTest,
                         ::testing::Values(std::make_tuple(4, 4, 0), std::make_tuple(8, 4, 0),
                                           std::make_tuple(4, 2, 0), std::make_tuple(4, 1, 0),
                                           std::make_tuple(8, 2, 3), std::make_tuple(4, 1, 5)),
                         [](const auto& param_info) {
                           std::string name = "h";
                           name += std::to_string(std::get<0>(param_info.param));
                           name += "_kv";
                           name += std::to_string(std::get<1>(param_info.param));
                           name += "_window";
                           name += std::to_string(std::get<2>(param_info.param));
                           return name;
                         });

TEST(UlyssesHeads, SplitsAndReplicates) {
  EXPECT_EQ(ulysses_heads(8, 4, 2), (UlyssesHeads{4, 2, 1}));
  EXPECT_EQ(ulysses_heads(8, 2, 4), (UlyssesHeads{2, 1, 2}));
  EXPECT_EQ(ulysses_heads(8, 1, 8), (UlyssesHeads{1, 1, 8}));
}

TEST(UlyssesHeads, HeadsThatCannotSplitAreAClearError) {
  auto message = [](int64_t h, int64_t kvh, int64_t sp) {
    try {
      ulysses_heads(h, kvh, sp);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string q = message(6, 2, 4);
  EXPECT_NE(q.find("num_attention_heads 6"), std::string::npos) << q;
  EXPECT_NE(q.find("sequence_parallel_size 4"), std::string::npos) << q;
  const std::string kv = message(12, 3, 2);
  EXPECT_NE(kv.find("num_key_value_heads 3"), std::string::npos) << kv;
  EXPECT_NE(kv.find("key/value heads"), std::string::npos) << kv;
}

}  // namespace
}  // namespace zero::model
