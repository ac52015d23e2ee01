// mpi-ranks: 2 4
// Tensor parallelism under the Engine with ZeRO stages 0-3 (engine/tensor_parallel_norm.h):
// tp = world (dp = 1), and at 4 ranks also tp = 2 x dp = 2 and tp = 2 x sp = 2 (Ulysses; comm::
// Mesh), and bf16 mixed precision. Three optimizer steps with gradient clipping that bites;
// every micro-batch's loss, every step's gradient norm and the final parameters equal a one-rank
// Engine's (built in-process on every rank, fed the same global micro-batches), the parameters
// compared slice by slice. f32 (the Engine's dtype): losses and norms to 1e-5 relative
// (reordered f32 sums), parameters to 5e-4 relative L2 (see kParamTolerance); bf16: 2e-2 and
// 5e-2 (8-bit mantissas, rounded at different places).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "core/error.h"
#include "engine/tensor_parallel_norm.h"
#include "engine/zero_harness.h"
#include "model/tensor_parallel.h"

namespace zero::engine {
namespace {

using zero_test::small_config;
using zero_test::train_step;
using zero_test::zero_settings;

constexpr int64_t kMicro = 2, kGas = 2, kSeq = 8, kSteps = 3;
constexpr DType kParams = DType::kF32;  // the Engine trains f32 models
// Adam's first steps move every element by about +-lr whatever its gradient's size, so elements
// whose true gradient is zero (the attention key bias: softmax ignores a per-row constant) move
// by the sign of rounding noise, which differs between the reordered sums: the parameters
// differ by far more than the gradients do.
constexpr double kParamTolerance = 5e-4;

std::vector<double> values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[static_cast<size_t>(i)] = t.dtype() == DType::kF64 ? t.data<double>()[i]
                                                           : static_cast<double>(t.data<float>()[i]);
  }
  return out;
}

struct TpEngineCase {
  std::string family;
  int stage;
  int tp;  // 0: the whole world
  int sp = 1;  // Ulysses sequence parallelism on top (the ranks of a sequence group share batches)
  bool bf16 = false;  // bf16 mixed precision on both sides (16-bit activations all-reduced)
};

class TensorParallelEngineTest : public ::testing::TestWithParam<TpEngineCase> {};

TEST_P(TensorParallelEngineTest, MatchesOneRankEngine) {
  const TpEngineCase c = GetParam();
  comm::Comm& world = comm::world();
  const int tp = c.tp == 0 ? world.world_size() : c.tp;
  if (world.world_size() % (tp * c.sp) != 0) GTEST_SKIP() << "tp x sp does not divide the world";
  const int dp = world.world_size() / (tp * c.sp);
  comm::Mesh mesh(world, comm::MeshShape{1, dp, c.sp, tp});
  backend::CpuBackend cpu;
  const model::TransformerConfig config = small_config(c.family);

  auto part = model::build_transformer(
      config, cpu, kParams,
      model::TensorParallelLayout{mesh.coordinate(comm::MeshAxis::kTensor), tp});
  model::init_parameters(*part, 11);
  part->set_tensor_group(&mesh.group(comm::MeshAxis::kTensor));
  EngineSettings settings = zero_settings(c.stage, kMicro, kGas, dp);
  settings.gradient_clipping = 0.05;  // bites: the norm decides the update
  settings.sequence_parallel_size = c.sp;
  settings.bf16.enabled = c.bf16;
  Engine engine(std::move(part), settings, mesh.data_sequence_group(),
                c.sp > 1 ? &mesh.group(comm::MeshAxis::kSequence) : nullptr);

  comm::SelfComm self;
  auto whole = model::build_transformer(config, cpu, kParams);
  model::init_parameters(*whole, 11);
  EngineSettings reference_settings = zero_settings(0, kMicro, kGas * dp, 1);
  reference_settings.bf16.enabled = c.bf16;
  Engine reference(std::move(whole), reference_settings, self);
  // bf16: every stored activation and the partial sums before the all-reduce are rounded to 8
  // bits of mantissa, where the one-rank model rounds the full sums once.
  const double tolerance = c.bf16 ? 2e-2 : 1e-5;

  const int data_rank = mesh.coordinate(comm::MeshAxis::kData);
  for (int64_t step = 0; step < kSteps; ++step) {
    const std::vector<double> losses = train_step(engine, step, data_rank, kSeq);
    const std::vector<double> want = train_step(reference, step, 0, kSeq);
    for (size_t j = 0; j < losses.size(); ++j) {  // this rank's micro-batches in the reference's
      const double expected = want[static_cast<size_t>(data_rank) * losses.size() + j];
      EXPECT_NEAR(losses[j], expected, tolerance * expected) << "step " << step << " micro " << j;
    }
    EXPECT_NEAR(engine.last_grad_norm(), reference.last_grad_norm(),
                tolerance * reference.last_grad_norm())
        << "step " << step;
  }
  EXPECT_GT(reference.last_grad_norm(), settings.gradient_clipping);

  // Relative L2 distance over all of this rank's parameters (as the ZeRO equivalence tests).
  // The parameters in each model's flat layout, f32, whatever ZeRO and the precision store.
  const Tensor part_flat = engine.gather_parameters();
  const Tensor whole_flat = reference.gather_parameters();
  double diff = 0.0, norm = 0.0;
  for (model::Parameter* p : engine.model().parameters()) {
    const model::Parameter& f = reference.model().parameter(p->spec.name);
    std::vector<double> want = values(whole_flat.view(f.flat_offset, {f.numel()}));
    if (p->spec.slice) {
      std::vector<double> part_values(static_cast<size_t>(p->numel()));
      model::extract_tensor_slice(*p->spec.slice, want.data(), part_values.data());
      want = part_values;
    }
    const std::vector<double> got = values(part_flat.view(p->flat_offset, {p->numel()}));
    ASSERT_EQ(got.size(), want.size()) << p->spec.name;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
  }
  EXPECT_LE(std::sqrt(diff / norm), c.bf16 ? 100 * kParamTolerance : kParamTolerance);
  // Checkpoints: mpi_test_tensor_parallel_checkpoint.cpp.
}

