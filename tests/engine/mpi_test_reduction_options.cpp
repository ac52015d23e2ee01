// mpi-ranks: 2
// How gradients travel between ranks: zero_optimization.reduce_scatter false all-reduces each
// bucket (no reduce-scatter call at all) and trains to the same parameters bit for bit; the
// prescale before communication (prescale_gradients / gradient_predivide_factor) keeps a 16-bit
// sum in range that overflows without it, and with an exact factor trains bit-identically.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/world.h"
#include "engine/zero_harness.h"
#include "sharding/gradient_reducer.h"
#include "sharding/partition_layout.h"

namespace zero::engine {
namespace {
using namespace zero_test;

constexpr int kSteps = 4;
constexpr int64_t kSeqLen = 8;

struct TrainedRun {
  std::vector<float> params;
  comm::CommStats stats;
};

TrainedRun train(EngineSettings settings) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  world.reset_stats();
  Engine engine(small_model("llama", cpu), settings, world);
  for (int step = 0; step < kSteps; ++step) train_step(engine, step, world.rank(), kSeqLen);
  TrainedRun run;
  run.stats = world.stats();
  run.params = to_vector(engine.gather_parameters());
  return run;
}

TEST(ReductionOptions, AllReduceInsteadOfReduceScatterTrainsIdentically) {
  for (const int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    const int world = comm::world().world_size();
    EngineSettings settings = zero_settings(stage, 2, 1, world);
    const TrainedRun scattered = train(settings);
    settings.zero.reduce_scatter = false;
    const TrainedRun all_reduced = train(settings);
    EXPECT_EQ(all_reduced.params, scattered.params);
    EXPECT_GT(scattered.stats.at(comm::OpKind::kReduceScatter).calls, 0);
    EXPECT_EQ(all_reduced.stats.at(comm::OpKind::kReduceScatter).calls, 0);
    EXPECT_GT(all_reduced.stats.at(comm::OpKind::kAllReduce).calls,
              scattered.stats.at(comm::OpKind::kAllReduce).calls);
  }
}

TEST(ReductionOptions, PrescaleByAPowerOfTwoTrainsIdentically) {
  // 1/world = 1/2 and a predivide factor of 2 are exact in binary: the same sums, scaled.
  for (const int stage : {0, 2, 3}) {
    SCOPED_TRACE(stage);
    EngineSettings settings = zero_settings(stage, 2, 1, comm::world().world_size());
    const TrainedRun plain = train(settings);
    settings.prescale_gradients = true;
    EXPECT_EQ(train(settings).params, plain.params);
    settings.prescale_gradients = false;
    settings.gradient_predivide_factor = 2.0;
    EXPECT_EQ(train(settings).params, plain.params);
  }
}

// Every element of every unit's gradient is 40000 on each rank: the fp16 sum (80000) overflows
// fp16's 65504 unless the bucket is halved before it travels.
std::vector<float> reduced_fp16(double prescale, bool reduce_scatter) {
  comm::Comm& world = comm::world();
  backend::CpuBackend cpu;
  auto model = small_model("gpt2", cpu);
  sharding::PartitionLayout layout(*model, world.world_size(), world.rank());
  sharding::ExposedCommTime exposed;
  sharding::GradientReducer reducer(cpu, world, layout, 1 << 20, false, DType::kF16, exposed,
                                    sharding::ReductionOptions{reduce_scatter, prescale});
  Tensor partition = cpu.zeros({layout.partition_numel()}, DType::kF32, MemoryCategory::kGrads);
  std::vector<Tensor> grads;
  for (size_t u = layout.units().size(); u-- > 0;) {
    Tensor grad = cpu.empty({layout.unit(u).padded_numel}, DType::kF32, MemoryCategory::kGrads);
    cpu.fill(grad, 40000.0);
    grads.push_back(grad);
    reducer.add(u, grads.back(), partition);
  }
  reducer.flush(partition);
  return to_vector(partition);
}

TEST(ReductionOptions, PrescaleKeepsSixteenBitSumsInRange) {
  for (const bool reduce_scatter : {true, false}) {
    SCOPED_TRACE(reduce_scatter);
    const std::vector<float> plain = reduced_fp16(1.0, reduce_scatter);
    const std::vector<float> prescaled = reduced_fp16(0.5, reduce_scatter);
    ASSERT_FALSE(plain.empty());
    EXPECT_TRUE(std::isinf(plain[0])) << plain[0];
    // Padding past a unit's end stays zero; every real element is 40000 (exact in fp16).
    int64_t real = 0;
    for (const float value : prescaled) {
      EXPECT_TRUE(value == 40000.0f || value == 0.0f) << value;
      real += value == 40000.0f ? 1 : 0;
    }
    EXPECT_GT(real, 0);
  }
}

}  // namespace
}  // namespace zero::engine
