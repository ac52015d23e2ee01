// mpi-ranks: 2 4
// Pipeline parallelism (engine/pipeline_engine.h) against one rank training the whole model on
// the same micro-batches: pp = world, and pp = 2 x dp = world / 2 with ZeRO-1; tiny GPT-2 (tied
// embeddings across the first and last stage), tiny Llama (GQA) and tiny Mixtral (experts);
// micro-batches below and above the stage count.
//
// Bit-exact where the order of every sum is the single rank's: an untied model without
// clipping at dp = 1 (each stage accumulates its micro-batch gradients in micro-batch order,
// like the single rank, and the stage-wise recompute is deterministic). Otherwise f32 to 1e-5
// relative on losses: the tied embedding's gradient is (sum of head parts) + (sum of embedding
// parts) instead of interleaved, the clipping norm is a sum of per-stage sums, and dp > 1 sums
// each replica's micro-batches before the all-reduce; Adam turns those last-bit differences
// into parameter differences bounded by 1e-4 here. Also: the executed instructions equal
// TrainSchedule's, the activation bytes sent match B*T*C*4 per micro-batch and neighbour,
// evaluation by the InferenceSchedule matches, and a checkpoint of the pipeline loads into one
// rank's whole model with every value in place (ZeRO-0 and ZeRO-1 stages). bf16 and fp16
// (mixed precision) against one rank in the same precision, to the 16-bit bounds stated below.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "comm/mesh.h"
#include "comm/self_comm.h"
#include "comm/world.h"
#include "engine/pipeline_engine.h"
#include "engine/zero_harness.h"
#include "pipeline/pipeline_schedule.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 10;
constexpr int64_t kSeqLen = 8;
constexpr int64_t kMicro = 2;
constexpr uint64_t kSeed = 11;

void set_precision(EngineSettings& s, const std::string& precision) {
  if (precision == "bf16") s.bf16.enabled = true;
  if (precision == "fp16") {
    s.fp16.enabled = true;
    s.fp16.initial_scale_power = 8;
  }
}

struct Reference {
  std::vector<std::vector<double>> losses;  // per step: micro-batch losses in index order
  std::vector<double> eval_losses;
  std::unique_ptr<Engine> engine;
};

// "gpt2-untied": GPT-2 with its own LM head weight.
model::TransformerConfig test_config(const std::string& family) {
  const bool untied = family == "gpt2-untied";
  model::TransformerConfig config = small_config(untied ? "gpt2" : family);
  if (untied) config.tie_word_embeddings = false;
  return config;
}

Reference single_rank(const std::string& family, int64_t micro_batches, double clip,
                      const std::string& precision, backend::CpuBackend& cpu,
                      comm::SelfComm& self) {
  EngineSettings s = zero_settings(0, kMicro, micro_batches, 1);
  s.gradient_clipping = clip;
  set_precision(s, precision);
  Reference ref;
  auto net = model::build_transformer(test_config(family), cpu, DType::kF32);
  model::init_parameters(*net, kSeed);
  ref.engine = std::make_unique<Engine>(std::move(net), s, self);
  for (int step = 0; step < kSteps; ++step) {
    ref.losses.push_back(train_step(*ref.engine, step, 0, kSeqLen));
  }
  return ref;
}

struct Case {
  std::string family;
  int64_t gas;        // micro-batches per replica and step
  bool all_pipeline;  // pp = world (else pp = 2, dp = world / 2, ZeRO-1)
  double clip;
  int zero = -1;                  // ZeRO stage; -1: 0 at pp = world, 1 at pp x dp
  std::string precision = "f32";  // or "bf16", "fp16" (mixed precision)
};

std::string case_name_of(const Case& c) {
  std::string family = c.family;
  for (char& ch : family) ch = ch == '-' ? '_' : ch;
  return family + "_gas" + std::to_string(c.gas) + (c.all_pipeline ? "_pp" : "_pp2dp") +
         (c.clip > 0 ? "_clip" : "") + (c.zero >= 0 ? "_z" + std::to_string(c.zero) : "") +
         (c.precision != "f32" ? "_" + c.precision : "");
}

class PipelineEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalence, MatchesOneRank) {
  const Case c = GetParam();
  comm::Comm& world = comm::world();
  const int n = world.world_size();
  comm::MeshShape shape;
  shape.pp = c.all_pipeline ? n : 2;
  shape.dp = n / shape.pp;
  if (!c.all_pipeline && shape.dp == 1) GTEST_SKIP() << "pp x dp needs 4 ranks";
  comm::Mesh mesh(world, shape);
  const int dp_rank = mesh.coordinate(comm::MeshAxis::kData);

