// The device-clean training proofs (test_device_clean_training.cpp) re-run on the CUDA backend:
// the tiny GPT-2 and Llama models train 3 steps (AdamW, or Muon) on the GPU and on the CPU
// oracle with losses and parameters within tolerance, the step reads the device once and
// uploads only the batch, and no cudaMalloc happens once the step repeats; 50 bf16 steps of the
// tiny Llama stay within 1% of the CPU at every step; a GPU checkpoint resumes bit-exactly on
// the GPU and loads on the CPU. Skipped without a GPU.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "comm/self_comm.h"
#include "data/markov_source.h"
#include "engine/run_comparison.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int64_t kSeqLen = 8;
constexpr int64_t kMicro = 2;

struct Variant {
  std::string family;
  int stage;
  bool bf16;
  bool checkpointing;
  bool cpu_checkpointing = false;  // checkpointed inputs kept in pinned host memory
  bool muon = false;               // the Muon optimizer instead of AdamW
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.family << " stage " << v.stage << (v.bf16 ? " bf16" : "")
      << (v.checkpointing ? " checkpointing" : "")
      << (v.cpu_checkpointing ? " on the host" : "") << (v.muon ? " muon" : "");
}

// The tokens of one optimizer step: `accumulation` micro-batches of `micro` sequences of
// `seq_len` tokens. The default is the short tests' 2 x 2 x 8 = 32 tokens.
struct StepShape {
  int64_t micro = kMicro;
  int64_t seq_len = kSeqLen;
  int64_t accumulation = 2;
};

EngineSettings settings_for(const Variant& v, const StepShape& shape = {}) {
  EngineSettings s = zero_settings(v.stage, shape.micro, shape.accumulation, 1);
  s.bf16.enabled = v.bf16;
  s.activation_checkpointing.cpu_checkpointing = v.cpu_checkpointing;
  if (v.muon) {
    s.optimizer_type = "Muon";
    s.optimizer_params = {{"lr", 2e-2}, {"adam_lr", 5e-3}, {"weight_decay", 0.01}};
  }
  return s;
}

std::function<model::Batch()> batches(int64_t step, int64_t vocab) {
  auto index = std::make_shared<int64_t>(0);
  return [=] { return batch_for(step, (*index)++, kMicro, kSeqLen, vocab); };
}

// Learnable tokens: each sequence a sample of `chain` (an order-2 Markov chain over the
// model's vocabulary, data/markov_source.h), sample (step, micro-batch, row) its own stream.
std::function<model::Batch()> chain_batches(const data::MarkovSource& chain, int64_t step,
                                            const StepShape& shape) {
  auto index = std::make_shared<int64_t>(0);
  return [&chain, step, shape, index] {
    Tensor ids = Tensor::zeros_host({shape.micro, shape.seq_len}, DType::kI64);
    for (int64_t row = 0; row < shape.micro; ++row) {
      const auto sample =
          static_cast<uint64_t>((step * shape.accumulation + *index) * shape.micro + row);
      const std::vector<int32_t> tokens = chain.sample(sample, shape.seq_len);
      for (int64_t t = 0; t < shape.seq_len; ++t) {
        ids.data<int64_t>()[row * shape.seq_len + t] = tokens[static_cast<size_t>(t)];
      }
    }
    ++*index;
    return model::batch_from_input_ids(ids);
  };
}

// `steps` optimizer steps of the small `v.family` model on `backend`: on step_batches' uniform
// random tokens, or on `chain`'s learnable ones.
TrainedRun train(backend::Backend& backend, const Variant& v, int steps,
                 const StepShape& shape = {}, const data::MarkovSource* chain = nullptr) {
  comm::SelfComm comm(&backend);  // its copies of device tensors go through the backend
  auto net = small_model(v.family, backend);
  net->set_activation_checkpointing(v.checkpointing);
  Engine engine(std::move(net), settings_for(v, shape), comm);
  TrainedRun run;
  const int64_t vocab = engine.model().config()->vocab_size;
  for (int step = 0; step < steps; ++step) {
    run.losses.push_back(engine.train_batch(
        chain != nullptr ? chain_batches(*chain, step, shape)
                         : step_batches(step, shape.micro, shape.seq_len, vocab)));
  }
  Tensor full = engine.gather_parameters();
  run.params.resize(static_cast<size_t>(full.numel()));
  engine.model().backend().copy_to_host(run.params.data(), full);
  return run;
}

