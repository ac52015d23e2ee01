// mpi-ranks: 2 3
// CompressedAllReduce over MPI (1-bit Adam's compressed momentum): each rank's result and its
// worker and server errors equal, bit for bit, the same ranks emulated in one process with the
// CPU backend's ops (tests/support/onebit_emulation.h), step after step as the errors build up;
// every rank ends with the same values; the bytes it sends are the ones it claims.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/compressed_all_reduce.h"
#include "comm/world.h"
#include "support/onebit_emulation.h"

namespace zero::comm {
namespace {

// Rank r's buffer at `step`: values of both signs, some exact zeros, a gap left alone.
Tensor rank_values(int rank, int step, int64_t n) {
  Tensor t = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    const double x = std::sin(0.013 * static_cast<double>((i + 1) * (rank + 2) + 7 * step));
    t.data<float>()[i] = i % 29 == 0 ? 0.0f : static_cast<float>(x * (1 + i % 3));
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.numel()) * 4) == 0;
}

TEST(CompressedAllReduce, MatchesTheEmulatedRanksBitForBit) {
  Comm& w = world();
  const int n = w.world_size(), me = w.rank();
  backend::CpuBackend cpu;
  // A one-element tensor, a bias, a matrix whose size divides by nothing, and a gap at [45, 50).
  const std::vector<backend::ParamSegment> segments = {
      {0, 1, true}, {1, 44, false}, {50, 3001, true}};
  const int64_t total = 3051;
  CompressedAllReduce reduce(cpu, w, segments);
  const backend::OneBitLayout& layout = reduce.layout();
  testing::onebit::RankErrors errors = testing::onebit::zero_errors(layout);
  for (int step = 0; step < 4; ++step) {
    std::vector<Tensor> emulated;
    for (int r = 0; r < n; ++r) emulated.push_back(rank_values(r, step, total));
    testing::onebit::emulate(cpu, layout, emulated, errors);

    Tensor mine = rank_values(me, step, total);
    const float gap = mine.data<float>()[47];
    w.reset_stats();
    reduce.run(mine);
    EXPECT_EQ(w.stats().total_traffic_bytes(), reduce.bytes_sent_per_run());
    EXPECT_EQ(mine.data<float>()[47], gap) << "elements between tensors are left alone";
    EXPECT_TRUE(same_bits(mine, emulated[me])) << "step " << step;
    EXPECT_TRUE(same_bits(reduce.worker_error(), errors.worker[me])) << "step " << step;
    EXPECT_TRUE(same_bits(reduce.server_error(), errors.server[me])) << "step " << step;
    // Every rank holds the same result as rank 0 (broadcast)...
    Tensor copy = Tensor::zeros_host({total}, DType::kF32);
    std::memcpy(copy.raw_data(), mine.raw_data(), static_cast<size_t>(total) * 4);
    w.broadcast(copy, 0);
    // ... but for the gap, which holds each rank's own values.
    for (int64_t i = 45; i < 50; ++i) copy.data<float>()[i] = mine.data<float>()[i];
    EXPECT_TRUE(same_bits(copy, mine)) << "rank " << me << " step " << step;
  }
  // About 2 (n-1)/n bits an element (padding and scales add a few percent here) where an f32
  // ring all-reduce sends 64 (n-1)/n.
  const double bits_per_element = 8.0 * static_cast<double>(reduce.bytes_sent_per_run()) /
                                  static_cast<double>(total);
  EXPECT_LT(bits_per_element, 2.0 * (n - 1) / n * 1.25);
  reduce.reset_errors();
  EXPECT_EQ(cpu.squared_norm(reduce.worker_error()), 0.0);
}

}  // namespace
}  // namespace zero::comm
