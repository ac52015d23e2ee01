// SequenceTiledCompute and the shard rules: rows split into contiguous shards that differ by at
// most one row; the generic wrapper assembles outputs and input gradients, recomputes each shard
// just before its backward (and only then), accumulates parameter gradients across shards, and
// with one shard behaves as an untiled unit (no recompute); "auto" resolves as documented in
// model/sequence_tiling.h; the --tiled-* flag values parse strictly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "model/sequence_tiled.h"
#include "model/sequence_tiling.h"

namespace zero::model {
namespace {

TEST(SplitRows, ContiguousShardsDifferingByAtMostOneRow) {
  const std::vector<RowShard> s = split_rows(12, 5);
  ASSERT_EQ(s.size(), 5u);
  const std::vector<int64_t> sizes = {3, 3, 2, 2, 2};
  int64_t next = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i].begin, next);
    EXPECT_EQ(s[i].rows(), sizes[i]);
    next = s[i].end;
  }
  EXPECT_EQ(next, 12);
  EXPECT_EQ(split_rows(12, 3)[1].begin, 4);
  EXPECT_EQ(split_rows(12, 12).back().rows(), 1);
  EXPECT_THROW(split_rows(12, 0), ConfigError);
  EXPECT_THROW(split_rows(12, 13), ConfigError);
}

TEST(SequenceTilingAuto, MlpUsesCeilOfSequenceOverHidden) {
  EXPECT_EQ(resolve_mlp_shards(kAutoShards, 64, 128), 1);     // short sequence: off
  EXPECT_EQ(resolve_mlp_shards(kAutoShards, 128, 128), 1);
  EXPECT_EQ(resolve_mlp_shards(kAutoShards, 129, 128), 2);
  EXPECT_EQ(resolve_mlp_shards(kAutoShards, 1 << 20, 2048), 512);  // 1M tokens, Llama-1B width
  EXPECT_EQ(resolve_mlp_shards(7, 64, 128), 7);                 // explicit counts pass through
  EXPECT_EQ(resolve_mlp_shards(1, 1 << 20, 2048), 1);
  EXPECT_THROW(resolve_mlp_shards(-1, 64, 128), ConfigError);
}

TEST(SequenceTilingAuto, LogitsShardNoLargerThanTwiceTheHiddenState) {
  // tiny-llama (V 256, C 128): the logits are no wider than 2 C, never tiled.
  EXPECT_EQ(resolve_logits_shards(kAutoShards, 1 << 16, 128, 256), 1);
  // Llama-1B-shaped (V 32000, C 2048): ceil(32000 / 4096) = 8 shards at long sequences...
  EXPECT_EQ(resolve_logits_shards(kAutoShards, 32768, 2048, 32000), 8);
  // ...but not when the [V, C] accumulator would cost more than the logits saved.
  EXPECT_EQ(resolve_logits_shards(kAutoShards, 4096, 2048, 32000), 1);
  EXPECT_EQ(resolve_logits_shards(kAutoShards, 5000, 2048, 32000), 8);
  EXPECT_EQ(resolve_logits_shards(3, 16, 2048, 32000), 3);
}

