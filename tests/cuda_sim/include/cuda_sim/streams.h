// The simulated device's streams. Each CUDA stream is a queue: launches, asynchronous copies,
// cuBLASLt products, sorts and event waits are enqueued and run later, when the host needs them
// (a synchronisation, a blocking copy, an event query), in an order CUDA allows. A program that
// orders its streams correctly (events, stream waits, host synchronisation) gets the same results
// in every such order; one that relies on luck reads stale or poisoned data in one of them.
//
// The order comes from CUDA_SIM_STREAMS (read once; tests may override it):
//   eager         every operation runs as soon as it is enqueued (the program's own order).
//   lazy          work runs only when the host forces it, and then only the forced stream's work
//                 and what it waits for: other streams fall as far behind as CUDA lets them.
//   others-first  as lazy, but before each operation of a forced stream every other stream runs
//                 the work it can run without waiting: other streams go as far ahead as they can.
// A missing wait between two streams shows in lazy or in others-first, whichever runs the
// consumer before the producer (scripts/test.sh runs the cuda tests in both).
//
// Thread safety: any thread may call these; operations run on the thread that forces them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>

namespace cuda_sim {

enum class StreamOrder { kEager, kLazy, kOthersFirst };
StreamOrder stream_order();
void set_stream_order(StreamOrder order);
const char* stream_order_name(StreamOrder order);

struct StreamQueue;

// The first `position` operations of one stream (a recorded event's position).
struct StreamPoint {
  std::shared_ptr<StreamQueue> queue;
  uint64_t position = 0;
};

// A new stream's queue. `blocking`: a stream created without cudaStreamNonBlocking, which the
// legacy default stream synchronises with.
std::shared_ptr<StreamQueue> new_stream_queue(bool blocking);
// The queue behind a stream handle: created streams, the null/legacy stream, the per-thread one.
std::shared_ptr<StreamQueue> queue_of(cudaStream_t stream);

// Appends `work` to `stream`. An exception `work` throws when it runs reaches the host call that
// forced it.
void enqueue(cudaStream_t stream, std::function<void()> work);
// The point after everything enqueued on `stream` so far.
StreamPoint end_of(cudaStream_t stream);
// Later work on `stream` runs only after `point` was reached.
void enqueue_wait(cudaStream_t stream, const StreamPoint& point);
bool reached(const StreamPoint& point);
// Runs work until `point` is reached (the host blocks on it).
void run_until(const StreamPoint& point);
// Runs one pending operation of `point`'s stream, if any (the progress a real device makes while
// the host polls).
void run_one(const StreamPoint& point);
// Runs every stream to its end (cudaDeviceSynchronize, and calls that imply it: cudaFree).
void run_all();

// A gate: a point reached only once open_gate() is called. A stream that waits on a closed gate
// hangs (an NCCL collective whose peer is gone, until the communicator is aborted): a host call
// that must wait for it throws HungWait, and polling (event and stream queries) sees no progress.
StreamPoint new_gate();
void open_gate(const StreamPoint& gate);

// What a host wait on a hung stream throws: on a GPU it would wait forever.
struct HungWait : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace cuda_sim
