// The simulator's streams (include/cuda_sim/streams.h): asynchronous work waits in its stream's
// queue until the host forces it; lazy order lets other streams fall behind, others-first lets
// them run ahead; events, stream waits and the legacy stream order them as CUDA does. These are
// what make a missing wait in the backend show up as stale data in one of the two orders.
// (Memory is read here directly from the host to see what has run; the simulated device's memory
// is host memory, which a real GPU's is not.)
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda_sim/device.h"
#include "cuda_sim/streams.h"

namespace {

using ::cuda_sim::StreamOrder;

class SimStreams : public ::testing::Test {
 protected:
  explicit SimStreams(StreamOrder order) : order_(order) {}
  void SetUp() override {
    previous_ = ::cuda_sim::stream_order();
    ::cuda_sim::set_stream_order(order_);
    ASSERT_EQ(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&x_), 64), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y_), 64), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(x_);
    cudaFree(y_);
    cudaStreamDestroy(a_);
    cudaStreamDestroy(b_);
    ::cuda_sim::set_stream_order(previous_);
  }

  StreamOrder order_;
  StreamOrder previous_ = StreamOrder::kEager;
  cudaStream_t a_ = nullptr, b_ = nullptr;
  unsigned char* x_ = nullptr;
  unsigned char* y_ = nullptr;
};

class LazyStreams : public SimStreams {
 protected:
  LazyStreams() : SimStreams(StreamOrder::kLazy) {}
};
class OthersFirstStreams : public SimStreams {
 protected:
  OthersFirstStreams() : SimStreams(StreamOrder::kOthersFirst) {}
};

TEST_F(LazyStreams, NothingRunsUntilTheHostWaitsForIt) {
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, a_), cudaSuccess);
  EXPECT_EQ(x_[0], 0xff) << "the memset ran before anything waited for it";
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaErrorNotReady is not an error";
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_EQ(x_[0], 1);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  cudaEventDestroy(done);
}

TEST_F(LazyStreams, AConsumerWithoutAWaitReadsStaleData) {
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, 64, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(y_[0], 0xff) << "b ran after a although nothing ordered them";
}

TEST_F(LazyStreams, AnEventWaitOrdersTheStreams) {
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  cudaEvent_t written = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(written, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, written, 0), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(written), cudaSuccess);  // the wait outlives the handle, as in CUDA
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, 64, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(y_[0], 1);
}

TEST_F(LazyStreams, AWaitIsForTheRecordBeforeItNotALaterOne) {
  cudaEvent_t mark = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(mark, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, mark, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, 64, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x_, 2, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(mark, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(y_[0], 1);
  EXPECT_EQ(x_[0], 1) << "b's wait forced a's work recorded after it";
  ASSERT_EQ(cudaEventSynchronize(mark), cudaSuccess);
  EXPECT_EQ(x_[0], 2);
  cudaEventDestroy(mark);
}

TEST_F(LazyStreams, PageableHostSourcesAreReadAtTheCall) {
  std::vector<unsigned char> host(64, 7);
  ASSERT_EQ(cudaMemcpyAsync(x_, host.data(), 64, cudaMemcpyHostToDevice, a_), cudaSuccess);
  std::memset(host.data(), 9, host.size());  // CUDA staged the bytes before returning
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(x_[0], 7);
}

TEST_F(LazyStreams, ACopyIntoPageableMemoryReturnsDone) {
  ASSERT_EQ(cudaMemsetAsync(x_, 3, 64, a_), cudaSuccess);
  std::vector<unsigned char> host(64, 0);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), x_, 64, cudaMemcpyDeviceToHost, a_), cudaSuccess);
  EXPECT_EQ(host[63], 3);
}

TEST_F(LazyStreams, PinnedCopiesRunWithTheirStream) {
  unsigned char* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 64, cudaHostAllocDefault),
            cudaSuccess);
  std::memset(pinned, 0, 64);
  ASSERT_EQ(cudaMemsetAsync(x_, 4, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, x_, 64, cudaMemcpyDeviceToHost, a_), cudaSuccess);
  EXPECT_EQ(pinned[0], 0) << "a copy into pinned memory returned done; the host must wait";
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(pinned[0], 4);
  cudaFreeHost(pinned);
}

TEST_F(LazyStreams, TheLegacyStreamWaitsForBlockingStreamsOnly) {
  cudaStream_t blocking = nullptr;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x_, 5, 64, blocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(y_, 6, 64, a_), cudaSuccess);  // non-blocking
  unsigned char both[2] = {0, 0};
  ASSERT_EQ(cudaMemcpy(&both[0], x_, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&both[1], y_, 1, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(both[0], 5);
  EXPECT_EQ(both[1], 0xff) << "cudaMemcpy waited for a non-blocking stream";
  cudaStreamDestroy(blocking);
}

TEST_F(LazyStreams, DeviceSynchronizeRunsEveryStream) {
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(y_, 2, 64, b_), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(x_[0], 1);
  EXPECT_EQ(y_[0], 2);
}

TEST_F(OthersFirstStreams, OtherStreamsRunAheadOfTheForcedOne) {
  // b reads x, a then overwrites it with no wait on b: a write-after-read race. Others-first
  // runs b's copy before a's memset, lazy (above) the other way round.
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, 64, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(y_[0], 0xff) << "b's copy should have run before a's memset";
  EXPECT_EQ(x_[0], 1);
}

TEST_F(OthersFirstStreams, AWaitingStreamDoesNotRunAhead) {
  cudaEvent_t written = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(x_, 1, 64, a_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(written, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, written, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y_, x_, 64, cudaMemcpyDeviceToDevice, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  EXPECT_EQ(y_[0], 1);
  cudaEventDestroy(written);
}

}  // namespace
