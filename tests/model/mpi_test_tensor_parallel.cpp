// mpi-ranks: 2 4
// Tensor parallelism (model/tensor_parallel.h, model/vocab_parallel.h) over every rank of the
// job: a model built for tensor-parallel rank r of tp holds only its slices of the blocks'
// weights and its vocabulary rows of the embedding and the head (vocabularies of 67 and 71 rows:
// uneven parts), and after two
// accumulated micro-batches its loss and every gradient equal the one-rank model's (built and
// run in-process on every rank), sliced the same way. Tiny GPT-2 (tied embeddings, biases, GELU,
// learned positions) and tiny Llama (RMSNorm, SwiGLU, RoPE, GQA: key/value heads split at
// tp = 2 and replicated at tp = 4; one key/value head with q/k/v biases, replicated at both).
// Tolerances: f64 1e-12 relative (the all-reduces only reorder sums); f32 parameters 1e-5
// relative (f32 rounding of reordered sums); bf16 activations 3e-2 relative (every stored
// activation is rounded to 8 bits of mantissa, and partial sums are rounded before the
// all-reduce where the one-rank model rounds the total once).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "comm/host_staged_comm.h"
#include "comm/world.h"
#include "core/error.h"
#include "model/hf_checkpoint.h"
#include "model/tensor_parallel.h"
#include "model/transformer_builder.h"

namespace zero::model {
namespace {

struct TpCase {
  std::string label;
  std::string family = "llama";
  int64_t kv_heads = 2;
  bool qkv_bias = false;
  DType params = DType::kF64;
  std::optional<DType> activations = std::nullopt;
  bool checkpointing = false;
  int64_t mlp_shards = 1;
  int64_t logits_shards = 1;
  bool simulated = false;
  double tolerance = 1e-12;
};

TransformerConfig tiny_config(const TpCase& c) {
  TransformerConfig config = preset_config(c.family == "gpt2"    ? "tiny"
                                           : c.family == "qwen3" ? "tiny-qwen3"
                                                                 : "tiny-llama");
  config.vocab_size = c.family == "gpt2" ? 67 : 71;
  config.hidden_size = 16;
  config.num_layers = 2;
  config.num_heads = 4;
  config.num_kv_heads = c.family == "gpt2" ? 4 : c.kv_heads;
  config.head_dim = c.family == "qwen3" ? 6 : 4;  // Qwen3: q/k widths apart from hidden
  config.intermediate_size = c.family == "gpt2" ? 64 : 40;
  config.max_position_embeddings = 32;
  if (c.qkv_bias) config.qkv_bias = true;
  return config;
}

Batch make_batch(int64_t step, int64_t vocab) {
  Tensor ids = Tensor::zeros_host({2, 8}, DType::kI64);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.data<int64_t>()[i] = (i * 29 + 7 + step * 13) % vocab;
  }
  Batch b = batch_from_input_ids(ids);
  b.targets.data<int64_t>()[3 + step] = kIgnoreIndex;  // ignored targets count nowhere
  return b;
}

std::vector<double> read_back(backend::Backend& backend, const Tensor& t) {
  Tensor host = Tensor::zeros_host(t.shape(), t.dtype());
  backend.copy_to_host(host.raw_data(), t);
  Tensor as_f64 = Tensor::zeros_host(t.shape(), DType::kF64);
  backend::CpuBackend().copy(as_f64, host);
  return std::vector<double>(as_f64.data<double>(), as_f64.data<double>() + as_f64.numel());
}

// max |a - b| <= tolerance * max |b| (relative to the tensor's scale: single elements can be
// arbitrarily close to zero).
void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    worst = std::max(worst, std::fabs(a[i] - b[i]));
  }
  EXPECT_LE(worst, tolerance * std::max(scale, 1e-300)) << what << ": max difference " << worst
                                                        << " at scale " << scale;
}

// The part of `full` (the one-rank model's tensor) that `p` holds.
std::vector<double> expected_part(const Parameter& p, const std::vector<double>& full) {
  if (!p.spec.slice) return full;
  std::vector<double> part(static_cast<size_t>(p.numel()));
  extract_tensor_slice(*p.spec.slice, full.data(), part.data());
  return part;
}

class TensorParallelTest : public ::testing::TestWithParam<TpCase> {};