  backend::CpuBackend ref_cpu;
  comm::SelfComm self;
  const Reference ref = single_rank(c.family, c.gas * shape.dp, c.clip, c.precision, ref_cpu, self);

  backend::CpuBackend cpu;
  EngineSettings s = zero_settings(c.zero >= 0      ? c.zero
                                   : c.all_pipeline ? 0
                                                    : 1,
                                   kMicro, c.gas, shape.dp);
  s.gradient_clipping = c.clip;
  set_precision(s, c.precision);
  const model::TransformerConfig config = test_config(c.family);
  PipelineEngine pipe(config, cpu, s, mesh, pipeline::PartitionMethod::parse("parameters"), kSeed);
  const bool exact = !config.tie_word_embeddings && c.clip == 0.0 && shape.dp == 1;
  // 16-bit: a last-bit difference in an f32 master weight (the reassociations above) can flip
  // the rounding of its 16-bit copy (bf16 steps 2^-8 relative), which changes later gradients
  // enough to flip Adam's update direction on near-zero gradient elements; an Adam update is
  // at most about lr (1e-2) per step, so parameters stay within kSteps * lr, and the losses
  // within 1e-3 relative.
  const double loss_tolerance = c.precision == "f32" ? 1e-5 : 1e-3;
  const double param_tolerance = c.precision == "f32" ? 1e-4 : kSteps * 1e-2;

  for (int step = 0; step < kSteps; ++step) {
    int64_t j = 0;
    const double loss = pipe.train_batch(
        [&] { return batch_for(step, dp_rank * c.gas + j++, kMicro, kSeqLen, config.vocab_size); });
    double expected = 0.0;
    for (int64_t i = 0; i < c.gas; ++i) expected += ref.losses[step][dp_rank * c.gas + i];
    expected /= static_cast<double>(c.gas);
    if (exact) {
      EXPECT_EQ(loss, expected) << "step " << step;
    } else {
      EXPECT_NEAR(loss, expected, loss_tolerance * std::abs(expected)) << "step " << step;
    }
    // The executed instructions are TrainSchedule's, in order.
    std::vector<pipeline::PipeInstruction> scheduled;
    for (const auto& one : pipeline::TrainSchedule(c.gas, shape.pp, pipe.stage()).steps()) {
      scheduled.insert(scheduled.end(), one.begin(), one.end());
    }
    EXPECT_EQ(pipe.executed(), scheduled) << "step " << step;
  }
  EXPECT_EQ(pipe.engine().global_steps(), kSteps);
  // Activations [B*T, C] in f32 to the next stage and their gradients back, per micro-batch.
  const int64_t per_send = kMicro * kSeqLen * config.hidden_size * (c.precision == "f32" ? 4 : 2);
  const int64_t neighbours = (pipe.is_first_stage() ? 0 : 1) + (pipe.is_last_stage() ? 0 : 1);
  EXPECT_EQ(pipe.sent_bytes(), kSteps * c.gas * neighbours * per_send);

  // A checkpoint of the pipeline loads into one rank's whole model with every value in place.
  const std::string dir =
      ::testing::TempDir() + "pipeline_ckpt_" + case_name_of(c) + "_np" + std::to_string(n);
  pipe.engine().save_checkpoint(dir, "", nlohmann::json{{"note", 1}});
  {
    backend::CpuBackend one_cpu;
    comm::SelfComm one_comm;
    auto net = model::build_transformer(config, one_cpu, DType::kF32);
    EngineSettings one = zero_settings(0, kMicro, c.gas * shape.dp, 1);
    set_precision(one, c.precision);
    Engine loaded(std::move(net), one, one_comm);
    EXPECT_EQ(loaded.load_checkpoint(dir)["note"], 1);
    EXPECT_EQ(loaded.global_steps(), kSteps);
    const std::vector<float> whole = to_vector(loaded.gather_parameters());
    const std::vector<float> mine = to_vector(pipe.engine().gather_parameters());
    for (model::Parameter* p : pipe.model().parameters()) {
      const model::Parameter& q = loaded.model().parameter(p->spec.name);
      for (int64_t i = 0; i < p->numel(); ++i) {
        ASSERT_EQ(mine[static_cast<size_t>(p->flat_offset + i)],
                  whole[static_cast<size_t>(q.flat_offset + i)])
            << p->spec.name << "[" << i << "]";
      }
    }
  }
  world.barrier();
  if (world.rank() == 0) std::filesystem::remove_all(dir);

