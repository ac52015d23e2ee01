// mpi-ranks: 4 8
// Pipeline x tensor parallelism (engine/pipeline_engine.h, engine/pipeline_stage_link.h): pp = 2
// x tp = 2 at 4 ranks (ZeRO-0) and pp = 2 x tp = 2 x dp = 2 at 8 ranks (ZeRO-1 over each (stage,
// tensor rank)'s replicas), tiny Llama (GQA) and tiny GPT-2 (tied embeddings: a vocabulary-
// parallel copy on the last stage), against one rank training the whole model on the same
// micro-batches.
//
// Precision: the stages alone (built for their tensor rank, activations and gradients through
// the partitioned link, the tied copies' gradients added) give the one-rank f64 model's losses
// and gradient slices to 1e-12 (StagesInF64). The Engine trains f32 models only (it refuses
// f64), so the training comparison with one rank is f32: losses and gradient norms to 1e-5
// relative (the tensor-parallel all-reduces, the per-stage norm sums and the tied embedding's
// two-part gradient associate the f32 sums differently), parameters to 5e-4 relative L2 (Adam moves elements whose true gradient is zero
// by the sign of rounding noise, as in mpi_test_tensor_parallel_engine.cpp). Between
// pipe_partitioned/grad_partitioned true and false the results are bit-identical (the parts
// all-gathered are the same bits), and the bytes each rank sends to its neighbours differ by
// the factor tp. Also: bf16 mixed precision (16-bit activations partitioned; 2e-2 on losses, as
// the tensor-parallel engine test), evaluation by the InferenceSchedule, the parameter
// accounting (a replica's stages at tensor rank t hold exactly rank t's tensor-parallel model),
// uneven partitioned transfers, and clear errors for checkpoints and sequence parallelism.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "core/error.h"
#include "engine/pipeline_engine.h"
#include "engine/pipeline_stage_link.h"
#include "engine/zero_harness.h"
#include "model/embedding_unit.h"
#include "model/tensor_parallel.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 10;
constexpr int64_t kSeqLen = 8;
constexpr int64_t kMicro = 2;
constexpr uint64_t kSeed = 11;
constexpr double kClip = 0.05;  // bites: the summed (pipeline x tensor) norm decides the update
constexpr double kLossTolerance = 1e-5;
constexpr double kParamTolerance = 5e-4;

comm::MeshShape pipe_tensor_shape(int world_size) {
  comm::MeshShape shape;
  shape.pp = 2;
  shape.tp = 2;
  shape.dp = world_size / 4;
  return shape;
}

std::vector<double> host_values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    out[static_cast<size_t>(i)] = static_cast<double>(t.data<float>()[i]);
  }
  return out;
}

struct Outcome {
  std::vector<double> losses;      // per step, this replica's mean
  std::vector<double> grad_norms;  // per step
  std::map<std::string, std::vector<double>> params;  // this rank's values by name
  int64_t stage_parameters = 0;   // elements this rank holds
  int64_t sent_bytes = 0;
  int64_t send_message_bytes = 0;  // the pipeline group's counted sends
  int64_t recv_message_bytes = 0;
  double eval_loss = 0.0;  // after training, by the InferenceSchedule
};

std::vector<model::Batch> eval_batches(int64_t vocab) {
  std::vector<model::Batch> out;
  for (int64_t i = 0; i < 3; ++i) out.push_back(batch_for(99, i, kMicro, kSeqLen, vocab));
  return out;
}

EngineSettings pipeline_settings(int64_t gas, bool bf16, const comm::MeshShape& shape) {
  EngineSettings s = zero_settings(shape.dp > 1 ? 1 : 0, kMicro, gas, shape.dp);
  s.gradient_clipping = kClip;
  s.bf16.enabled = bf16;
  return s;
}

