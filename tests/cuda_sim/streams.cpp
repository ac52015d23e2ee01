// Stream queues of the simulated device (include/cuda_sim/streams.h).
#include "cuda_sim/streams.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "runtime_state.h"

namespace cuda_sim {

struct StreamQueue {
  struct Operation {
    std::function<void()> work;  // empty for a wait
    StreamPoint wait_for;        // the point a wait needs
  };
  bool blocking = false;
  bool legacy = false;
  std::deque<Operation> pending;
  uint64_t enqueued = 0;
  uint64_t executed = 0;
};

namespace {

// One lock for every queue; recursive because the functions below call one another under it
// (enqueue takes queue_of's lock again, open_gate runs queues).
std::recursive_mutex& queues_mutex() {
  static auto* mutex = new std::recursive_mutex;
  return *mutex;
}

// Every queue that may hold work, in creation order (run_all, others-first).
std::vector<std::weak_ptr<StreamQueue>>& all_queues() {
  static auto* queues = new std::vector<std::weak_ptr<StreamQueue>>;
  return *queues;
}

std::shared_ptr<StreamQueue> register_queue(bool blocking, bool legacy) {
  auto queue = std::make_shared<StreamQueue>();
  queue->blocking = blocking;
  queue->legacy = legacy;
  auto& queues = all_queues();
  queues.erase(std::remove_if(queues.begin(), queues.end(),
                              [](const std::weak_ptr<StreamQueue>& q) { return q.expired(); }),
               queues.end());
  queues.push_back(queue);
  return queue;
}

StreamOrder order_from_environment() {
  const char* text = std::getenv("CUDA_SIM_STREAMS");
  if (text == nullptr || *text == '\0' || std::strcmp(text, "eager") == 0) {
    return StreamOrder::kEager;
  }
  if (std::strcmp(text, "lazy") == 0) return StreamOrder::kLazy;
  if (std::strcmp(text, "others-first") == 0) return StreamOrder::kOthersFirst;
  std::fprintf(stderr, "cuda_sim: CUDA_SIM_STREAMS=%s is not eager, lazy or others-first\n", text);
  std::abort();  // a test harness setting, not user input: stop before running anything
}

StreamOrder& current_order() {
  static StreamOrder order = order_from_environment();
  return order;
}

std::vector<std::shared_ptr<StreamQueue>> live_queues() {
  std::vector<std::shared_ptr<StreamQueue>> queues;
  for (const auto& weak : all_queues()) {
    if (auto queue = weak.lock()) queues.push_back(std::move(queue));
  }
  return queues;
}

void append(StreamQueue& queue, StreamQueue::Operation operation) {
  queue.pending.push_back(std::move(operation));
  ++queue.enqueued;
}

// Legacy default stream semantics: its work waits for every blocking stream's work so far, and a
// blocking stream's work waits for the legacy stream's.
void add_implicit_waits(StreamQueue& queue) {
  if (queue.legacy) {
    for (const auto& other : live_queues()) {
      if (other.get() != &queue && other->blocking && other->executed < other->enqueued) {
        append(queue, {{}, {other, other->enqueued}});
      }
    }
  } else if (queue.blocking) {
    const auto legacy = queue_of(nullptr);
    if (legacy->executed < legacy->enqueued) append(queue, {{}, {legacy, legacy->enqueued}});
  }
}

bool point_reached(const StreamPoint& point) {
  return point.queue == nullptr || point.queue->executed >= point.position;
}

// Runs the front operation of `queue` if it can run without waiting; true if one ran.
bool run_front_if_ready(StreamQueue& queue) {
  if (queue.pending.empty()) return false;
  StreamQueue::Operation& front = queue.pending.front();
  if (!front.work) {
    if (!point_reached(front.wait_for)) return false;
    queue.pending.pop_front();
    ++queue.executed;
    return true;
  }
  std::function<void()> work = std::move(front.work);
  queue.pending.pop_front();
  ++queue.executed;  // counted before it runs: a throwing operation is consumed, not retried
  work();
  return true;
}

void run_others_ready(const StreamQueue& forced) {
  for (const auto& other : live_queues()) {
    if (other.get() == &forced) continue;
    while (run_front_if_ready(*other)) {
    }
  }
}

void run_queue_until(StreamQueue& queue, uint64_t position) {
  while (queue.executed < position) {
    if (queue.pending.empty()) {
      throw HungWait("cuda_sim: the host waits for device work that can never run (a stream "
                     "waits on a hung operation, e.g. an NCCL collective whose peer is gone)");
    }
    if (current_order() == StreamOrder::kOthersFirst) run_others_ready(queue);
    if (queue.executed >= position) break;
    StreamQueue::Operation& front = queue.pending.front();
    if (!front.work && !point_reached(front.wait_for)) {
      // Its target was recorded before this wait was enqueued, so it never waits on this queue's
      // operations from here on: the recursion ends.
      const StreamPoint target = front.wait_for;
      run_queue_until(*target.queue, target.position);
      continue;
    }
    run_front_if_ready(queue);
  }
}

}  // namespace

StreamOrder stream_order() {
  std::lock_guard lock(queues_mutex());
  return current_order();
}

void set_stream_order(StreamOrder order) {
  std::lock_guard lock(queues_mutex());
  for (const auto& queue : live_queues()) run_queue_until(*queue, queue->enqueued);
  current_order() = order;
}

const char* stream_order_name(StreamOrder order) {
  switch (order) {
    case StreamOrder::kEager: return "eager";
    case StreamOrder::kLazy: return "lazy";
    case StreamOrder::kOthersFirst: return "others-first";
  }
  return "?";
}

std::shared_ptr<StreamQueue> new_stream_queue(bool blocking) {
  std::lock_guard lock(queues_mutex());
  return register_queue(blocking, false);
}

std::shared_ptr<StreamQueue> queue_of(cudaStream_t stream) {
  std::lock_guard lock(queues_mutex());
  if (stream == nullptr || stream == cudaStreamLegacy) {
    static auto* legacy = new std::shared_ptr<StreamQueue>(register_queue(false, true));
    return *legacy;
  }
  if (stream == cudaStreamPerThread) {
    // One simulated host thread drives the device; the per-thread stream is one more queue that,
    // like a real one, does not synchronise with the legacy stream.
    static auto* per_thread = new std::shared_ptr<StreamQueue>(register_queue(false, false));
    return *per_thread;
  }
  return stream->queue;
}

namespace {

// Eager order runs what it can at once; a stream behind a hung operation stays queued.
void run_eagerly(StreamQueue& queue) {
  if (current_order() != StreamOrder::kEager) return;
  try {
    run_queue_until(queue, queue.enqueued);
  } catch (const HungWait&) {
  }
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  std::lock_guard lock(queues_mutex());
  const auto queue = queue_of(stream);
  add_implicit_waits(*queue);
  append(*queue, {std::move(work), {}});
  run_eagerly(*queue);
}

StreamPoint end_of(cudaStream_t stream) {
  std::lock_guard lock(queues_mutex());
  auto queue = queue_of(stream);
  const uint64_t end = queue->enqueued;
  return {std::move(queue), end};
}

void enqueue_wait(cudaStream_t stream, const StreamPoint& point) {
  std::lock_guard lock(queues_mutex());
  if (point_reached(point)) return;
  const auto queue = queue_of(stream);
  if (point.queue == queue) return;  // a stream is ordered with itself
  append(*queue, {{}, point});
  run_eagerly(*queue);
}

bool reached(const StreamPoint& point) {
  std::lock_guard lock(queues_mutex());
  return point_reached(point);
}

void run_until(const StreamPoint& point) {
  std::lock_guard lock(queues_mutex());
  if (point.queue != nullptr) run_queue_until(*point.queue, point.position);
}

void run_one(const StreamPoint& point) {
  std::lock_guard lock(queues_mutex());
  if (point.queue == nullptr || point_reached(point)) return;
  StreamQueue& queue = *point.queue;
  try {
    run_queue_until(queue, queue.executed + 1);
  } catch (const HungWait&) {
    // No progress to make: the stream waits on a hung operation.
  }
}

StreamPoint new_gate() {
  std::lock_guard lock(queues_mutex());
  return {register_queue(false, false), 1};
}

void open_gate(const StreamPoint& gate) {
  std::lock_guard lock(queues_mutex());
  if (gate.queue == nullptr || gate.queue->enqueued >= gate.position) return;
  append(*gate.queue, {[] {}, {}});
  // Streams that ran eagerly until the gate go on now.
  if (current_order() == StreamOrder::kEager) {
    for (const auto& queue : live_queues()) run_eagerly(*queue);
  }
}

void run_all() {
  std::lock_guard lock(queues_mutex());
  const auto queues = live_queues();
  if (current_order() == StreamOrder::kOthersFirst) {
    for (auto it = queues.rbegin(); it != queues.rend(); ++it) {
      run_queue_until(**it, (*it)->enqueued);
    }
  } else {
    for (const auto& queue : queues) run_queue_until(*queue, queue->enqueued);
  }
}

}  // namespace cuda_sim
