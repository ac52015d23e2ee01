// mpi-ranks: 2 4
// Checkpoints of tensor-parallel runs (engine/tensor_parallel_checkpoint.h): stored by logical
// parameter name and offsets, so a run saved at (tp, dp) resumes at any other layout.
//   * Saved at tp x dp (tp = 2 on two ranks, tp = 2 x dp = 2 on four; also saved without tensor
//     parallelism, and at tp = 4), resumed at the same layout: the continued run equals the
//     uninterrupted one bit for bit (losses and parameters).
//   * Resumed at other layouts (tp = 1 alone, tp = 1 x dp = world, tp = 2, tp = 4, other ZeRO
//     stages) and saved again at once: the two checkpoints hold the same logical tensors (master
//     weights and optimizer states) bit for bit, so nothing was lost or misplaced in either
//     direction; and the continued losses equal a one-rank Engine's within 1e-5 relative (f32,
//     the Engine's dtype: the layouts associate sums differently, as in
//     mpi_test_tensor_parallel_engine.cpp).
//   * save_hf_model of a tensor-parallel model (collective over the tensor group) gives the
//     bytes of the whole model's export, and `zero convert` of a tp = 2 checkpoint gives the
//     bytes of the same state's tp = 1 checkpoint's conversion.
//   * A checkpoint whose logical shapes do not match the model is refused naming the tensor.
#include <gtest/gtest.h>


#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "core/error.h"
#include "engine/checkpoint_convert.h"
#include "engine/checkpoint_tensors.h"
#include "engine/engine_state.h"
#include "engine/zero_harness.h"
#include "model/hf_checkpoint.h"
#include "model/tensor_parallel.h"
#include "support/job_directory.h"

