// NcclComm on one GPU (world size 1 over SelfComm): every collective gives its input back
// exactly (a one-rank NCCL collective is a copy) in every supported dtype and is counted with
// comm.h's formulas; collectives are ordered after the compute stream's earlier work and before
// its later work, asynchronous ones through Work::wait(); host tensors go through the host Comm;
// bad calls are clear errors; and the tiny models train through Engine with NcclComm as they do
// with SelfComm. The local-rank parser needs no device. GPU tests skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cuda/nccl_comm.h"
#include "comm/self_comm.h"
#include "cuda_test_support.h"
#include "engine/zero_harness.h"
#include "support/env_guard.h"

namespace zero::backend::cuda_test {
namespace {

using test_support::EnvGuard;

TEST(NcclLocalRank, ReadsTheLaunchersVariableStrictly) {
  EnvGuard ompi("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt);
  EnvGuard slurm("SLURM_LOCALID", std::nullopt);
  EnvGuard mpich("MPI_LOCALRANKID", std::nullopt);
  EXPECT_EQ(comm::local_rank_from_environment(), 0);
  {
    EnvGuard set("MPI_LOCALRANKID", "5");
    EXPECT_EQ(comm::local_rank_from_environment(), 5);
    EnvGuard first("OMPI_COMM_WORLD_LOCAL_RANK", "3");  // OpenMPI's wins
    EXPECT_EQ(comm::local_rank_from_environment(), 3);
  }
  for (const char* bad : {"", "-1", "1x", " 2", "+2", "99999999999"}) {
    EnvGuard set("SLURM_LOCALID", bad);
    EXPECT_THROW(comm::local_rank_from_environment(), ConfigError) << "\"" << bad << "\"";
  }
}

class NcclCommTest : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    nccl_ = std::make_unique<comm::NcclComm>(host_, gpu());
  }
  void TearDown() override {
    nccl_.reset();  // before the backend
    CudaTest::TearDown();
  }
  comm::NcclComm& nccl() { return *nccl_; }

 private:
  comm::SelfComm host_;
  std::unique_ptr<comm::NcclComm> nccl_;
};

constexpr DType kFloatTypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF64};

TEST_F(NcclCommTest, IsOneRankOnTheBackendsDevice) {
  EXPECT_EQ(nccl().rank(), 0);
  EXPECT_EQ(nccl().world_size(), 1);
  EXPECT_NE(nccl().name().find("nccl"), std::string::npos);
  EXPECT_NE(nccl().name().find("cuda:0"), std::string::npos);
}

TEST_F(NcclCommTest, AllReduceIsACopyAtOneRankInEveryDtype) {
  const std::vector<float> values = random_values(1001, 3);
  int64_t bytes = 0;
  int calls = 0;
  for (DType dtype : kFloatTypes) {
    for (comm::ReduceOp op : {comm::ReduceOp::kSum, comm::ReduceOp::kMax, comm::ReduceOp::kMin}) {
      Tensor t = upload(gpu(), values, {1001}, dtype);
      const std::vector<uint8_t> before = download_bytes(gpu(), t);
      nccl().all_reduce(t, op);
      EXPECT_EQ(download_bytes(gpu(), t), before) << name_of(dtype);
      bytes += static_cast<int64_t>(t.nbytes());
      ++calls;
    }
  }
  Tensor i32 = upload_ids(gpu(), std::vector<int32_t>{1, -2, 3, 40000});
  Tensor i64 = upload_ids(gpu(), std::vector<int64_t>{int64_t{1} << 40, -7});
  nccl().all_reduce(i32, comm::ReduceOp::kSum);
  nccl().all_reduce(i64, comm::ReduceOp::kMax);
  std::vector<int32_t> back32(4);
  std::vector<int64_t> back64(2);
  gpu().copy_to_host(back32.data(), i32);
  gpu().copy_to_host(back64.data(), i64);
  EXPECT_EQ(back32, (std::vector<int32_t>{1, -2, 3, 40000}));
  EXPECT_EQ(back64, (std::vector<int64_t>{int64_t{1} << 40, -7}));
  const comm::OpStats& s = nccl().stats().at(comm::OpKind::kAllReduce);
  EXPECT_EQ(s.calls, calls + 2);
  EXPECT_EQ(s.message_bytes, bytes + 16 + 16);
  EXPECT_EQ(s.traffic_bytes, 0);  // 2(N-1)/N of the message at N = 1
}