TEST_P(TensorParallelTest, MatchesOneRankModel) {
  const TpCase& c = GetParam();
  comm::Comm& world = comm::world();
  const int64_t tp = world.world_size(), rank = world.rank();
  std::unique_ptr<backend::Backend> device;
  if (c.simulated) {
    device = std::make_unique<backend::SimulatedDeviceBackend>();
  } else {
    device = std::make_unique<backend::CpuBackend>();
  }
  backend::Backend& be = *device;
  std::unique_ptr<comm::Comm> staged;
  comm::Comm* group = &world;
  if (c.simulated) {
    staged = std::make_unique<comm::HostStagedComm>(world, be);
    group = staged.get();
  }
  const TransformerConfig config = tiny_config(c);

  auto setup = [&](Model& m) {
    init_parameters(m, 11);
    m.set_activation_dtype(c.activations);
    m.set_activation_checkpointing(c.checkpointing);
    SequenceTiling tiling;
    tiling.mlp_shards = c.mlp_shards;
    tiling.logits_shards = c.logits_shards;
    m.set_sequence_tiling(tiling);
  };
  auto full = build_transformer(config, be, c.params);
  setup(*full);
  auto part = build_transformer(config, be, c.params, TensorParallelLayout{rank, tp});
  setup(*part);
  part->set_tensor_group(group);

  for (int64_t step = 0; step < 2; ++step) {  // two accumulated micro-batches
    const Batch batch = make_batch(step, config.vocab_size);
    const double want = full->forward_backward(batch, 0.5);
    const double got = part->forward_backward(batch, 0.5);
    EXPECT_LE(std::fabs(got - want), c.tolerance * std::fabs(want)) << "loss at step " << step;
  }

  int64_t split_elements = 0, split_full_elements = 0;
  for (Parameter* p : part->parameters()) {
    Parameter& f = full->parameter(p->spec.name);
    if (p->spec.slice) {
      EXPECT_EQ(p->spec.slice->full_shape, f.spec.shape) << p->spec.name;
      split_elements += p->numel();
      split_full_elements += f.numel();
    } else {
      EXPECT_EQ(p->spec.shape, f.spec.shape) << p->spec.name;
    }
    // Initialisation: every slice holds exactly the full model's values.
    EXPECT_EQ(read_back(be, p->value), expected_part(*p, read_back(be, f.value))) << p->spec.name;
    expect_close(read_back(be, p->grad), expected_part(*p, read_back(be, f.grad)), c.tolerance,
                 "gradient of " + p->spec.name);
  }
  // Per-rank bytes of the split weights fall as 1/tp: the parts add up to the whole
  // (replicated key/value heads excepted).
  const double all_parts = world.all_reduce_scalar(static_cast<double>(split_elements),
                                                   comm::ReduceOp::kSum);
  if (c.family == "gpt2" || c.kv_heads >= tp) {
    EXPECT_EQ(all_parts, static_cast<double>(split_full_elements));
  } else {
    EXPECT_GT(all_parts, static_cast<double>(split_full_elements));
    EXPECT_LT(static_cast<double>(split_elements), 0.75 * static_cast<double>(split_full_elements));
  }
}

std::vector<TpCase> cases() {
  std::vector<TpCase> out;
  out.push_back({"gpt2_f64", "gpt2"});
  out.push_back({"llama_kv2_f64", "llama", 2});
  out.push_back({"llama_kv1_bias_f64", "llama", 1, true});
  // Qwen3's q/k head norms: each rank normalises its own heads; the norm weights' gradients
  // are summed over the group (with replicated key heads too).
  out.push_back({"qwen3_kv2_f64", "qwen3", 2});
  out.push_back({"qwen3_kv1_f64", "qwen3", 1});
  {
    TpCase c{"gpt2_checkpointed_tiled", "gpt2"};
    c.checkpointing = true;
    c.mlp_shards = 2;
    c.logits_shards = 2;
    out.push_back(c);
  }
  {
    TpCase c{"llama_checkpointed_tiled", "llama", 2};
    c.checkpointing = true;
    c.mlp_shards = 3;
    c.logits_shards = 3;
    out.push_back(c);
  }
  {
    TpCase c{"llama_f32", "llama", 2};
    c.params = DType::kF32;
    c.tolerance = 1e-5;
    out.push_back(c);
  }
  {
    TpCase c{"gpt2_bf16_activations", "gpt2"};
    c.params = DType::kF32;
    c.activations = DType::kBF16;
    c.tolerance = 3e-2;
    out.push_back(c);
  }
  {
    TpCase c{"llama_kv1_simulated_device", "llama", 1};
    c.simulated = true;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallelTest, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) { return param_info.param.label; });

TEST(TensorParallelHeadsTest, SplitsAndReplicates) {
  const TensorParallelHeads a = tensor_parallel_heads(8, 4, {1, 2});
  EXPECT_EQ(a.heads, 4);
  EXPECT_EQ(a.kv_heads, 2);
  EXPECT_EQ(a.kv_replicas, 1);
  EXPECT_EQ(a.kv_index, 1);
  const TensorParallelHeads b = tensor_parallel_heads(8, 2, {3, 4});
  EXPECT_EQ(b.heads, 2);
  EXPECT_EQ(b.kv_heads, 1);
  EXPECT_EQ(b.kv_replicas, 2);
  EXPECT_EQ(b.kv_index, 1);
}