class CudaTraining : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// Three steps of `v` on the GPU and on the CPU oracle: losses and parameters within tolerance.
void expect_gpu_tracks_cpu(const Variant& v) {
  backend::CpuBackend cpu;
  const TrainedRun reference = train(cpu, v, 3);
  TrainedRun gpu_run;
  {
    backend::CudaBackend gpu(0);
    gpu_run = train(gpu, v, 3);
  }
  // f32: every op agrees to f32 rounding (different summation orders), amplified a little by
  // 3 Adam (or Muon) steps: 1e-4 relative on the loss. bf16: one bf16 rounding unit (2^-8) per stored
  // activation, compounded through the layers: 2e-2 relative.
  std::ostringstream where;
  PrintTo(v, &where);
  expect_run_tracks(reference, gpu_run, v.bf16 ? 2e-2 : 1e-4, "(" + where.str() + ")");
}

TEST_P(CudaTraining, TracksTheCpuBackend) { expect_gpu_tracks_cpu(GetParam()); }

// Checkpointed block inputs downloaded to pinned host memory on the transfer stream and uploaded
// (prefetched) before their recompute, overlapping compute: the streams' events, and the
// allocator's per-stream blocks, must keep every upload and download ordered.
// Mixtral's experts on the GPU: routing, the grouped expert products and the router's backward,
// under ZeRO-3 with bf16 and checkpointing too (a recompute routes again), and with the
// load-balancing loss. Not in CudaTraining's
// list: the forward reads each block's expert counts to the host, so it is not one read a step.
TEST(CudaTrainingExperts, MixtralTracksTheCpuBackend) {
  if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_gpu_tracks_cpu(Variant{"mixtral", 0, false, false});
  expect_gpu_tracks_cpu(Variant{"mixtral", 3, true, true});
  expect_gpu_tracks_cpu(Variant{"mixtral_balance", 2, true, false});
  expect_gpu_tracks_cpu(Variant{"qwen3_moe", 3, true, true});  // q/k norms, no renormalising
}

TEST(CudaTrainingCpuCheckpoints, TrackTheCpuBackend) {
  if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  expect_gpu_tracks_cpu(Variant{"llama", 0, false, true, true});
  expect_gpu_tracks_cpu(Variant{"gpt2", 2, true, true, true});
}

// The per-stream blocks and the pinned cache settle: once two steps have run, neither
// cudaMalloc nor cudaHostAlloc is called again although every step uploads on the transfer
// stream blocks that compute frees, and downloads into pinned buffers that backward frees.
TEST(CudaTrainingCpuCheckpoints, NoNewDeviceOrPinnedMemoryOnceTheStepRepeats) {
  if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Variant v{"llama", 2, true, true, true};
  backend::CudaBackend gpu(0);
  comm::SelfComm comm(&gpu);
  auto net = small_model(v.family, gpu);
  net->set_activation_checkpointing(true);
  Engine engine(std::move(net), settings_for(v), comm);
  const int64_t vocab = engine.model().config()->vocab_size;
  engine.train_batch(batches(0, vocab));
  engine.train_batch(batches(1, vocab));
  const CacheStats device = gpu.caching_allocator().cache_stats();
  const backend::cuda::PinnedCacheStats pinned = gpu.pinned_cache().cache_stats();
  for (int step = 2; step < 5; ++step) engine.train_batch(batches(step, vocab));
  EXPECT_EQ(gpu.caching_allocator().cache_stats().raw_allocations, device.raw_allocations);
  EXPECT_GT(gpu.caching_allocator().cache_stats().cross_stream_frees, device.cross_stream_frees)
      << "the uploads were not freed across streams: is cpu_checkpointing on?";
  EXPECT_EQ(gpu.pinned_cache().cache_stats().raw_allocations, pinned.raw_allocations);
  EXPECT_GT(gpu.pinned_cache().cache_stats().cache_hits, pinned.cache_hits);
}