TEST_F(NcclCommTest, EveryCollectiveGivesItsInputBackAndIsCounted) {
  const std::vector<float> values = random_values(512, 4);
  for (DType dtype : kFloatTypes) {
    nccl().reset_stats();
    const Tensor input = upload(gpu(), values, {512}, dtype);
    const std::vector<uint8_t> expected = download_bytes(gpu(), input);
    const auto bytes = static_cast<int64_t>(input.nbytes());

    Tensor scattered = gpu().zeros({512}, dtype, MemoryCategory::kOther);
    nccl().reduce_scatter(input, scattered, comm::ReduceOp::kSum);
    EXPECT_EQ(download_bytes(gpu(), scattered), expected) << "reduce_scatter " << name_of(dtype);

    Tensor gathered = gpu().zeros({512}, dtype, MemoryCategory::kOther);
    nccl().all_gather(input, gathered);
    EXPECT_EQ(download_bytes(gpu(), gathered), expected) << "all_gather " << name_of(dtype);
    nccl().all_gather(gathered, gathered);  // in place: the input is the rank's own slice
    EXPECT_EQ(download_bytes(gpu(), gathered), expected) << "in-place all_gather";

    Tensor exchanged = gpu().zeros({512}, dtype, MemoryCategory::kOther);
    nccl().all_to_all(input, exchanged);
    EXPECT_EQ(download_bytes(gpu(), exchanged), expected) << "all_to_all " << name_of(dtype);

    Tensor broadcasted = upload(gpu(), values, {512}, dtype);
    nccl().broadcast(broadcasted, 0);
    EXPECT_EQ(download_bytes(gpu(), broadcasted), expected) << "broadcast " << name_of(dtype);

    const comm::CommStats& s = nccl().stats();
    EXPECT_EQ(s.at(comm::OpKind::kReduceScatter).calls, 1);
    EXPECT_EQ(s.at(comm::OpKind::kReduceScatter).message_bytes, bytes);
    EXPECT_EQ(s.at(comm::OpKind::kAllGather).calls, 2);
    EXPECT_EQ(s.at(comm::OpKind::kAllGather).message_bytes, 2 * bytes);
    EXPECT_EQ(s.at(comm::OpKind::kAllToAll).calls, 1);
    EXPECT_EQ(s.at(comm::OpKind::kAllToAll).message_bytes, bytes);
    EXPECT_EQ(s.at(comm::OpKind::kBroadcast).calls, 1);
    EXPECT_EQ(s.at(comm::OpKind::kBroadcast).message_bytes, bytes);
    // Nothing leaves a one-rank group, except that the root of a broadcast counts its message
    // (comm.h's formula, as MpiComm counts it).
    EXPECT_EQ(s.total_traffic_bytes(), bytes);
  }
}

TEST_F(NcclCommTest, BarrierAndSplitWork) {
  nccl().barrier();
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kBarrier).calls, 1);
  std::unique_ptr<comm::Comm> child = nccl().split(0, 0);
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->world_size(), 1);
  EXPECT_EQ(child->rank(), 0);
  const std::vector<float> values = random_values(64, 5);
  Tensor t = upload(gpu(), values, {64}, DType::kF32);
  child->all_reduce(t, comm::ReduceOp::kSum);
  expect_close(std::vector<double>(values.begin(), values.end()), download(gpu(), t), {0, 0},
               "split group all_reduce");
  EXPECT_EQ(child->stats().at(comm::OpKind::kAllReduce).calls, 1);
  EXPECT_THROW(nccl().split(-1, 0), Error);
}

TEST_F(NcclCommTest, HostTensorsGoThroughTheHostComm) {
  EXPECT_DOUBLE_EQ(nccl().all_reduce_scalar(3.5, comm::ReduceOp::kSum), 3.5);
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kAllReduce).calls, 1);
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kAllReduce).message_bytes, 8);
  Tensor input = Tensor::zeros_host({4}, DType::kF32);
  Tensor output = Tensor::zeros_host({4}, DType::kF32);
  input.data<float>()[2] = 7.0f;
  nccl().all_gather_async(input, output)->wait();
  EXPECT_EQ(output.data<float>()[2], 7.0f);
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kAllGather).calls, 1);
}

