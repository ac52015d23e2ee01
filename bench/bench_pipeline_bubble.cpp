// The pipeline bubble of DeepSpeed's 1F1B TrainSchedule (engine/pipeline_engine.h), measured:
// for p = the world size stages and each micro-batch count m, every stage's idle fraction of a
// training step (1 - time inside ForwardPass/BackwardPass / step time; the rest is waiting on
// neighbours, sends, receives and the optimizer step) next to the ideal 1F1B bubble
// (p - 1) / (m + p - 1), which assumes equal forward and backward times on every stage and free
// communication. Run under MPI, one rank per stage:
//   mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 build/default/bench/bench_pipeline_bubble
//     [steps] [m ...]
// bench/pipeline_bubble.sh runs it for several stage counts. Rank 0 prints one line per (m,
// stage): the mean over `steps` measured steps after one warm-up step.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "comm/mesh.h"
#include "comm/world.h"
#include "engine/pipeline_engine.h"
#include "model/transformer_builder.h"
#include "bench_batches.h"

namespace {

using namespace zero;

constexpr int64_t kMicro = 4;
constexpr int64_t kSeq = 64;

// Llama-shaped, big enough that a micro-batch's forward takes milliseconds on one core; two units
// per stage (the embedding and the head count as units).
model::TransformerConfig bench_config(int stages) {
  model::TransformerConfig c = model::preset_config("tiny-llama");
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 688;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 32;
  c.num_layers = 2 * stages - 2 > 0 ? 2 * stages - 2 : 1;
  c.max_position_embeddings = kSeq;
  return c;
}

model::Batch batch(int64_t step, int64_t index, int64_t vocab) {
  return bench::random_token_batch(step, index, kMicro, kSeq, vocab);
}

engine::EngineSettings settings(int64_t micro_batches) {
  engine::EngineSettings s;
  s.micro_batch_size = kMicro;
  s.gradient_accumulation_steps = micro_batches;
  s.train_batch_size = kMicro * micro_batches;
  s.optimizer_type = "AdamW";
  s.optimizer_params = {{"lr", 1e-3}};
  return s;
}

void run(comm::Comm& world, comm::Mesh& mesh, int64_t m, int steps) {
  const int p = world.world_size();
  const model::TransformerConfig config = bench_config(p);
  backend::CpuBackend cpu;
  engine::PipelineEngine pipe(config, cpu, settings(m), mesh,
                              pipeline::PartitionMethod::parse("uniform"), 7);
  double idle = 0.0;
  double step_seconds = 0.0;
  for (int step = 0; step <= steps; ++step) {  // step 0: warm-up, not counted
    int64_t j = 0;
    pipe.train_batch([&] { return batch(step, j++, config.vocab_size); });
    if (step == 0) continue;
    idle += pipe.last_timing().idle_fraction() / steps;
    step_seconds += pipe.last_timing().total_seconds / steps;
  }
  // Every stage's figure to rank 0 (a sum of one-hot vectors).
  Tensor per_stage = Tensor::zeros_host({2 * static_cast<int64_t>(p)}, DType::kF64);
  per_stage.data<double>()[pipe.stage()] = idle;
  per_stage.data<double>()[p + pipe.stage()] = step_seconds;
  world.all_reduce(per_stage, comm::ReduceOp::kSum);
  if (world.rank() != 0) return;
  const double ideal = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
  double mean = 0.0;
  for (int s = 0; s < p; ++s) {
    const double measured = per_stage.data<double>()[s];
    mean += measured / p;
    std::printf("%6d %6lld %6d %10.3f %14.3f %10.1f\n", p, static_cast<long long>(m), s, measured,
                ideal, 1e3 * per_stage.data<double>()[p + s]);
  }
  std::printf("%6d %6lld %6s %10.3f %14.3f\n", p, static_cast<long long>(m), "mean", mean, ideal);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  zero::comm::WorldScope scope;
  zero::comm::Comm& world = zero::comm::world();
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3;
  std::vector<int64_t> micro_batches;
  for (int i = 2; i < argc; ++i) micro_batches.push_back(std::atoll(argv[i]));
  if (micro_batches.empty()) micro_batches = {1, 2, 4, 8, 16};
  if (steps < 1) {
    std::fprintf(stderr, "bench_pipeline_bubble: steps must be >= 1\n");
    return 2;
  }
  zero::comm::MeshShape shape;
  shape.pp = world.world_size();
  zero::comm::Mesh mesh(world, shape);
  if (world.rank() == 0) {
    const auto c = bench_config(world.world_size());
    std::printf("# bench_pipeline_bubble: %d stages (one rank each), Llama-shaped hidden %lld, "
                "%lld layers, micro-batch %lld x %lld tokens, f32, %d measured steps after 1 warm-up\n",
                world.world_size(), static_cast<long long>(c.hidden_size),
                static_cast<long long>(c.num_layers), static_cast<long long>(kMicro),
                static_cast<long long>(kSeq), steps);
    std::printf("%6s %6s %6s %10s %14s %10s\n", "p", "m", "stage", "idle", "(p-1)/(m+p-1)",
                "step ms");
  }
  for (int64_t m : micro_batches) run(world, mesh, m, steps);
  return 0;
}