TEST_P(CudaTraining, OneDeviceReadPerStepAndNoNewDeviceMemory) {
  backend::CudaBackend gpu(0);
  comm::SelfComm comm(&gpu);
  auto net = small_model(GetParam().family, gpu);
  net->set_activation_checkpointing(GetParam().checkpointing);
  Engine engine(std::move(net), settings_for(GetParam()), comm);
  const int64_t vocab = engine.model().config()->vocab_size;
  engine.train_batch(batches(0, vocab));
  engine.train_batch(batches(1, vocab));
  const CacheStats warm = gpu.caching_allocator().cache_stats();
  for (int step = 2; step < 5; ++step) {
    gpu.reset_transfer_stats();
    engine.train_batch(batches(step, vocab));
    const backend::TransferStats& t = gpu.transfer_stats();
    EXPECT_EQ(t.device_to_host_calls, 1) << "step " << step;
    EXPECT_EQ(t.host_to_device_calls, 2 * 2) << "step " << step;
    EXPECT_EQ(t.synchronizations, 0);
  }
  EXPECT_EQ(gpu.caching_allocator().cache_stats().raw_allocations, warm.raw_allocations);
}

// Issue 12's tracking proof: 50 bf16 steps of the tiny Llama on the GPU stay within 1% of the
// CPU oracle's bf16 run at every step, and do not drift. Both round every stored value to bf16
// but sum in other orders (warp-order reductions, cuBLASLt tiles), and AdamW can turn a
// rounding-sized difference in a near-zero gradient into a whole learning-rate step, so the runs
// part a little more every step; how far their losses part shrinks as a step trains on more
// tokens (the loss and the gradients average over more tokens). At the short tests' 32
// tokens a step (2 micro-batches of 2 sequences of 8) the simulator scatters later steps by up
// to 1.8% (0.1-1.3% on three other data streams), so this run takes 4 micro-batches of 8
// sequences of 16 tokens (the model's max_position_embeddings): 512 tokens a step. Measured on
// the CUDA simulator with uniform random tokens: worst step 0.03%; over 12 data streams at 512
// tokens a step (splits 32x16x1, 16x16x2, 8x16x4) at most 0.40%, 10-step means at most 0.08%.
// But on uniform tokens nothing can be learnt and both curves stay flat at ln 41, so the run
// trains on an order-2 Markov chain over the vocabulary instead (chain_batches): its loss falls
// (3.71 -> 3.59 over the 50 steps) and the simulator's run follows the CPU's to 0.06% at worst
// (10-step means 0.01%). So: step 0
// (identical parameters, only the forward's rounding differs) within 0.5%; every step within
// 1%, the bound; every 10-step mean within 0.25% (a drift - a wrong gradient, a lost
// scale - moves all of a window's steps one way, while the scatter averages out). The simulator
// takes about 32 s of CPU for it.
TEST(CudaTrainingLong, FiftyBf16StepsOf512TokensTrackTheCpuWithinOnePercent) {
  if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Variant v{"llama", 0, true, false};
  const StepShape shape{/*micro=*/8, /*seq_len=*/16, /*accumulation=*/4};
  const data::MarkovSource chain(small_config("llama").vocab_size, 2, 3, 7);
  backend::CpuBackend cpu;
  const TrainedRun reference = train(cpu, v, 50, shape, &chain);
  backend::CudaBackend gpu(0);
  const TrainedRun gpu_run = train(gpu, v, 50, shape, &chain);
  ASSERT_EQ(gpu_run.losses.size(), reference.losses.size());
  const auto relative = [](double a, double b) { return std::fabs(a - b) / std::fabs(b); };
  EXPECT_LE(relative(gpu_run.losses[0], reference.losses[0]), 0.005) << "step 0";
  double worst_step = 0.0, worst_window = 0.0;
  for (size_t i = 0; i < reference.losses.size(); ++i) {
    EXPECT_LE(relative(gpu_run.losses[i], reference.losses[i]), 0.01) << "step " << i;
    worst_step = std::max(worst_step, relative(gpu_run.losses[i], reference.losses[i]));
  }
  for (size_t w = 0; w + 10 <= reference.losses.size(); w += 10) {
    double cpu_mean = 0.0, gpu_mean = 0.0;
    for (size_t i = w; i < w + 10; ++i) {
      cpu_mean += reference.losses[i] / 10;
      gpu_mean += gpu_run.losses[i] / 10;
    }
    EXPECT_LE(relative(gpu_mean, cpu_mean), 0.0025) << "steps " << w << ".." << w + 9;
    worst_window = std::max(worst_window, relative(gpu_mean, cpu_mean));
  }
  // The figures behind the bounds, for the record of each device's run.
  std::printf("50 bf16 steps of 512 tokens: worst step %.5f, worst 10-step mean %.5f, step 0 "
              "%.5f (relative to the CPU)\n",
              worst_step, worst_window, relative(gpu_run.losses[0], reference.losses[0]));
  if (::testing::Test::HasFailure()) {
    std::string curves = "step  cpu      gpu\n";
    for (size_t i = 0; i < reference.losses.size(); ++i) {
      char line[64];
      std::snprintf(line, sizeof(line), "%4zu  %.5f  %.5f\n", i, reference.losses[i],
                    gpu_run.losses[i]);
      curves += line;
    }
    ADD_FAILURE() << curves;
  }
}