TEST(TensorParallelHeadsTest, HeadsThatCannotSplitAreAClearError) {
  try {
    tensor_parallel_heads(6, 6, {0, 4});
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads 6"), std::string::npos) << e.what();
  }
  try {
    tensor_parallel_heads(12, 3, {0, 2});
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads 3"), std::string::npos) << e.what();
  }
}

// Megatron's closed form: per block one all-reduce of [N, C] after the attention output and
// one after the MLP, forward and backward alike; one for the embedding and one for the head's
// input gradient; the loss adds an f64 max of [N] and an f64 sum of [2, N].
TEST(TensorParallelModelTest, AllReducesMatchTheClosedForm) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  TpCase c{"gpt2", "gpt2"};
  const TransformerConfig config = tiny_config(c);
  auto model = build_transformer(config, cpu, DType::kF64,
                                 TensorParallelLayout{world.rank(), world.world_size()});
  init_parameters(*model, 1);
  model->set_tensor_group(&world);
  const Batch batch = make_batch(0, config.vocab_size);
  const int64_t n = batch.batch_size() * batch.seq_len(), hidden = config.hidden_size;
  const int64_t layers = config.num_layers;
  world.reset_stats();
  model->forward_backward(batch);
  const comm::OpStats& all_reduce = world.stats().at(comm::OpKind::kAllReduce);
  EXPECT_EQ(all_reduce.calls, 4 * layers + 4);
  const int64_t hidden_bytes = n * hidden * 8;
  EXPECT_EQ(all_reduce.message_bytes, (4 * layers + 2) * hidden_bytes + 3 * n * 8);
}

// A Hugging Face folder written by a one-rank model loads into every tensor-parallel rank as its
// slices (model/hf_checkpoint.h); writing one from a tensor-parallel model without its tensor
// group (nothing to gather the parts over) is refused (the gathered export:
// tests/engine/mpi_test_tensor_parallel_checkpoint.cpp).
TEST(TensorParallelModelTest, HuggingFaceFolderLoadsBySlices) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  for (const std::string family : {"gpt2", "llama"}) {
    TpCase c{family, family, 1};
    const TransformerConfig config = tiny_config(c);
    auto full = build_transformer(config, cpu, DType::kF64);
    init_parameters(*full, 3);
    // One folder for the job: rank 0's process id names it.
    const double id = world.all_reduce_scalar(world.rank() == 0 ? static_cast<double>(::getpid()) : 0.0,
                                              comm::ReduceOp::kSum);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      ("zero_tp_hf_" + std::to_string(static_cast<int64_t>(id)) + family);
    if (world.rank() == 0) save_hf_model(*full, dir.string(), DType::kF64);
    world.barrier();
    auto part = load_hf_model(dir.string(), cpu, DType::kF64,
                              TensorParallelLayout{world.rank(), world.world_size()});
    for (Parameter* p : part->parameters()) {
      EXPECT_EQ(read_back(cpu, p->value),
                expected_part(*p, read_back(cpu, full->parameter(p->spec.name).value)))
          << family << " " << p->spec.name;
    }
    EXPECT_THROW(save_hf_model(*part, (dir / "again").string(), DType::kF64), UnsupportedError);
    world.barrier();
    if (world.rank() == 0) std::filesystem::remove_all(dir);
  }
}

TEST(TensorParallelModelTest, CapturingLogitsIsRefused) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  TpCase c;
  const TransformerConfig config = tiny_config(c);
  auto model = build_transformer(config, cpu, DType::kF64,
                                 TensorParallelLayout{world.rank(), world.world_size()});
  init_parameters(*model, 1);
  model->set_tensor_group(&world);
  const Batch batch = make_batch(0, config.vocab_size);
  Tensor captured;
  StepContext ctx{cpu, batch};
  ctx.training = false;
  ctx.capture_logits = &captured;
  EXPECT_THROW(model->forward(ctx), UnsupportedError);
}

TEST(TensorParallelModelTest, GroupOfAnotherSizeIsAnError) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  TpCase c;
  auto model = build_transformer(tiny_config(c), cpu, DType::kF64);  // built for one rank
  init_parameters(*model, 1);
  model->set_tensor_group(&world);
  EXPECT_THROW(model->forward_backward(make_batch(0, 71)), Error);
}

}  // namespace
}  // namespace zero::model
