// mpi-ranks: 2 3 4
// ZeRO++'s quantized collectives over MPI (comm/quantized_collectives.h): the all-gather hands
// every rank each rank's shard decoded exactly as the CPU backend decodes it, in the output's
// dtype; the reduce-scatter hands rank r the rank-ordered f32 sum of every rank's decoded chunk
// r - both bit for bit against the ops run locally on every rank's (reproducible) input - and
// the bytes on the wire are the packed codes and scales. The hierarchical reduce-scatter (nodes
// of 2 ranks on 4) sums within each node, then across nodes, with 1/2 of the bytes in the
// second hop; where the ranks make one node or nodes of one rank it is the one-hop form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/int8_groups.h"
#include "comm/quantized_collectives.h"
#include "comm/world.h"
#include "core/half.h"

namespace zero::comm {
namespace {

constexpr int64_t kGroup = 64;

// Rank r's values: both signs, a different magnitude per stretch, some exact zeros.
Tensor rank_values(int rank, int64_t n, int64_t salt) {
  Tensor t = Tensor::zeros_host({n}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    const double x = std::sin(0.017 * static_cast<double>((i + 3) * (rank + 2) + salt));
    t.data<float>()[i] = i % 31 == 0 ? 0.0f : static_cast<float>(x * (1 + (i / 50) % 4));
  }
  return t;
}

// What the receiver decodes from `values` (f32): quantized and decoded by the CPU backend.
Tensor round_trip(backend::CpuBackend& cpu, const Tensor& values, DType out_dtype) {
  Tensor packed = cpu.empty({backend::Int8Groups{values.numel(), kGroup}.packed_bytes()},
                            DType::kU8, MemoryCategory::kOther);
  cpu.quantize_int8_groups(packed, values, kGroup);
  Tensor out = cpu.zeros({values.numel()}, out_dtype, MemoryCategory::kOther);
  cpu.dequantize_int8_groups(out, packed, kGroup, false);
  return out;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<size_t>(a.nbytes())) == 0;
}

TEST(QuantizedCollectives, AllGatherDecodesEveryRanksShard) {
  Comm& w = world();
  backend::CpuBackend cpu;
  const int64_t shard = 150;  // two full groups and a short one
  for (const DType out_dtype : {DType::kF32, DType::kBF16}) {
    for (const bool async : {false, true}) {
      w.reset_stats();
      Tensor gathered = cpu.zeros({shard * w.world_size()}, out_dtype, MemoryCategory::kOther);
      QuantizedAllGather gather(cpu, w, rank_values(w.rank(), shard, 1), kGroup, async);
      gather.finish(gathered);
      for (int r = 0; r < w.world_size(); ++r) {
        const Tensor want = round_trip(cpu, rank_values(r, shard, 1), out_dtype);
        EXPECT_TRUE(same_bytes(gathered.view(r * shard, {shard}), want))
            << "rank " << r << "'s shard, " << dtype_name(out_dtype);
      }
      const int64_t packed = backend::Int8Groups{shard, kGroup}.packed_bytes();
      EXPECT_EQ(gather.packed_bytes(), packed);
      EXPECT_EQ(w.stats().at(OpKind::kAllGather).message_bytes, packed * w.world_size());
    }
  }
}

TEST(QuantizedCollectives, ReduceScatterSumsTheDecodedChunksInRankOrder) {
  Comm& w = world();
  backend::CpuBackend cpu;
  const int64_t chunk = 200;
  const int world = w.world_size();
  for (const DType out_dtype : {DType::kF32, DType::kBF16}) {
    w.reset_stats();
    Tensor output = cpu.zeros({chunk}, out_dtype, MemoryCategory::kOther);
    quantized_reduce_scatter(cpu, w, rank_values(w.rank(), chunk * world, 5), output, kGroup);
    // The oracle: rank r's chunk `me`, decoded, summed in rank order (f32 sums rounded to the
    // output's dtype at each addition, as the op accumulates).
    Tensor want = cpu.zeros({chunk}, out_dtype, MemoryCategory::kOther);
    for (int r = 0; r < world; ++r) {
      const Tensor all = rank_values(r, chunk * world, 5);
      const Tensor decoded = round_trip(cpu, all.view(w.rank() * chunk, {chunk}), DType::kF32);
      for (int64_t i = 0; i < chunk; ++i) {
        const float x = decoded.data<float>()[i];
        if (out_dtype == DType::kF32) {
          want.data<float>()[i] = r == 0 ? x : want.data<float>()[i] + x;
        } else {
          auto* bits = static_cast<uint16_t*>(want.raw_data());
          const float sum = r == 0 ? x : bf16_bits_to_float(bits[i]) + x;
          bits[i] = float_to_bf16_bits(sum);
        }
      }
    }
    EXPECT_TRUE(same_bytes(output, want)) << dtype_name(out_dtype);
    const int64_t packed = backend::Int8Groups{chunk, kGroup}.packed_bytes();
    EXPECT_EQ(w.stats().at(OpKind::kAllToAll).message_bytes, packed * world);
    EXPECT_EQ(w.stats().at(OpKind::kReduceScatter).calls, 0);
  }
}

TEST(QuantizedCollectives, HierarchicalSumsWithinNodesThenAcrossThem) {
  Comm& w = world();
  backend::CpuBackend cpu;
  const int world_size = w.world_size(), me = w.rank();
  const int k = world_size % 2 == 0 ? 2 : 1;  // nodes of 2 ranks where they divide the world
  const int n = world_size / k;
  const std::unique_ptr<Comm> node = w.split(me / k, me);
  const std::unique_ptr<Comm> column = w.split(me % k, me);
  const int64_t chunk = 130;
  w.reset_stats();
  node->reset_stats();
  column->reset_stats();
  Tensor output = cpu.zeros({chunk}, DType::kF32, MemoryCategory::kOther);
  hierarchical_quantized_reduce_scatter(cpu, *node, *column,
                                        rank_values(me, chunk * world_size, 9), output, kGroup);
  // The oracle: each node's decoded chunks `me` summed in node-rank order, that partial sum
  // quantized again and decoded, the nodes' summed in node order (f32 throughout).
  auto decoded_chunk = [&](int rank) {
    const Tensor all = rank_values(rank, chunk * world_size, 9);
    return round_trip(cpu, all.view(me * chunk, {chunk}), DType::kF32);
  };
  auto add_into = [&](Tensor& sum, const Tensor& x, bool first) {
    for (int64_t i = 0; i < chunk; ++i) {
      sum.data<float>()[i] = first ? x.data<float>()[i] : sum.data<float>()[i] + x.data<float>()[i];
    }
  };
  Tensor want = cpu.zeros({chunk}, DType::kF32, MemoryCategory::kOther);
  if (k > 1 && n > 1) {
    for (int a = 0; a < n; ++a) {
      Tensor partial = cpu.zeros({chunk}, DType::kF32, MemoryCategory::kOther);
      for (int i = 0; i < k; ++i) add_into(partial, decoded_chunk(a * k + i), i == 0);
      add_into(want, round_trip(cpu, partial, DType::kF32), a == 0);
    }
    EXPECT_EQ(w.stats().at(OpKind::kAllToAll).calls, 0);
    EXPECT_EQ(column->stats().at(OpKind::kAllToAll).message_bytes * k,
              node->stats().at(OpKind::kAllToAll).message_bytes);
  } else {
    for (int r = 0; r < world_size; ++r) add_into(want, decoded_chunk(r), r == 0);
  }
  EXPECT_TRUE(same_bytes(output, want)) << k << " ranks a node, " << n << " nodes";
}

}  // namespace
}  // namespace zero::comm