namespace zero::engine {
namespace {
namespace fs = std::filesystem;
using zero_test::small_config;
using zero_test::train_step;
using zero_test::zero_settings;

// Every step trains kGlobalMicro micro-batches of kMicro sequences, whatever the data-parallel
// size (gas = kGlobalMicro / dp), so all layouts see the same data.
constexpr int64_t kMicro = 2, kGlobalMicro = 4, kSeq = 8;
// zero_settings' linear warmup gives the first optimizer step lr 0: save after three.
constexpr int kSavedAt = 3, kSteps = 5;

// One Engine at a (tp, dp) layout over `group` (dp = group size / tp), and its mesh.
struct Layout {
  int tp = 1;
  int stage = 0;
};

struct TpEngine {
  std::unique_ptr<comm::Mesh> mesh;
  std::unique_ptr<Engine> engine;
  int data_rank = 0;
};

TpEngine make_engine(backend::Backend& cpu, comm::Comm& group, const model::TransformerConfig& config,
                     Layout layout) {
  const int dp = group.world_size() / layout.tp;
  TpEngine out;
  out.mesh = std::make_unique<comm::Mesh>(group, comm::MeshShape{1, dp, 1, layout.tp});
  auto part = model::build_transformer(
      config, cpu, DType::kF32,
      model::TensorParallelLayout{out.mesh->coordinate(comm::MeshAxis::kTensor), layout.tp});
  model::init_parameters(*part, 11);
  if (layout.tp > 1) part->set_tensor_group(&out.mesh->group(comm::MeshAxis::kTensor));
  out.engine = std::make_unique<Engine>(std::move(part),
                                        zero_settings(layout.stage, kMicro, kGlobalMicro / dp, dp),
                                        out.mesh->data_sequence_group());
  out.data_rank = out.mesh->coordinate(comm::MeshAxis::kData);
  return out;
}

std::vector<float> host_values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

// Every logical tensor of a checkpoint (master values and optimizer states), in manifest order.
std::vector<std::vector<float>> logical_tensors(const fs::path& dir, const std::string& tag) {
  const EngineState state = read_engine_state((dir / tag).string());
  const CheckpointTensors tensors((dir / tag).string(), state);
  std::vector<std::vector<float>> out;
  for (const ManifestEntry& p : state.parameters) {
    out.emplace_back(static_cast<size_t>(p.numel));
    tensors.read(p.name, "", 0, p.numel, out.back().data());
    for (const std::string& name : state.optimizer_state_names) {
      out.emplace_back(static_cast<size_t>(p.numel));
      tensors.read(p.name, name, 0, p.numel, out.back().data());
    }
  }
  return out;
}

// Bit for bit (a -0.0 or NaN payload that moved would show).
void expect_same_bits(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << " tensor " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
        << what << ": logical tensor " << i << " differs";
  }
}

std::string file_bytes(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return "";
  std::string bytes(static_cast<size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

struct SaveCase {
  std::string family;
  int tp;  // saved at tp x (world / tp)
  int stage;
};

class TensorParallelCheckpointTest : public ::testing::TestWithParam<SaveCase> {};

TEST_P(TensorParallelCheckpointTest, ResumesAtEveryLayout) {
  const SaveCase c = GetParam();
  comm::Comm& world = comm::world();
  if (world.world_size() % c.tp != 0) GTEST_SKIP() << "tp does not divide the world";
  const fs::path dir = zero::testing::job_directory(world, "zero_tp_ckpt");
  const model::TransformerConfig config = small_config(c.family);
  backend::CpuBackend cpu;
  const Layout saved_layout{c.tp, c.stage};

  // The one-rank reference: all kGlobalMicro micro-batches accumulated in order.
  comm::SelfComm self;
  std::vector<double> reference_losses;
  {
    TpEngine one = make_engine(cpu, self, config, Layout{1, 0});
    for (int step = 0; step < kSteps; ++step) {
      for (double loss : train_step(*one.engine, step, 0, kSeq)) reference_losses.push_back(loss);
    }
  }
  // The uninterrupted run at the saving layout.
  std::vector<double> straight_losses;
  std::vector<float> straight_params;
  {
    TpEngine straight = make_engine(cpu, world, config, saved_layout);
    for (int step = 0; step < kSteps; ++step) {
      for (double loss : train_step(*straight.engine, step, straight.data_rank, kSeq)) {
        straight_losses.push_back(loss);
      }
    }
    straight_params = host_values(straight.engine->gather_parameters());
  }
  {
    TpEngine first = make_engine(cpu, world, config, saved_layout);
    for (int step = 0; step < kSavedAt; ++step) train_step(*first.engine, step, first.data_rank, kSeq);
    first.engine->save_checkpoint((dir / "saved").string(), "tag");
  }
  // Same layout: bit for bit.
  {
    TpEngine again = make_engine(cpu, world, config, saved_layout);
    again.engine->load_checkpoint((dir / "saved").string());
    EXPECT_EQ(again.engine->global_steps(), kSavedAt);
    std::vector<double> losses;
    for (int step = kSavedAt; step < kSteps; ++step) {
      for (double loss : train_step(*again.engine, step, again.data_rank, kSeq)) losses.push_back(loss);
    }
    const std::vector<double> want(straight_losses.end() - static_cast<long>(losses.size()),
                                   straight_losses.end());
    EXPECT_EQ(losses, want);
    EXPECT_EQ(host_values(again.engine->gather_parameters()), straight_params);
  }
  const std::vector<std::vector<float>> saved = logical_tensors(dir / "saved", "tag");

  // Other layouts over the whole job, and one rank alone.
  struct Resume {
    comm::Comm* group;
    Layout layout;
    std::string name;
  };
  std::vector<Resume> resumes = {{&self, {1, 0}, "alone_rank" + std::to_string(world.rank())},
                                 {&world, {1, 3}, "tp1_zero3"}};
  if (world.world_size() % 2 == 0) resumes.push_back({&world, {2, c.stage == 2 ? 1 : 2}, "tp2"});
  if (world.world_size() % 4 == 0) resumes.push_back({&world, {4, 1}, "tp4_zero1"});
  for (const Resume& r : resumes) {
    SCOPED_TRACE(r.name);
    TpEngine resumed = make_engine(cpu, *r.group, config, r.layout);
    resumed.engine->load_checkpoint((dir / "saved").string());
    resumed.engine->save_checkpoint((dir / r.name).string(), "tag");
    expect_same_bits(logical_tensors(dir / r.name, "tag"), saved, "saved again at " + r.name);
    const int dp = r.group->world_size() / r.layout.tp;
    for (int step = kSavedAt; step < kSteps; ++step) {
      const std::vector<double> losses = train_step(*resumed.engine, step, resumed.data_rank, kSeq);
      for (size_t j = 0; j < losses.size(); ++j) {
        const double want = reference_losses[static_cast<size_t>(
            step * kGlobalMicro + resumed.data_rank * (kGlobalMicro / dp) + static_cast<int>(j))];
        EXPECT_NEAR(losses[j], want, 1e-5 * want) << "step " << step << " micro " << j;
      }
    }
  }
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TensorParallelCheckpointTest,
                         ::testing::Values(SaveCase{"llama", 2, 1}, SaveCase{"gpt2", 2, 0},
                                           SaveCase{"gpt2", 2, 2}, SaveCase{"llama", 1, 2},
                                           SaveCase{"llama", 4, 0}),
                         [](const auto& param_info) {
                           return param_info.param.family + "_tp" + std::to_string(param_info.param.tp) +
                                  "_zero" + std::to_string(param_info.param.stage);
                         });

// save_hf_model gathers the parts: a tensor-parallel model's folder is the whole model's, byte
// for byte (fresh, and after training: the tp = 1 engine resumed from the tp = world checkpoint
// holds the same weights); `zero convert` of the tp checkpoint and of the same state saved at
// tp = 1 give those bytes too.
TEST(TensorParallelHfExport, GivesTheWholeModelsFolder) {
  comm::Comm& world = comm::world();
  const fs::path dir = zero::testing::job_directory(world, "zero_tp_hf");
  backend::CpuBackend cpu;
  const model::TransformerConfig config = small_config("gpt2");  // fused c_attn, Conv1D, odd vocab
  const int tp = world.world_size();
  const std::string rank_dir = "rank" + std::to_string(world.rank());

  TpEngine part = make_engine(cpu, world, config, Layout{tp, 1});
  model::save_hf_model(part.engine->model(), (dir / "fresh_tp").string(), DType::kF32);
  auto whole = model::build_transformer(config, cpu, DType::kF32);
  model::init_parameters(*whole, 11);
  model::save_hf_model(*whole, (dir / rank_dir / "fresh_whole").string(), DType::kF32);
  world.barrier();
  EXPECT_EQ(file_bytes(dir / "fresh_tp" / "model.safetensors"),
            file_bytes(dir / rank_dir / "fresh_whole" / "model.safetensors"));
  EXPECT_EQ(file_bytes(dir / "fresh_tp" / "config.json"),
            file_bytes(dir / rank_dir / "fresh_whole" / "config.json"));

  for (int step = 0; step < kSavedAt; ++step) train_step(*part.engine, step, part.data_rank, kSeq);
  part.engine->save_checkpoint((dir / "ckpt_tp").string(), "tag");
  model::save_hf_model(part.engine->model(), (dir / "trained_tp").string(), DType::kF32);
  world.barrier();

  comm::SelfComm self;
  TpEngine one = make_engine(cpu, self, config, Layout{1, 0});
  one.engine->load_checkpoint((dir / "ckpt_tp").string());
  one.engine->save_checkpoint((dir / rank_dir / "ckpt_one").string(), "tag");
  model::save_hf_model(one.engine->model(), (dir / rank_dir / "trained_one").string(), DType::kF32);
  convert_checkpoint_to_hf((dir / "ckpt_tp").string(), "", (dir / rank_dir / "convert_tp").string(),
                           DType::kF32);
  convert_checkpoint_to_hf((dir / rank_dir / "ckpt_one").string(), "",
                           (dir / rank_dir / "convert_one").string(), DType::kF32);
  const std::string want = file_bytes(dir / "trained_tp" / "model.safetensors");
  ASSERT_FALSE(want.empty());
  EXPECT_NE(want, file_bytes(dir / "fresh_tp" / "model.safetensors"));  // training moved it
  EXPECT_EQ(file_bytes(dir / rank_dir / "trained_one" / "model.safetensors"), want);
  EXPECT_EQ(file_bytes(dir / rank_dir / "convert_tp" / "model.safetensors"), want);
  EXPECT_EQ(file_bytes(dir / rank_dir / "convert_one" / "model.safetensors"), want);
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

// A tensor-parallel checkpoint of another model: the logical shapes differ, and the error names
// the tensor and both shapes before anything is loaded.
TEST(TensorParallelCheckpointErrors, AnotherModelsShapesAreRefusedNamingTheTensor) {
  comm::Comm& world = comm::world();
  const fs::path dir = zero::testing::job_directory(world, "zero_tp_bad");
  backend::CpuBackend cpu;
  model::TransformerConfig config = small_config("llama");
  {
    TpEngine saver = make_engine(cpu, world, config, Layout{2, 1});
    saver.engine->save_checkpoint(dir.string(), "tag");
  }
  config.intermediate_size = 48;  // splits at tp = 2 too
  TpEngine other = make_engine(cpu, world, config, Layout{2, 1});
  try {
    other.engine->load_checkpoint(dir.string());
    ADD_FAILURE() << "loaded a checkpoint of another model";
  } catch (const FileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("[40, 32]"), std::string::npos) << message;
    EXPECT_NE(message.find("[48, 32]"), std::string::npos) << message;
  }
  EXPECT_EQ(other.engine->global_steps(), 0);
  world.barrier();
  if (world.rank() == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace zero::engine