TEST_F(NcclCommTest, BadCallsAreClearErrors) {
  Tensor device = gpu().zeros({8}, DType::kF32, MemoryCategory::kOther);
  Tensor host = Tensor::zeros_host({8}, DType::kF32);
  EXPECT_THROW(nccl().all_gather(host, device), Error);  // host and device mixed
  Tensor halves = gpu().zeros({8}, DType::kU16, MemoryCategory::kOther);  // no NCCL type
  EXPECT_THROW(nccl().all_reduce(halves, comm::ReduceOp::kSum), UnsupportedError);
  EXPECT_THROW(nccl().broadcast(device, 1), Error);
  EXPECT_THROW(nccl().send(device, 0, 0), Error);  // to itself
  Tensor small = gpu().zeros({3}, DType::kF32, MemoryCategory::kOther);
  EXPECT_THROW(nccl().all_gather(device, small), Error);
  EXPECT_THROW(nccl().reduce_scatter(device, small, comm::ReduceOp::kSum), Error);
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kAllReduce).calls, 0);  // refused calls not counted
}

// Large enough that a collective racing the kernels around it would show.
constexpr int64_t kBig = int64_t{1} << 22;

TEST_F(NcclCommTest, AsyncCollectivesAreOrderedBetweenTheComputeStreamsWork) {
  const std::vector<float> values = random_values(kBig, 6);
  Tensor input = upload(gpu(), values, {kBig}, DType::kF32);
  Tensor ones = upload(gpu(), std::vector<float>(static_cast<size_t>(kBig), 1.0f), {kBig},
                       DType::kF32);
  Tensor gathered = gpu().zeros({kBig}, DType::kF32, MemoryCategory::kOther);
  Tensor scattered = gpu().zeros({kBig}, DType::kF32, MemoryCategory::kOther);

  gpu().scale(input, 2.0);  // compute stream, before the collectives
  std::shared_ptr<comm::Work> gather = nccl().all_gather_async(input, gathered);
  std::shared_ptr<comm::Work> scatter =
      nccl().reduce_scatter_async(input, scattered, comm::ReduceOp::kSum);
  EXPECT_EQ(nccl().stats().at(comm::OpKind::kAllGather).calls, 1);  // counted when issued
  gather->wait();
  scatter->wait();
  gather->wait();  // idempotent
  EXPECT_EQ(gather->error(), nullptr);
  gpu().add(gathered, ones, 1.0);  // compute stream, after the collectives
  gpu().add(scattered, ones, -1.0);

  std::vector<float> got_gather(static_cast<size_t>(kBig));
  std::vector<float> got_scatter(static_cast<size_t>(kBig));
  gpu().copy_to_host(got_gather.data(), gathered);
  gpu().copy_to_host(got_scatter.data(), scattered);
  int reported = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const float doubled = 2.0f * values[i];
    if ((got_gather[i] != doubled + 1.0f || got_scatter[i] != doubled - 1.0f) && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": gather " << got_gather[i] << " scatter "
                    << got_scatter[i] << ", expected " << doubled << " +/- 1";
    }
  }
  EXPECT_TRUE(gather->is_completed());
  EXPECT_TRUE(scatter->is_completed());
}

TEST_F(NcclCommTest, AnUnwaitedWorkStillCompletesBeforeLaterWork) {
  const std::vector<float> values = random_values(kBig, 7);
  Tensor t = upload(gpu(), values, {kBig}, DType::kF32);
  Tensor out = gpu().zeros({kBig}, DType::kF32, MemoryCategory::kOther);
  {
    std::shared_ptr<comm::Work> work = nccl().all_gather_async(t, out);
  }  // dropped without wait(): later compute work still follows the collective
  gpu().scale(out, 0.5);
  std::vector<float> got(static_cast<size_t>(kBig));
  gpu().copy_to_host(got.data(), out);
  int reported = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (got[i] != 0.5f * values[i] && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << got[i] << " expected " << 0.5f * values[i];
    }
  }
  std::shared_ptr<comm::Work> work = nccl().all_reduce_async(t, comm::ReduceOp::kSum);
  gpu().synchronize();
  EXPECT_TRUE(work->is_completed());
  work->wait();
  EXPECT_GE(nccl().stats().at(comm::OpKind::kAllReduce).seconds, 0.0);
}

}  // namespace
}  // namespace zero::backend::cuda_test