// Trains kSteps steps; saves a checkpoint into `checkpoint_dir` at the end unless it is empty.
Outcome train_pipeline(const std::string& family, int64_t gas, bool bf16, comm::Mesh& mesh,
                       bool partitioned, const std::string& checkpoint_dir) {
  backend::CpuBackend cpu;
  const comm::MeshShape& shape = mesh.shape();
  const EngineSettings s = pipeline_settings(gas, bf16, shape);
  const model::TransformerConfig config = small_config(family);
  PipelineEngine pipe(config, cpu, s, mesh, pipeline::PartitionMethod::parse("parameters"), kSeed);
  pipe.set_partitioned_transfers(partitioned, partitioned);
  comm::Comm& pipe_group = mesh.group(comm::MeshAxis::kPipeline);
  pipe_group.reset_stats();
  const int dp_rank = mesh.coordinate(comm::MeshAxis::kData);
  Outcome out;
  for (int step = 0; step < kSteps; ++step) {
    int64_t j = 0;
    out.losses.push_back(pipe.train_batch(
        [&] { return batch_for(step, dp_rank * gas + j++, kMicro, kSeqLen, config.vocab_size); }));
    out.grad_norms.push_back(pipe.engine().last_grad_norm());
  }
  EXPECT_EQ(pipe.engine().global_steps(), kSteps);
  out.stage_parameters = pipe.model().num_parameters();
  out.sent_bytes = pipe.sent_bytes();
  out.send_message_bytes = pipe_group.stats().at(comm::OpKind::kSend).message_bytes;
  out.recv_message_bytes = pipe_group.stats().at(comm::OpKind::kRecv).message_bytes;
  out.eval_loss = pipe.eval_batches(eval_batches(config.vocab_size));
  if (!checkpoint_dir.empty()) {
    pipe.engine().save_checkpoint(checkpoint_dir, "", nlohmann::json{{"note", 1}});
  }
  const Tensor flat = pipe.engine().gather_parameters();
  for (model::Parameter* p : pipe.model().parameters()) {
    out.params[p->spec.name] = host_values(flat.view(p->flat_offset, {p->numel()}));
    // A tensor-parallel part where the model splits it: the stage holds this rank's slices.
    if (p->spec.name.find("mlp") != std::string::npos && p->spec.shape.size() == 2) {
      EXPECT_TRUE(p->spec.slice.has_value()) << p->spec.name;
    }
  }
  return out;
}

struct PipeTensorCase {
  std::string family;
  int64_t gas;  // micro-batches per replica and step
  bool bf16 = false;  // bf16 mixed precision on both sides: 16-bit activations travel
};

class PipelineTensorParallel : public ::testing::TestWithParam<PipeTensorCase> {};

