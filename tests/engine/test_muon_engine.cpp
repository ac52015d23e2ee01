// Muon through the Engine on one rank: which parameters it orthogonalizes (the transformer
// blocks' matrices, with DeepSpeed's scale for their Hugging Face shapes), that it trains in
// f32 and bf16, that ZeRO stages 1-3 step as stage 0 does, that a checkpoint resumes it bit for
// bit, and that what it does not combine with yet is an error naming the setting and the fix.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "engine/muon_units.h"
#include "engine/zero_harness.h"
#include "support/text_has.h"

namespace zero::engine {
namespace muon_engine_test {

namespace fs = std::filesystem;
using namespace zero_test;
using zero::testing::has;

constexpr int64_t kSeqLen = 8;

// The matrices of muon_units(model), at their offsets in the model's flat buffers.
std::vector<optim::MuonMatrix> flat_matrices(model::Model& model) {
  std::vector<optim::MuonMatrix> out;
  for (const optim::MuonUnit& unit : muon_units(model)) {
    EXPECT_EQ(unit.local_begin, 0);
    EXPECT_EQ(unit.gather_numel, 0);
    for (optim::MuonMatrix m : unit.matrices) {
      m.offset += unit.update_offset;
      out.push_back(m);
    }
  }
  return out;
}

EngineSettings muon_settings(int stage) {
  EngineSettings s = zero_settings(stage, 2, 1, 1);
  s.optimizer_type = "Muon";
  s.optimizer_params = {{"lr", 2e-2}, {"adam_lr", 5e-3}, {"weight_decay", 0.01}};
  return s;
}

TEST(MuonEngine, OrthogonalizesTheBlockMatricesOnly) {
  backend::CpuBackend cpu;
  for (const std::string family : {"gpt2", "llama"}) {
    auto net = small_model(family, cpu);
    const std::vector<optim::MuonMatrix> matrices = flat_matrices(*net);
    std::set<int64_t> offsets;
    for (const optim::MuonMatrix& m : matrices) offsets.insert(m.offset);
    int64_t matrix_elements = 0;
    for (const model::Parameter* p : net->parameters()) {
      const bool in_block = p->spec.name.find(".h.") != std::string::npos ||
                            p->spec.name.find(".layers.") != std::string::npos;
      const bool expected = in_block && p->spec.shape.size() == 2;
      EXPECT_EQ(offsets.count(p->flat_offset) == 1, expected) << family << " " << p->spec.name;
      if (expected) matrix_elements += p->numel();
    }
    int64_t covered = 0;
    for (const optim::MuonMatrix& m : matrices) covered += m.rows * m.cols;
    EXPECT_EQ(covered, matrix_elements) << family;
    EXPECT_EQ(matrices.size(), family == "gpt2" ? 8u : 14u) << family;
  }
}

// DeepSpeed scales by sqrt(max(1, rows / cols)) of the tensor it holds: GPT-2's MLP output
// projection is Conv1D [4h, h] in Hugging Face files (scale 2 here, intermediate = 4 hidden),
// its input projection [h, 4h] (scale 1); Llama's down_proj is a Linear [h, i] (scale 1) and
// its up_proj [i, h] (sqrt(i / h)).
TEST(MuonEngine, ScalesEachUpdateForTheHuggingFaceShape) {
  backend::CpuBackend cpu;
  for (const std::string family : {"gpt2", "llama"}) {
    auto net = small_model(family, cpu);
    const std::vector<optim::MuonMatrix> matrices = flat_matrices(*net);
    int checked = 0;
    for (const model::Parameter* p : net->parameters()) {
      for (const optim::MuonMatrix& m : matrices) {
        if (m.offset != p->flat_offset) continue;
        EXPECT_EQ(m.rows, p->spec.shape[0]);
        EXPECT_EQ(m.cols, p->spec.shape[1]);
        const std::string& name = p->spec.name;
        ++checked;
        if (name.find("mlp.c_proj.weight") != std::string::npos) {
          EXPECT_EQ(m.update_scale, 2.0) << name;
        } else if (name.find("mlp.c_fc.weight") != std::string::npos ||
                   name.find("down_proj.weight") != std::string::npos) {
          EXPECT_EQ(m.update_scale, 1.0) << name;
        } else if (name.find("up_proj.weight") != std::string::npos) {
          EXPECT_DOUBLE_EQ(m.update_scale, std::sqrt(40.0 / 32.0)) << name;
        } else {
          --checked;
        }
      }
    }
    EXPECT_EQ(checked, 4) << family << ": two named matrices in each of two layers";
  }
}

TEST(MuonEngine, OneRankTrainsInF32AndBf16) {
  for (const bool bf16 : {false, true}) {
    for (const std::string family : {"gpt2", "llama"}) {
      backend::CpuBackend cpu;
      comm::SelfComm self;
      EngineSettings settings = muon_settings(0);
      settings.bf16.enabled = bf16;
      Engine engine(small_model(family, cpu), settings, self);
      double first = 0.0, last = 0.0;
      for (int step = 1; step <= 12; ++step) {
        const double loss = train_step(engine, 0, 0, kSeqLen)[0];  // one batch: a loss to lower
        if (step == 1) first = loss;
        last = loss;
        ASSERT_TRUE(std::isfinite(loss)) << family << " step " << step;
      }
      EXPECT_LT(last, 0.8 * first) << family << (bf16 ? " bf16" : " f32");
    }
  }
}

TEST(MuonEngine, CheckpointResumesBitForBit) {
  const fs::path dir = fs::temp_directory_path() / ("zero_muon_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  backend::CpuBackend cpu;
  comm::SelfComm self;
  const EngineSettings settings = muon_settings(0);
  Engine straight(small_model("llama", cpu), settings, self);
  for (int step = 0; step < 3; ++step) train_step(straight, step, 0, kSeqLen);
  straight.save_checkpoint(dir.string());
  std::vector<double> expected;
  for (int step = 3; step < 6; ++step) {
    expected.push_back(train_step(straight, step, 0, kSeqLen)[0]);
  }

  Engine resumed(small_model("llama", cpu), settings, self);
  resumed.load_checkpoint(dir.string());
  std::vector<double> got;
  for (int step = 3; step < 6; ++step) got.push_back(train_step(resumed, step, 0, kSeqLen)[0]);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(to_vector(resumed.gather_parameters()), to_vector(straight.gather_parameters()));
  fs::remove_all(dir);
}

// On one rank a ZeRO partition is the whole model (in partition coordinates): every stage
// takes the same steps as stage 0, bit for bit.
TEST(MuonEngine, ZeroStagesOnOneRankMatchStageZero) {
  backend::CpuBackend cpu;
  const TrainedRun expected = train_one_rank(small_model("llama", cpu), muon_settings(0), 3,
                                             kSeqLen);
  for (int stage : {1, 2, 3}) {
    const TrainedRun got = train_one_rank(small_model("llama", cpu), muon_settings(stage), 3,
                                          kSeqLen);
    EXPECT_EQ(got.losses, expected.losses) << "stage " << stage;
    EXPECT_EQ(got.params, expected.params) << "stage " << stage;
  }
}

TEST(MuonEngine, WhatItDoesNotCombineWithYetIsRefused) {
  backend::CpuBackend cpu;
  comm::SelfComm self;
  EngineSettings offload = muon_settings(2);
  offload.zero.offload_optimizer.device = config::OffloadDevice::kCpu;
  try {
    Engine engine(small_model("gpt2", cpu), offload, self);
    ADD_FAILURE() << "optimizer offload was accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_TRUE(has(e.what(), "offload_optimizer")) << e.what();
    EXPECT_TRUE(has(e.what(), "remove the offload")) << e.what();
  }
}

}  // namespace muon_engine_test
}  // namespace zero::engine