TEST(SequenceTilingFlag, ParsesAutoOffAndCountsStrictly) {
  EXPECT_EQ(parse_shards_flag("--tiled-mlp", "auto"), kAutoShards);
  EXPECT_EQ(parse_shards_flag("--tiled-mlp", "off"), 1);
  EXPECT_EQ(parse_shards_flag("--tiled-mlp", "4"), 4);
  for (const char* bad : {"0", "-2", "x", "4x", " 4", "", "1e3", "99999999999"}) {
    try {
      parse_shards_flag("--tiled-logits", bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--tiled-logits"), std::string::npos) << e.what();
    }
  }
}

// y = x W^T + x (row-independent, with a parameter), through the wrapper, against the same
// computation done on all rows at once.
struct LinearResidual {
  backend::CpuBackend& cpu;
  Tensor w, dw;
  Tensor saved_x;
  int forwards = 0, recomputes = 0;

  SequenceTiledCompute::ShardForward forward() {
    return [this](const Tensor& x, Tensor* y, bool save) {
      (y != nullptr ? forwards : recomputes) += 1;
      if (y != nullptr) {
        cpu.linear_forward(*y, x, w, nullptr);
        cpu.add(*y, x, 1.0);
      }
      if (save) saved_x = x;
    };
  }
  SequenceTiledCompute::ShardBackward backward() {
    return [this](const Tensor& dy) {
      EXPECT_TRUE(saved_x.defined()) << "backward before its shard was recomputed";
      Tensor dx = cpu.empty(saved_x.shape(), saved_x.dtype(), MemoryCategory::kActivations);
      cpu.linear_backward(&dx, dw, nullptr, dy, saved_x, w);
      cpu.add(dx, dy, 1.0);
      saved_x = Tensor();
      return dx;
    };
  }
};

TEST(SequenceTiledCompute, AssemblesOutputsAndGradientsWithRecompute) {
  backend::CpuBackend cpu;
  const int64_t rows = 11, c = 6;
  Tensor w = Tensor::zeros_host({c, c}, DType::kF64);
  Tensor x = Tensor::zeros_host({rows, c}, DType::kF64);
  Tensor dy = Tensor::zeros_host({rows, c}, DType::kF64);
  for (int64_t i = 0; i < c * c; ++i) w.data<double>()[i] = std::sin(1.3 * static_cast<double>(i));
  for (int64_t i = 0; i < rows * c; ++i) {
    x.data<double>()[i] = std::cos(0.7 * static_cast<double>(i));
    dy.data<double>()[i] = std::sin(0.3 * static_cast<double>(i) + 1.0);
  }
  // The reference: all rows at once.
  Tensor y_ref = Tensor::zeros_host({rows, c}, DType::kF64);
  cpu.linear_forward(y_ref, x, w, nullptr);
  cpu.add(y_ref, x, 1.0);
  Tensor dw_ref = Tensor::zeros_host({c, c}, DType::kF64);
  Tensor dx_ref = Tensor::zeros_host({rows, c}, DType::kF64);
  cpu.linear_backward(&dx_ref, dw_ref, nullptr, dy, x, w);
  cpu.add(dx_ref, dy, 1.0);

  for (int64_t shards : {1, 2, 4, 11, 50}) {
    SCOPED_TRACE("shards " + std::to_string(shards));
    LinearResidual f{cpu, w, Tensor::zeros_host({c, c}, DType::kF64), Tensor()};
    SequenceTiledCompute tiles;
    Tensor y = tiles.forward(cpu, x, shards, c, DType::kF64, true, f.forward());
    const int64_t used = std::min<int64_t>(shards, rows);
    EXPECT_EQ(tiles.shards(), used);
    EXPECT_EQ(f.forwards, used);
    // One shard saves in forward as an untiled unit does; more save nothing until backward.
    EXPECT_EQ(f.saved_x.defined(), used == 1);
    Tensor dx = tiles.backward(cpu, dy, f.forward(), f.backward());
    EXPECT_EQ(f.recomputes, used == 1 ? 0 : used);
    for (int64_t i = 0; i < rows * c; ++i) {
      ASSERT_NEAR(y.data<double>()[i], y_ref.data<double>()[i], 1e-12) << i;
      ASSERT_NEAR(dx.data<double>()[i], dx_ref.data<double>()[i], 1e-12) << i;
    }
    for (int64_t i = 0; i < c * c; ++i) {
      ASSERT_NEAR(f.dw.data<double>()[i], dw_ref.data<double>()[i], 1e-12) << i;
    }
  }
}

TEST(SequenceTiledCompute, EvaluationKeepsNothing) {
  backend::CpuBackend cpu;
  Tensor w = Tensor::zeros_host({4, 4}, DType::kF64);
  Tensor x = Tensor::zeros_host({6, 4}, DType::kF64);
  LinearResidual f{cpu, w, Tensor::zeros_host({4, 4}, DType::kF64), Tensor()};
  SequenceTiledCompute tiles;
  tiles.forward(cpu, x, 3, 4, DType::kF64, false, f.forward());
  EXPECT_FALSE(f.saved_x.defined());
  Tensor dy = Tensor::zeros_host({6, 4}, DType::kF64);
  EXPECT_THROW(tiles.backward(cpu, dy, f.forward(), f.backward()), Error);
}

}  // namespace
}  // namespace zero::model