INSTANTIATE_TEST_SUITE_P(Stages, TensorParallelEngineTest,
                         ::testing::Values(TpEngineCase{"gpt2", 0, 0}, TpEngineCase{"llama", 1, 0},
                                           TpEngineCase{"gpt2", 2, 0}, TpEngineCase{"llama", 2, 2},
                                           TpEngineCase{"gpt2", 1, 2},
                                           TpEngineCase{"llama", 2, 2, 2},
                                           TpEngineCase{"gpt2", 1, 2, 2},
                                           TpEngineCase{"llama", 2, 0, 1, true},
                                           TpEngineCase{"gpt2", 3, 2}, TpEngineCase{"llama", 3, 0}),
                         [](const auto& param_info) {
                           return param_info.param.family + "_zero" +
                                  std::to_string(param_info.param.stage) + "_tp" +
                                  std::to_string(param_info.param.tp) + "_sp" +
                                  std::to_string(param_info.param.sp) +
                                  (param_info.param.bf16 ? "_bf16" : "");
                         });

// partition_activations under the Engine: the checkpointed block inputs are partitioned over the
// tensor-parallel group (the ranks that hold identical inputs, DeepSpeed's model-parallel
// group): every rank keeps 1/tp of each, the losses and gradient norms are bit-identical to plain
// checkpointing at the same tp, and the saved bytes fall by tp (up to the last piece's padding).
TEST(TensorParallelPartitionedActivations, KeepOneTpthOfEachInputAndChangeNoBit) {
  comm::Comm& world = comm::world();
  const int tp = world.world_size();
  comm::Mesh mesh(world, comm::MeshShape{1, 1, 1, tp});
  backend::CpuBackend cpu;
  const model::TransformerConfig config = small_config("llama");
  auto run = [&](bool partition, std::vector<double>& losses, std::vector<double>& norms) {
    auto part = model::build_transformer(
        config, cpu, kParams,
        model::TensorParallelLayout{mesh.coordinate(comm::MeshAxis::kTensor), tp});
    model::init_parameters(*part, 11);
    part->set_tensor_group(&mesh.group(comm::MeshAxis::kTensor));
    part->set_activation_checkpointing(true);
    EngineSettings settings = zero_settings(0, kMicro, kGas, 1);
    settings.activation_checkpointing.partition_activations = partition;
    Engine engine(std::move(part), settings, mesh.data_sequence_group());
    for (int64_t step = 0; step < 2; ++step) {
      for (double loss : train_step(engine, step, 0, kSeq)) losses.push_back(loss);
      norms.push_back(engine.last_grad_norm());
    }
    return engine.model().activation_checkpointer().memory().peak_device_bytes;
  };
  std::vector<double> plain_losses, plain_norms, part_losses, part_norms;
  const size_t plain_bytes = run(false, plain_losses, plain_norms);
  const size_t part_bytes = run(true, part_losses, part_norms);
  EXPECT_EQ(part_losses, plain_losses);
  EXPECT_EQ(part_norms, plain_norms);
  ASSERT_GT(plain_bytes, 0u);
  // ceil(numel / tp) elements per rank and input: at most one element of padding per input.
  const size_t inputs = static_cast<size_t>(config.num_layers);
  EXPECT_LE(part_bytes, plain_bytes / static_cast<size_t>(tp) + inputs * sizeof(float));
  EXPECT_GE(part_bytes, plain_bytes / static_cast<size_t>(tp));
}

TEST(TensorParallelNormWeight, CountsEveryElementOnce) {
  model::ParamSpec whole{"w", {4}};
  EXPECT_EQ(tensor_parallel_norm_weight(whole, 4), 0.25);
  model::ParamSpec slice{"s", {2, 4}};
  slice.slice = model::make_tensor_slice(slice.shape, 0, 2, 1);
  EXPECT_EQ(tensor_parallel_norm_weight(slice, 2), 1.0);
  slice.slice->replicas = 2;
  EXPECT_EQ(tensor_parallel_norm_weight(slice, 4), 0.5);
}

}  // namespace
}  // namespace zero::engine
