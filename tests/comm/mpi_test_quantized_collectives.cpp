// mpi-ranks: 2 3
// ZeRO++'s quantized collectives over MPI (comm/quantized_collectives.h): the all-gather hands
// every rank each rank's shard decoded exactly as the CPU backend decodes it, in the output's
// dtype; the reduce-scatter hands rank r the rank-ordered f32 sum of every rank's decoded chunk
// r - both bit for bit against the ops run locally on every rank's (reproducible) input - and
// the bytes on the wire are the packed codes and scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
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

}  // namespace
}  // namespace zero::comm