TEST_P(PipelineTensorParallel, MatchesOneRankAndPartitionedSendsOneTpth) {
  const PipeTensorCase c = GetParam();
  comm::Comm& world = comm::world();
  const comm::MeshShape shape = pipe_tensor_shape(world.world_size());
  comm::Mesh mesh(world, shape);
  const int dp_rank = mesh.coordinate(comm::MeshAxis::kData);
  const model::TransformerConfig config = small_config(c.family);

  // One rank, the whole model, every replica's micro-batches.
  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  auto whole = model::build_transformer(config, ref_cpu, DType::kF32);
  model::init_parameters(*whole, kSeed);
  EngineSettings one = zero_settings(0, kMicro, c.gas * shape.dp, 1);
  one.gradient_clipping = kClip;
  one.bf16.enabled = c.bf16;
  Engine reference(std::move(whole), one, self);
  std::vector<std::vector<double>> ref_losses;
  std::vector<double> ref_norms;
  for (int step = 0; step < kSteps; ++step) {
    ref_losses.push_back(train_step(reference, step, 0, kSeqLen));
    ref_norms.push_back(reference.last_grad_norm());
  }
  EXPECT_GT(ref_norms.front(), kClip);

  const std::string checkpoint = ::testing::TempDir() + "pp_tp_checkpoint_" + c.family +
                                 (c.bf16 ? "_bf16" : "") + "_np" +
                                 std::to_string(world.world_size());
  const Outcome parts = train_pipeline(c.family, c.gas, c.bf16, mesh, true, checkpoint);
  const Outcome whole_sends = train_pipeline(c.family, c.gas, c.bf16, mesh, false, "");
  // bf16: every stored activation and the partial sums before each all-reduce are rounded to 8
  // bits of mantissa where one rank rounds the full sums once (mpi_test_tensor_parallel_engine).
  const double loss_tolerance = c.bf16 ? 2e-2 : kLossTolerance;
  const double param_tolerance = c.bf16 ? 100 * kParamTolerance : kParamTolerance;

  // Parameter accounting: the stages of one replica at tensor rank t hold exactly the tensor-
  // parallel model of rank t (plus the last stage's tied copy of its vocabulary rows), so a
  // rank's share falls as 1/pp on top of tensor parallelism's 1/tp (norms and row-parallel
  // biases are whole on every tensor rank, as without a pipeline).
  const double held = world.all_reduce_scalar(
      dp_rank == 0 ? static_cast<double>(parts.stage_parameters) : 0.0, comm::ReduceOp::kSum);
  int64_t tensor_parallel_models = 0;
  for (int64_t t = 0; t < shape.tp; ++t) {
    backend::CpuBackend count_cpu;
    tensor_parallel_models +=
        model::build_transformer(config, count_cpu, DType::kF32,
                                 model::TensorParallelLayout{t, shape.tp})
            ->num_parameters();
  }
  const int64_t tied_copy = config.tie_word_embeddings ? config.vocab_size * config.hidden_size : 0;
  EXPECT_EQ(held, static_cast<double>(tensor_parallel_models + tied_copy));

  for (int step = 0; step < kSteps; ++step) {
    double expected = 0.0;
    for (int64_t i = 0; i < c.gas; ++i) expected += ref_losses[step][dp_rank * c.gas + i];
    expected /= static_cast<double>(c.gas);
    EXPECT_NEAR(parts.losses[step], expected, loss_tolerance * expected) << "step " << step;
    EXPECT_NEAR(parts.grad_norms[step], ref_norms[step], loss_tolerance * ref_norms[step])
        << "step " << step;
  }
  // Every parameter this rank holds (its stage's, its tensor rank's slices) against the one
  // rank's, by logical name.
  const Tensor ref_flat = reference.gather_parameters();
  backend::CpuBackend probe_cpu;  // this tensor rank's slice metadata, by name
  auto probe = model::build_transformer(
      config, probe_cpu, DType::kF32,
      model::TensorParallelLayout{mesh.coordinate(comm::MeshAxis::kTensor), shape.tp});
  double diff = 0.0, norm = 0.0;
  for (const auto& [name, got] : parts.params) {
    const model::Parameter& full = reference.model().parameter(name);
    std::vector<double> want = host_values(ref_flat.view(full.flat_offset, {full.numel()}));
    if (got.size() != want.size()) {  // a tensor-parallel slice: the part of the full values
      const model::Parameter& part = probe->parameter(name);
      ASSERT_TRUE(part.spec.slice.has_value()) << name;
      std::vector<double> sliced(static_cast<size_t>(part.numel()));
      model::extract_tensor_slice(*part.spec.slice, want.data(), sliced.data());
      want = sliced;
    }
    ASSERT_EQ(got.size(), want.size()) << name;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - want[i]) * (got[i] - want[i]);
      norm += want[i] * want[i];
    }
  }
  EXPECT_LE(std::sqrt(diff / norm), param_tolerance);
  // Evaluation by the forward-only schedule; the parameters differ by the bound above, which
  // moves the loss by far less than 1e-4 relative.
  double expected_eval = 0.0;
  for (const model::Batch& b : eval_batches(config.vocab_size)) {
    expected_eval += reference.eval_batch(b) / 3.0;
  }
  EXPECT_NEAR(parts.eval_loss, expected_eval, (c.bf16 ? 2e-2 : 1e-4) * expected_eval);

  // The checkpoint holds the whole model by logical names: one rank's whole Engine loads it with
  // every value of every slice in place, and so does a fresh pp x tp pipeline.
  {
    backend::CpuBackend one_cpu;
    comm::SelfComm one_comm;
    EngineSettings one_settings = zero_settings(0, kMicro, c.gas * shape.dp, 1);
    one_settings.bf16.enabled = c.bf16;
    Engine loaded(model::build_transformer(config, one_cpu, DType::kF32), one_settings, one_comm);
    EXPECT_EQ(loaded.load_checkpoint(checkpoint)["note"], 1);
    EXPECT_EQ(loaded.global_steps(), kSteps);
    const Tensor loaded_flat = loaded.gather_parameters();
    for (const auto& [name, got] : parts.params) {
      const model::Parameter& full = loaded.model().parameter(name);
      std::vector<double> want = host_values(loaded_flat.view(full.flat_offset, {full.numel()}));
      const model::Parameter& part = probe->parameter(name);
      if (part.spec.slice && got.size() != want.size()) {
        std::vector<double> sliced(static_cast<size_t>(part.numel()));
        model::extract_tensor_slice(*part.spec.slice, want.data(), sliced.data());
        want = sliced;
      }
      EXPECT_EQ(got, want) << name;
    }
    // At 4 ranks: the pp 2 x tp 2 checkpoint resumes at pp 1 x tp 4 (KV heads replicated for
    // Llama): each rank's slices equal the logical values, and the next step's loss matches the
    // one rank's resumed run - to 1e-5 in f32 (tp 4 sums each matmul's partial products in
    // another order), 2e-2 in bf16 (the partial sums are rounded to bf16 before the all-reduce).
    if (world.world_size() == 4) {
      backend::CpuBackend tp_cpu;
      comm::SelfComm tp_data;
      EngineSettings tp_settings = zero_settings(0, kMicro, c.gas * shape.dp, 1);
      tp_settings.bf16.enabled = c.bf16;
      auto tp_net = model::build_transformer(config, tp_cpu, DType::kF32,
                                             model::TensorParallelLayout{world.rank(), 4});
      tp_net->set_tensor_group(&world);
      Engine tp4(std::move(tp_net), tp_settings, tp_data);
      EXPECT_EQ(tp4.load_checkpoint(checkpoint)["note"], 1);
      const Tensor tp_flat = tp4.gather_parameters();
      for (model::Parameter* p : tp4.model().parameters()) {
        const model::Parameter& full = loaded.model().parameter(p->spec.name);
        std::vector<double> want = host_values(loaded_flat.view(full.flat_offset, {full.numel()}));
        if (p->spec.slice) {
          std::vector<double> sliced(static_cast<size_t>(p->numel()));
          model::extract_tensor_slice(*p->spec.slice, want.data(), sliced.data());
          want = sliced;
        }
        EXPECT_EQ(host_values(tp_flat.view(p->flat_offset, {p->numel()})), want) << p->spec.name;
      }
      const std::vector<double> tp_next = train_step(tp4, kSteps, 0, kSeqLen);
      const std::vector<double> one_next = train_step(loaded, kSteps, 0, kSeqLen);
      ASSERT_EQ(tp_next.size(), one_next.size());
      for (size_t i = 0; i < tp_next.size(); ++i) {
        EXPECT_NEAR(tp_next[i], one_next[i], (c.bf16 ? 2e-2 : 1e-5) * std::abs(one_next[i])) << i;
      }
    }
    backend::CpuBackend again_cpu;
    PipelineEngine again(config, again_cpu, pipeline_settings(c.gas, c.bf16, shape), mesh,
                         pipeline::PartitionMethod::parse("parameters"), kSeed + 1);
    EXPECT_EQ(again.engine().load_checkpoint(checkpoint)["note"], 1);
    const Tensor again_flat = again.engine().gather_parameters();
    for (model::Parameter* p : again.model().parameters()) {
      EXPECT_EQ(host_values(again_flat.view(p->flat_offset, {p->numel()})),
                parts.params.at(p->spec.name))
          << p->spec.name;
    }
  }
  world.barrier();
  if (world.rank() == 0) std::filesystem::remove_all(checkpoint);

  // pipe_partitioned / grad_partitioned change the traffic, not the numbers.
  EXPECT_EQ(parts.losses, whole_sends.losses);
  EXPECT_EQ(parts.grad_norms, whole_sends.grad_norms);
  EXPECT_EQ(parts.params, whole_sends.params);
  EXPECT_EQ(parts.eval_loss, whole_sends.eval_loss);
  // Per micro-batch, an activation [B*T, C] (f32, or bf16) forward and its gradient back, per
  // neighbour; partitioned, 1/tp of it (B*T*C divides by tp here).
  const int64_t activation_bytes = kMicro * kSeqLen * config.hidden_size * (c.bf16 ? 2 : 4);
  const int64_t transfers = kSteps * c.gas;  // each direction, per neighbour
  EXPECT_EQ(whole_sends.sent_bytes, transfers * activation_bytes);
  EXPECT_EQ(parts.sent_bytes, transfers * activation_bytes / shape.tp);
  EXPECT_EQ(whole_sends.send_message_bytes, shape.tp * parts.send_message_bytes);
  EXPECT_EQ(whole_sends.recv_message_bytes, shape.tp * parts.recv_message_bytes);
  EXPECT_EQ(parts.recv_message_bytes, transfers * activation_bytes / shape.tp);
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineTensorParallel,
                         ::testing::Values(PipeTensorCase{"llama", 3}, PipeTensorCase{"gpt2", 2},
                                           PipeTensorCase{"gpt2", 2, true}),
                         [](const auto& param_info) {
                           return param_info.param.family + "_gas" +
                                  std::to_string(param_info.param.gas) +
                                  (param_info.param.bf16 ? "_bf16" : "");
                         });