// A checkpoint saved on the GPU resumes bit-exactly on the GPU (same kernels, same order: the
// CUDA backend is deterministic) and loads on the CPU with the very parameters the GPU held.
TEST(CudaCheckpoint, ResumesBitExactlyOnTheGpuAndLoadsOnTheCpu) {
  if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = ::testing::TempDir() + "zero_cuda_checkpoint_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const Variant v{"llama", 2, true, false};
  backend::CudaBackend gpu(0);
  auto host_params = [](Engine& engine) {
    Tensor full = engine.gather_parameters();
    std::vector<float> out(static_cast<size_t>(full.numel()));
    engine.model().backend().copy_to_host(out.data(), full);
    return out;
  };
  std::vector<double> continued;
  std::vector<float> saved_params, final_params;
  {
    comm::SelfComm comm(&gpu);
    Engine engine(small_model(v.family, gpu), settings_for(v), comm);
    const int64_t vocab = engine.model().config()->vocab_size;
    for (int step = 0; step < 3; ++step) engine.train_batch(batches(step, vocab));
    engine.save_checkpoint(dir);
    saved_params = host_params(engine);
    for (int step = 3; step < 5; ++step) continued.push_back(engine.train_batch(batches(step, vocab)));
    final_params = host_params(engine);
  }
  {
    comm::SelfComm comm(&gpu);
    Engine engine(small_model(v.family, gpu), settings_for(v), comm);
    engine.load_checkpoint(dir);
    EXPECT_EQ(host_params(engine), saved_params);
    const int64_t vocab = engine.model().config()->vocab_size;
    std::vector<double> resumed;
    for (int step = 3; step < 5; ++step) resumed.push_back(engine.train_batch(batches(step, vocab)));
    EXPECT_EQ(resumed, continued);
    EXPECT_EQ(host_params(engine), final_params);
  }
  {
    backend::CpuBackend cpu;
    comm::SelfComm comm;
    Engine engine(small_model(v.family, cpu), settings_for(v), comm);
    engine.load_checkpoint(dir);
    EXPECT_EQ(host_params(engine), saved_params);
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, CudaTraining,
                         ::testing::Values(Variant{"gpt2", 0, false, false},
                                           Variant{"llama", 0, false, true},
                                           Variant{"gpt2", 2, true, false},
                                           Variant{"llama", 3, true, false},
                                           // Qwen3's q/k head norms (bf16, ZeRO-3).
                                           Variant{"qwen3", 3, true, true},
                                           // Muon: Newton-Schulz through cuBLASLt products.
                                           Variant{"llama", 0, false, false, false, true},
                                           Variant{"gpt2", 2, true, false, false, true}),
                         [](const ::testing::TestParamInfo<Variant>& param_info) {
                           const Variant& v = param_info.param;
                           return v.family + "_stage" + std::to_string(v.stage) +
                                  (v.bf16 ? "_bf16" : "") +
                                  (v.checkpointing ? "_checkpointing" : "") +
                                  (v.muon ? "_muon" : "");
                         });

}  // namespace
}  // namespace zero::engine