  // Every parameter of the stage against the single rank's, by name.
  const std::vector<float> stage = to_vector(pipe.engine().gather_parameters());
  const std::vector<float> full = to_vector(ref.engine->gather_parameters());
  double worst = 0.0;
  for (model::Parameter* p : pipe.model().parameters()) {
    const model::Parameter& q = ref.engine->model().parameter(p->spec.name);
    for (int64_t i = 0; i < p->numel(); ++i) {
      const float a = stage[static_cast<size_t>(p->flat_offset + i)];
      const float b = full[static_cast<size_t>(q.flat_offset + i)];
      if (exact) {
        ASSERT_EQ(a, b) << p->spec.name << "[" << i << "]";
      }
      worst = std::max(worst, static_cast<double>(std::abs(a - b)));
    }
  }
  EXPECT_LE(worst, param_tolerance);

  // Evaluation by the forward-only schedule.
  std::vector<model::Batch> eval;
  for (int64_t i = 0; i < 3; ++i)
    eval.push_back(batch_for(99, i, kMicro, kSeqLen, config.vocab_size));
  const double eval_loss = pipe.eval_batches(eval);
  double expected_eval = 0.0;
  for (const auto& b : eval) expected_eval += ref.engine->eval_batch(b);
  expected_eval /= 3.0;
  EXPECT_NEAR(eval_loss, expected_eval, loss_tolerance * std::abs(expected_eval));
  if (exact) {
    EXPECT_EQ(eval_loss, expected_eval);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& param) {
  return case_name_of(param.param);
}

INSTANTIATE_TEST_SUITE_P(Layouts, PipelineEquivalence,
                         ::testing::Values(Case{"llama", 4, true, 0.0}, Case{"llama", 1, true, 0.0},
                                           Case{"llama", 3, true, 1.0}, Case{"gpt2", 4, true, 0.0},
                                           Case{"gpt2-untied", 4, true, 0.0},
                                           Case{"gpt2", 1, true, 1.0}, Case{"gpt2", 5, true, 1.0},
                                           Case{"llama", 4, false, 1.0},
                                           Case{"gpt2", 3, false, 1.0},
                                           Case{"gpt2", 2, false, 1.0, 0},
                                           Case{"gpt2", 4, true, 1.0, -1, "bf16"},
                                           Case{"llama", 3, true, 1.0, -1, "fp16"},
                                           Case{"llama", 2, false, 1.0, -1, "bf16"},
                                           // Mixtral's experts inside the stages.
                                           Case{"mixtral", 3, true, 1.0}),
                         case_name);

// Tied embeddings: the first stage's table and the last stage's copy stay equal.
TEST(PipelineTiedEmbedding, CopiesStayEqual) {
  comm::Comm& world = comm::world();
  comm::MeshShape shape;
  shape.pp = world.world_size();
  comm::Mesh mesh(world, shape);
  backend::CpuBackend cpu;
  const model::TransformerConfig config = small_config("gpt2");
  PipelineEngine pipe(config, cpu, zero_settings(0, kMicro, 2, 1), mesh,
                      pipeline::PartitionMethod::parse("uniform"), kSeed);
  for (int step = 0; step < 3; ++step) {
    int64_t j = 0;
    pipe.train_batch([&] { return batch_for(step, j++, kMicro, kSeqLen, config.vocab_size); });
  }
  const bool end = pipe.is_first_stage() || pipe.is_last_stage();
  ASSERT_EQ(pipe.tied_parameter() != nullptr, end);
  // Stage 0 sends its table to the last stage, which compares.
  comm::Comm& group = mesh.group(comm::MeshAxis::kPipeline);
  const int last = static_cast<int>(pipe.stages() - 1);
  if (pipe.is_first_stage()) group.send(pipe.tied_parameter()->value, last, 5);
  if (pipe.is_last_stage()) {
    Tensor first = Tensor::zeros_host(pipe.tied_parameter()->value.shape(), DType::kF32);
    group.recv(first, 0, 5);
    EXPECT_EQ(to_vector(first), to_vector(pipe.tied_parameter()->value));
  }
  EXPECT_GT(pipe.sent_bytes(), 0);
}

}  // namespace
}  // namespace zero::engine