// The stages themselves in f64, run by hand for two accumulated micro-batches with partitioned
// transfers (no Engine: it trains f32 only): the last stage's losses and every gradient slice of
// every stage equal the one-rank model's to 1e-12 relative (the tensor-parallel all-reduces and
// the tied embedding's two parts only reorder sums).
std::vector<double> f64_values(const Tensor& t) {
  return std::vector<double>(t.data<double>(), t.data<double>() + t.numel());
}

// max |a - b| <= tolerance * max |b|.
void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(worst, tolerance * std::max(scale, 1e-300)) << what << ": max difference " << worst;
}

class StagesInF64 : public ::testing::TestWithParam<std::string> {};

TEST_P(StagesInF64, LossAndGradientSlicesEqualTheWholeModel) {
  const std::string family = GetParam();
  comm::Comm& world = comm::world();
  const comm::MeshShape shape = pipe_tensor_shape(world.world_size());
  comm::Mesh mesh(world, shape);
  comm::Comm& pipe = mesh.group(comm::MeshAxis::kPipeline);
  comm::Comm& tensor = mesh.group(comm::MeshAxis::kTensor);
  backend::CpuBackend cpu;
  const model::TransformerConfig config = small_config(family);
  auto full = model::build_transformer(config, cpu, DType::kF64);
  model::init_parameters(*full, kSeed);
  const std::vector<int64_t> parts =
      plan_pipeline_stages(config, shape.pp, pipeline::PartitionMethod::parse("parameters"));
  const int stage = pipe.rank();
  auto part = model::build_transformer_stage(
      config, cpu, DType::kF64, parts[static_cast<size_t>(stage)],
      parts[static_cast<size_t>(stage) + 1],
      model::TensorParallelLayout{tensor.rank(), tensor.world_size()});
  model::init_parameters(*part, kSeed);
  part->set_tensor_group(&tensor);
  PipelineStageLink link(pipe, &tensor, cpu);
  const int64_t rows = kMicro * kSeqLen;

  for (int64_t micro = 0; micro < 2; ++micro) {
    const model::Batch batch = batch_for(0, micro, kMicro, kSeqLen, config.vocab_size);
    const double want = full->forward_backward(batch, 1.0);
    model::StepContext ctx{cpu, batch};
    ctx.device_batch = model::upload_batch(cpu, batch, config.vocab_size);
    ctx.tensor_group = &tensor;
    if (stage == 0) {
      const Tensor y = part->forward_stage(ctx, Tensor());
      Tensor out = cpu.empty(y.shape(), y.dtype(), MemoryCategory::kActivations);
      cpu.copy(out, y);
      link.send(out, 1, 1, true);
      Tensor dy = cpu.empty(out.shape(), out.dtype(), MemoryCategory::kActivations);
      link.recv(dy, 1, 2, true);
      part->backward_stage(ctx, dy);
    } else {
      Tensor x = cpu.empty({rows, config.hidden_size}, DType::kF64, MemoryCategory::kActivations);
      link.recv(x, 0, 1, true);
      const double got = cpu.read_scalar(part->forward_stage(ctx, x));
      EXPECT_LE(std::fabs(got - want), 1e-12 * std::fabs(want)) << "micro-batch " << micro;
      const Tensor dx = part->backward_stage(ctx, Tensor());
      Tensor back = cpu.empty(dx.shape(), dx.dtype(), MemoryCategory::kActivations);
      cpu.copy(back, dx);
      link.send(back, 0, 2, true);
    }
  }
  // Tied embeddings: the first stage's table and the last stage's copy add their gradients.
  if (config.tie_word_embeddings) {
    auto* embedding = dynamic_cast<model::EmbeddingUnit*>(full->units().front().get());
    ASSERT_NE(embedding, nullptr);
    pipe.all_reduce(part->parameter(embedding->token_embedding().spec.name).grad,
                    comm::ReduceOp::kSum);
  }
  for (model::Parameter* p : part->parameters()) {
    const model::Parameter& f = full->parameter(p->spec.name);
    std::vector<double> want = f64_values(f.grad);
    if (p->spec.slice) {
      std::vector<double> sliced(static_cast<size_t>(p->numel()));
      model::extract_tensor_slice(*p->spec.slice, want.data(), sliced.data());
      want = sliced;
    }
    expect_close(f64_values(p->grad), want, 1e-12, "gradient of " + p->spec.name);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, StagesInF64, ::testing::Values("llama", "gpt2"),
                         [](const auto& param_info) { return std::string(param_info.param); });

// A tensor whose element count tp does not divide: the parts are padded to equal size and the
// receiver gets every element back, partitioned as whole.
TEST(PipelineStageLink, UnevenPartsArriveWhole) {
  comm::Comm& world = comm::world();
  comm::Mesh mesh(world, pipe_tensor_shape(world.world_size()));
  backend::CpuBackend cpu;
  comm::Comm& pipe = mesh.group(comm::MeshAxis::kPipeline);
  comm::Comm& tensor = mesh.group(comm::MeshAxis::kTensor);
  PipelineStageLink link(pipe, &tensor, cpu);
  EXPECT_EQ(link.part_elements(7), 4);
  constexpr int64_t kCount = 7;
  for (const bool partitioned : {true, false}) {
    if (pipe.rank() == 0) {
      Tensor t = cpu.empty({kCount}, DType::kF32, MemoryCategory::kActivations);
      for (int64_t i = 0; i < kCount; ++i) t.data<float>()[i] = 1.5f * static_cast<float>(i) + 1;
      const int64_t bytes = link.send(t, 1, 5, partitioned);
      EXPECT_EQ(bytes, (partitioned ? 4 : kCount) * 4) << partitioned;
    } else {
      Tensor t = cpu.zeros({kCount}, DType::kF32, MemoryCategory::kActivations);
      link.recv(t, 0, 5, partitioned);
      for (int64_t i = 0; i < kCount; ++i) {
        EXPECT_EQ(t.data<float>()[i], 1.5f * static_cast<float>(i) + 1) << i << " " << partitioned;
      }
    }
  }
}

// Sequence parallelism with a pipeline is not built: a clear error naming both.
TEST(PipelineTensorParallelLimits, SequenceParallelismIsRefused) {
  comm::Comm& world = comm::world();
  comm::MeshShape shape;
  shape.pp = 2;
  shape.sp = 2;
  shape.dp = world.world_size() / 4;
  comm::Mesh mesh(world, shape);
  backend::CpuBackend cpu;
  EngineSettings s = zero_settings(0, kMicro, 2, shape.dp);
  s.sequence_parallel_size = 2;
  try {
    PipelineEngine pipe(small_config("llama"), cpu, s, mesh,
                        pipeline::PartitionMethod::parse("parameters"), kSeed);
    ADD_FAILURE() << "pipeline x sequence parallelism was accepted";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_parallel_size 2 with pipeline parallelism"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zero::engine