namespace zero::engine {
namespace {
using namespace zero_test;

struct NcclVariant {
  std::string family;
  int stage;
  bool bf16;
};

void PrintTo(const NcclVariant& v, std::ostream* os) {
  *os << v.family << " stage " << v.stage << (v.bf16 ? " bf16" : "");
}

struct TrainedRun {
  std::vector<double> losses;
  std::vector<float> params;
  comm::CommStats stats;
};

TrainedRun train(backend::Backend& backend, comm::Comm& comm, const NcclVariant& v) {
  EngineSettings s = zero_settings(v.stage, 2, 2, 1);
  s.bf16.enabled = v.bf16;
  s.zero.overlap_comm = true;  // the asynchronous forms too
  Engine engine(small_model(v.family, backend), s, comm);
  TrainedRun run;
  const int64_t vocab = engine.model().config()->vocab_size;
  for (int64_t step = 0; step < 2; ++step) {
    auto index = std::make_shared<int64_t>(0);
    run.losses.push_back(
        engine.train_batch([&, index] { return batch_for(step, (*index)++, 2, 8, vocab); }));
  }
  Tensor full = engine.gather_parameters();
  run.params.resize(static_cast<size_t>(full.numel()));
  backend.copy_to_host(run.params.data(), full);
  run.stats = comm.stats();
  return run;
}

class NcclTraining : public ::testing::TestWithParam<NcclVariant> {
 protected:
  void SetUp() override {
    if (backend::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(NcclTraining, MatchesSelfComm) {
  TrainedRun reference;
  {
    backend::CudaBackend gpu(0);
    comm::SelfComm self(&gpu);
    reference = train(gpu, self, GetParam());
  }
  TrainedRun nccl_run;
  {
    backend::CudaBackend gpu(0);
    comm::SelfComm host;
    comm::NcclComm nccl(host, gpu);
    nccl_run = train(gpu, nccl, GetParam());
  }
  // One rank: NCCL's collectives are copies, so the runs agree to rounding (in practice bit for
  // bit; the tolerance leaves room for a different kernel schedule).
  ASSERT_EQ(reference.losses.size(), nccl_run.losses.size());
  for (size_t i = 0; i < reference.losses.size(); ++i) {
    EXPECT_NEAR(nccl_run.losses[i], reference.losses[i], 1e-6 * std::fabs(reference.losses[i]))
        << "step " << i;
  }
  ASSERT_EQ(reference.params.size(), nccl_run.params.size());
  int reported = 0;
  for (size_t i = 0; i < reference.params.size(); ++i) {
    if (std::fabs(nccl_run.params[i] - reference.params[i]) >
            1e-6 * (1.0 + std::fabs(reference.params[i])) &&
        reported++ < 5) {
      ADD_FAILURE() << "parameter " << i << ": self " << reference.params[i] << " nccl "
                    << nccl_run.params[i];
    }
  }
  // The engine made the same calls through either communicator.
  for (int k = 0; k < comm::kNumOpKinds; ++k) {
    const auto kind = static_cast<comm::OpKind>(k);
    EXPECT_EQ(nccl_run.stats.at(kind).calls, reference.stats.at(kind).calls)
        << comm::op_kind_name(kind);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, NcclTraining,
                         ::testing::Values(NcclVariant{"gpt2", 3, false},
                                           NcclVariant{"llama", 2, true}),
                         [](const ::testing::TestParamInfo<NcclVariant>& param_info) {
                           const NcclVariant& v = param_info.param;
                           return v.family + "_stage" + std::to_string(v.stage) +
                                  (v.bf16 ? "_bf16" : "");
                         });

}  // namespace
}  // namespace zero::engine
