// Tensor-parallel communication per training step (issue 16), measured next to the closed form:
// a Llama-shaped model split over tp = the world size ranks (dp = 1), trained by an Engine; the
// tensor group is wrapped in a Comm that times every all-reduce by message size, so rank 0 can
// print, per step: the step time, the tensor group's all-reduce count and bytes, the closed-form
// hidden-state all-reduces (Megatron: per block one [N, C] all-reduce after the attention output
// and one after the MLP, forward and backward alike, plus the embedding's forward and the head's
// input gradient: (4 * layers + 2) per micro-batch), the time the training thread was blocked in
// them, and the bandwidth that time implies (comm/comms_logger.h's algbw and busbw). An isolated
// all-reduce of the same size afterwards (ranks lined up by a barrier) separates the transfer
// itself from the waiting for a slower rank that a blocked all-reduce also contains.
//   mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 build/default/bench/bench_tensor_parallel_comm
//     [steps] [micro_batch] [gradient_accumulation_steps]
// bench/tensor_parallel_comm.sh runs it for several tensor-parallel sizes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "comm/comms_logger.h"
#include "comm/mesh.h"
#include "comm/world.h"
#include "engine/engine.h"
#include "model/transformer_builder.h"
#include "bench_batches.h"

namespace {

using namespace zero;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSeq = 128;

// A Comm that forwards to `inner` and additionally records every blocking all-reduce's wall time
// by message size (bytes), so the hidden-state all-reduces can be told apart from the loss's and
// the gradient norm's. Its own stats() mirror the inner counters of the blocking calls it
// forwarded; asynchronous calls are forwarded uncounted here (the inner Comm counts them; the
// tensor-parallel model issues none in this benchmark). One thread, like every Comm.
class AllReduceTimer final : public comm::Comm {
 public:
  explicit AllReduceTimer(comm::Comm& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string name() const override { return "timed(" + inner_.name() + ")"; }

  void all_reduce(Tensor& tensor, comm::ReduceOp op) override {
    const auto start = Clock::now();
    mirrored([&] { inner_.all_reduce(tensor, op); });
    comm::OpStats& s = by_size_[tensor.nbytes()];
    s.calls += 1;
    s.message_bytes += static_cast<int64_t>(tensor.nbytes());
    s.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  }
  void reduce_scatter(const Tensor& input, Tensor& output, comm::ReduceOp op) override {
    mirrored([&] { inner_.reduce_scatter(input, output, op); });
  }
  void all_gather(const Tensor& input, Tensor& output) override {
    mirrored([&] { inner_.all_gather(input, output); });
  }
  void all_to_all(const Tensor& input, Tensor& output) override {
    mirrored([&] { inner_.all_to_all(input, output); });
  }
  void broadcast(Tensor& tensor, int root) override {
    mirrored([&] { inner_.broadcast(tensor, root); });
  }
  void send(const Tensor& tensor, int dest, int tag) override {
    mirrored([&] { inner_.send(tensor, dest, tag); });
  }
  void recv(Tensor& tensor, int source, int tag) override {
    mirrored([&] { inner_.recv(tensor, source, tag); });
  }
  void barrier() override {
    mirrored([&] { inner_.barrier(); });
  }
  std::shared_ptr<comm::Work> all_reduce_async(Tensor& tensor, comm::ReduceOp op) override {
    return inner_.all_reduce_async(tensor, op);
  }
  std::shared_ptr<comm::Work> reduce_scatter_async(const Tensor& input, Tensor& output,
                                                   comm::ReduceOp op) override {
    return inner_.reduce_scatter_async(input, output, op);
  }
  std::shared_ptr<comm::Work> all_gather_async(const Tensor& input, Tensor& output) override {
    return inner_.all_gather_async(input, output);
  }
  std::unique_ptr<comm::Comm> split(int color, int key) override {
    return inner_.split(color, key);
  }
  void abort_job(int code) override { inner_.abort_job(code); }

  // All-reduces by message size in bytes since the last clear().
  const std::map<size_t, comm::OpStats>& all_reduces_by_size() const { return by_size_; }
  void clear() {
    by_size_.clear();
    reset_stats();
  }

 private:
  template <class F>
  void mirrored(F&& call) {
    const comm::CommStats before = inner_.stats();
    call();
    for (int k = 0; k < comm::kNumOpKinds; ++k) {
      const comm::OpStats& a = before.ops[static_cast<size_t>(k)];
      const comm::OpStats& b = inner_.stats().ops[static_cast<size_t>(k)];
      comm::OpStats& mine = stats_.ops[static_cast<size_t>(k)];
      mine.calls += b.calls - a.calls;
      mine.message_bytes += b.message_bytes - a.message_bytes;
      mine.traffic_bytes += b.traffic_bytes - a.traffic_bytes;
      mine.seconds += b.seconds - a.seconds;
    }
  }

  comm::Comm& inner_;
  std::map<size_t, comm::OpStats> by_size_;
};

// Llama-shaped (RMSNorm, SwiGLU, RoPE, untied embeddings), big enough that a micro-batch's
// forward and backward take tens of milliseconds on one core. 4 key/value heads: tp <= 4 splits
// them without replicas (whose gradient all-reduce would run on another group).
model::TransformerConfig bench_config() {
  model::TransformerConfig c = model::preset_config("tiny-llama");
  c.vocab_size = 2048;
  c.hidden_size = 512;
  c.intermediate_size = 1376;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.num_layers = 4;
  c.max_position_embeddings = kSeq;
  return c;
}

model::Batch batch(int64_t step, int64_t index, int64_t micro, int64_t vocab) {
  return bench::random_token_batch(step, index, micro, kSeq, vocab);
}

// Mean over the ranks of `world`, and the largest rank's value.
struct Spread {
  double mean = 0.0, max = 0.0;
};
Spread spread(comm::Comm& world, double value) {
  const double n = world.world_size();
  return {world.all_reduce_scalar(value, comm::ReduceOp::kSum) / n,
          world.all_reduce_scalar(value, comm::ReduceOp::kMax)};
}

const char* verdict(double measured, double expected) {
  return measured == expected ? "equal" : "DIFFERENT";
}

}  // namespace

int main(int argc, char** argv) {
  comm::WorldScope scope;
  comm::Comm& world = comm::world();
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3;
  const int64_t micro = argc > 2 ? std::atoll(argv[2]) : 2;
  const int64_t gas = argc > 3 ? std::atoll(argv[3]) : 2;
  if (steps < 1 || micro < 1 || gas < 1) {
    std::fprintf(stderr, "bench_tensor_parallel_comm: steps, micro_batch and "
                         "gradient_accumulation_steps must be >= 1\n");
    return 2;
  }
  const int tp = world.world_size();
  comm::MeshShape shape;
  shape.tp = tp;
  comm::Mesh mesh(world, shape);
  AllReduceTimer tensor_group(mesh.group(comm::MeshAxis::kTensor));

  const model::TransformerConfig config = bench_config();
  backend::CpuBackend cpu;
  auto net = model::build_transformer(
      config, cpu, DType::kF32,
      model::TensorParallelLayout{mesh.coordinate(comm::MeshAxis::kTensor), tp});
  model::init_parameters(*net, 5);
  net->set_tensor_group(&tensor_group);
  engine::EngineSettings s;
  s.micro_batch_size = micro;
  s.gradient_accumulation_steps = gas;
  s.train_batch_size = micro * gas;  // dp = 1
  s.optimizer_type = "AdamW";
  s.optimizer_params = {{"lr", 1e-4}};
  s.gradient_clipping = 1.0;  // as most configs: one norm all-reduce over the tensor group
  engine::Engine engine(std::move(net), s, mesh.data_sequence_group());

  auto train_step = [&](int64_t step) {
    int64_t j = 0;
    engine.train_batch([&] { return batch(step, j++, micro, config.vocab_size); });
  };
  train_step(0);  // warm-up: first-touch allocations, not counted
  world.barrier();
  tensor_group.clear();
  mesh.group(comm::MeshAxis::kTensor).reset_stats();
  const auto start = Clock::now();
  for (int step = 1; step <= steps; ++step) train_step(step);
  const double step_seconds = std::chrono::duration<double>(Clock::now() - start).count() / steps;

  // The hidden-state all-reduces are the [N, C] ones (N = micro x seq tokens, f32).
  const int64_t tokens = micro * kSeq;
  const size_t hidden_bytes = static_cast<size_t>(tokens * config.hidden_size) * sizeof(float);
  comm::OpStats hidden, other;
  for (const auto& [bytes, st] : tensor_group.all_reduces_by_size()) {
    comm::OpStats& into = bytes == hidden_bytes ? hidden : other;
    into.calls += st.calls;
    into.message_bytes += st.message_bytes;
    into.seconds += st.seconds;
  }
  // A copy: the isolated all-reduces below add to the group's counters.
  const comm::OpStats counted =
      mesh.group(comm::MeshAxis::kTensor).stats().at(comm::OpKind::kAllReduce);

  // The same all-reduce in isolation: lined up by a barrier, nothing else running on the ranks.
  constexpr int kProbe = 20;
  Tensor probe = Tensor::zeros_host({tokens, config.hidden_size}, DType::kF32);
  double probe_seconds = 0.0;
  if (tp > 1) {
    world.barrier();
    for (int i = 0; i < kProbe; ++i) {
      world.barrier();
      const auto t0 = Clock::now();
      mesh.group(comm::MeshAxis::kTensor).all_reduce(probe, comm::ReduceOp::kSum);
      probe_seconds += std::chrono::duration<double>(Clock::now() - t0).count() / kProbe;
    }
  }

  const double per_step = 1.0 / steps;
  const Spread step_s = spread(world, step_seconds);
  const Spread blocked_s = spread(world, hidden.seconds * per_step);
  const Spread other_s = spread(world, other.seconds * per_step);
  const Spread probe_s = spread(world, probe_seconds);
  if (world.rank() != 0) return 0;

  const int64_t layers = config.num_layers;
  // No tensor group at tp = 1: the model issues none.
  const double form_calls = tp > 1 ? static_cast<double>((4 * layers + 2) * gas) : 0.0;
  const double form_bytes = form_calls * static_cast<double>(hidden_bytes);
  const double calls = static_cast<double>(hidden.calls) * per_step;
  const double bytes = static_cast<double>(hidden.message_bytes) * per_step;
  constexpr double kMiB = 1024.0 * 1024.0;
  comm::OpStats mean_hidden;  // rank-mean time, for the bandwidth columns
  mean_hidden.calls = hidden.calls;
  mean_hidden.message_bytes = hidden.message_bytes;
  mean_hidden.seconds = blocked_s.mean * steps;
  const comm::OpBandwidth bw = comm::op_bandwidth(comm::OpKind::kAllReduce, mean_hidden, tp);
  comm::OpStats probe_stats;
  probe_stats.calls = 1;
  probe_stats.message_bytes = static_cast<int64_t>(hidden_bytes);
  probe_stats.seconds = probe_s.mean;
  const comm::OpBandwidth probe_bw = comm::op_bandwidth(comm::OpKind::kAllReduce, probe_stats, tp);

  std::printf("## tp = %d (one rank each, dp = 1): Llama-shaped hidden %lld, %lld layers, "
              "%lld heads / %lld kv heads, vocab %lld, micro-batch %lld x %lld tokens, "
              "gradient_accumulation_steps %lld, f32, ZeRO 0, %d measured steps after 1 warm-up\n",
              tp, static_cast<long long>(config.hidden_size), static_cast<long long>(layers),
              static_cast<long long>(config.num_heads), static_cast<long long>(config.num_kv_heads),
              static_cast<long long>(config.vocab_size), static_cast<long long>(micro),
              static_cast<long long>(kSeq), static_cast<long long>(gas), steps);
  // Labels in a 40-character column, then the figures: count per step, MiB per step.
  char hidden_label[64];
  std::snprintf(hidden_label, sizeof hidden_label, "  hidden-state [%lld, %lld] f32",
                static_cast<long long>(tokens), static_cast<long long>(config.hidden_size));
  std::printf("%-40s %8.1f ms  (rank mean; slowest rank %.1f ms)\n", "step time",
              1e3 * step_s.mean, 1e3 * step_s.max);
  std::printf("%-40s %8s %12s\n", "tensor-group all-reduces per step", "count", "MiB");
  std::printf("%-40s %8.1f %12.3f  (the group's Comm counters)\n", "  all sizes",
              static_cast<double>(counted.calls) * per_step,
              static_cast<double>(counted.message_bytes) * per_step / kMiB);
  std::printf("%-40s %8.1f %12.3f\n", hidden_label, calls, bytes / kMiB);
  std::printf("%-40s %8.1f %12.3f  -> count %s, bytes %s\n", "  closed form (4L+2) x gas",
              form_calls, form_bytes / kMiB, verdict(calls, form_calls), verdict(bytes, form_bytes));
  // The vocabulary-parallel loss: an f64 max of [N] and an f64 sum of [2, N] per micro-batch;
  // the gradient norm (clipping on): one f64 scalar per step.
  const double other_calls = static_cast<double>(other.calls) * per_step;
  const double other_bytes = static_cast<double>(other.message_bytes) * per_step;
  const double other_form_calls = tp > 1 ? static_cast<double>(2 * gas + 1) : 0.0;
  const double other_form_bytes =
      tp > 1 ? static_cast<double>(gas * 3 * tokens * 8 + 8) : 0.0;
  std::printf("%-40s %8.1f %12.3f  blocked %.1f ms; closed form %.0f calls, "
              "%.0f bytes (2 x gas + 1 at tp > 1) -> %s\n",
              "  other (loss max/sum, grad norm)", other_calls, other_bytes / kMiB,
              1e3 * other_s.mean, other_form_calls, other_form_bytes,
              other_calls == other_form_calls && other_bytes == other_form_bytes ? "equal"
                                                                                  : "DIFFERENT");
  std::printf("%-40s %8s %12.3f  (all sizes)\n", "  wire traffic per rank, 2(n-1)/n", "",
              static_cast<double>(counted.traffic_bytes) * per_step / kMiB);
  if (tp == 1) {
    std::printf("%-40s %8.1f ms  (none at tp = 1)\n", "blocked in hidden-state all-reduces", 0.0);
    std::fflush(stdout);
    return 0;
  }
  std::printf("%-40s %8.1f ms  = %.1f%% of the step (rank mean; most %.1f ms), %.3f ms per call\n",
              "blocked in hidden-state all-reduces", 1e3 * blocked_s.mean,
              100.0 * blocked_s.mean / step_s.mean, 1e3 * blocked_s.max,
              1e3 * blocked_s.mean / std::max(calls, 1.0));
  std::printf("%-40s algbw %7.2f Gbps, busbw %7.2f Gbps\n", "  bandwidth achieved in training",
              bw.algbw_gbps, bw.busbw_gbps);
  std::printf("%-40s %8.3f ms per call (after a barrier, mean of %d); algbw %7.2f Gbps, "
              "busbw %7.2f Gbps\n",
              "isolated all-reduce of the same size", 1e3 * probe_s.mean, kProbe,
              probe_bw.algbw_gbps, probe_bw.busbw_gbps);
  std::printf("%-40s %8.0f %%   (calls x isolated time / blocked time; the rest: waiting for the "
              "other ranks to arrive)\n",
              "  transfer share of the blocked time",
              100.0 * std::min(1.0, probe_s.mean * calls / blocked_s.mean));
  std::printf("%-40s %8.1f ms  (rank mean)\n", "compute (step - all tensor-group comm)",
              1e3 * (step_s.mean - blocked_s.mean - other_s.mean));
  std::fflush(stdout);
  return 0;
}
