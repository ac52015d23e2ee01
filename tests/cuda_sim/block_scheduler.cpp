#include "block_scheduler.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <stdexcept>

namespace cuda_sim {
namespace {

constexpr unsigned kMaxThreadsPerBlock = 1024;

}  // namespace

bool reverse_schedule() {
  static const bool reverse = [] {
    const char* order = std::getenv("CUDA_SIM_SCHEDULE");
    return order != nullptr && std::strcmp(order, "reverse") == 0;
  }();
  return reverse;
}

unsigned in_order(unsigned i, unsigned count) { return reverse_schedule() ? count - 1 - i : i; }

void BlockScheduler::run_block(const char* kernel_name, ThreadBody body, void* closure) {
  const dim3 dim = g_builtins.block_dim;
  kernel_name_ = kernel_name;
  body_ = body;
  closure_ = closure;
  thread_count_ = dim.x * dim.y * dim.z;
  if (!stacks_) stacks_ = std::make_unique<FiberStacks>(kMaxThreadsPerBlock);
  threads_.assign(thread_count_, Thread{});
  thread_indices_.resize(thread_count_);
  for (unsigned t = 0; t < thread_count_; ++t) {
    thread_indices_[t] = uint3{t % dim.x, (t / dim.x) % dim.y, t / (dim.x * dim.y)};
  }
  warps_.resize((thread_count_ + 31) / 32);
  for (size_t w = 0; w < warps_.size(); ++w) {
    Warp& warp = warps_[w];
    const unsigned lanes = thread_count_ - static_cast<unsigned>(w) * 32;
    warp.absent_mask = lanes >= 32 ? 0u : ~((1u << lanes) - 1);
    warp.arrived_mask = 0;
    warp.op_mask = 0;
    warp.op = nullptr;
    warp.generation = 0;
  }
  exited_ = 0;
  at_barrier_ = 0;
  fault_.clear();
  ready_.clear();
  ready_head_ = 0;
  for (unsigned t = 0; t < thread_count_; ++t) {
    prepare_fiber(threads_[t].context, stacks_->stack(t), FiberStacks::kStackBytes,
                  &BlockScheduler::thread_main, this);
  }
  for (unsigned i = 0; i < thread_count_; ++i) ready_.push_back(in_order(i, thread_count_));
  // Fibers hand over to each other directly (switch_away); control comes back here only when
  // nothing is ready or a fiber faulted.
  while (ready_head_ < ready_.size()) {
    set_current(pop_ready());
    switch_fiber(scheduler_context_, threads_[current_].context);
    if (!fault_.empty()) throw std::runtime_error(fault_);
  }
  if (exited_ != thread_count_) {
    throw std::runtime_error(std::string("cuda_sim: deadlock in kernel ") + kernel_name_ +
                             ", block (" + std::to_string(g_builtins.block_idx.x) + "," +
                             std::to_string(g_builtins.block_idx.y) + "," +
                             std::to_string(g_builtins.block_idx.z) + "): " + deadlock_report());
  }
}

void BlockScheduler::thread_main(void* scheduler) {
  static_cast<BlockScheduler*>(scheduler)->run_current_thread();
}

void BlockScheduler::run_current_thread() {
  try {
    body_(closure_);
  } catch (const std::exception& e) {
    fault(std::string("exception: ") + e.what());
  } catch (...) {
    fault("an exception that is not a std::exception");
  }
  const unsigned me = current_;
  threads_[me].state = State::kExited;
  ++exited_;
  Warp& warp = warps_[me / 32];
  warp.absent_mask |= 1u << (me % 32);
  check_warp(me / 32);
  release_barrier_if_complete();
  switch_away(me);
  __builtin_unreachable();  // an exited fiber is never resumed
}

unsigned BlockScheduler::pop_ready() {
  const unsigned next = ready_[ready_head_++];
  if (ready_head_ == ready_.size()) {
    ready_.clear();
    ready_head_ = 0;
  }
  return next;
}

// Runs the next ready fiber (or returns to run_block when there is none); returns when `me` is
// resumed, made current by whoever switched to it.
void BlockScheduler::switch_away(unsigned me) {
  if (ready_head_ == ready_.size()) {
    switch_fiber(threads_[me].context, scheduler_context_);
    return;
  }
  const unsigned next = pop_ready();
  set_current(next);
  if (next != me) switch_fiber(threads_[me].context, threads_[next].context);
}

void BlockScheduler::set_current(unsigned thread) {
  current_ = thread;
  g_builtins.thread_idx = thread_indices_[thread];
}

void BlockScheduler::yield_to_scheduler() { switch_away(current_); }

void BlockScheduler::make_ready(unsigned thread) {
  threads_[thread].state = State::kReady;
  ready_.push_back(thread);
}

void BlockScheduler::sync_threads() {
  threads_[current_].state = State::kAtBarrier;
  ++at_barrier_;
  release_barrier_if_complete();
  yield_to_scheduler();
}

// Exited threads count as arrived (as on the hardware, where a finished warp no longer holds a
// barrier back).
void BlockScheduler::release_barrier_if_complete() {
  if (at_barrier_ == 0 || at_barrier_ + exited_ != thread_count_) return;
  at_barrier_ = 0;
  for (unsigned i = 0; i < thread_count_; ++i) {
    const unsigned t = in_order(i, thread_count_);
    if (threads_[t].state == State::kAtBarrier) make_ready(t);
  }
}

const unsigned char* BlockScheduler::warp_exchange(unsigned mask, const void* value, size_t bytes,
                                                   const char* op) {
  const unsigned me = current_, lane = me % 32;
  Warp& warp = warps_[me / 32];
  if ((mask >> lane & 1u) == 0) {
    fault(std::string(op) + " called by a lane that its mask does not name (mask " +
          std::to_string(mask) + ")");
  }
  if (warp.arrived_mask == 0) {
    warp.op_mask = mask;
    warp.op = op;
  } else if (warp.op_mask != mask || (warp.op != op && std::strcmp(warp.op, op) != 0)) {
    fault(std::string(op) + " with mask " + std::to_string(mask) + " while lanes " +
          std::to_string(warp.arrived_mask) + " of the warp wait in " + warp.op + " with mask " +
          std::to_string(warp.op_mask));
  }
  const uint64_t generation = warp.generation;
  std::memcpy(warp.slots[generation & 1][lane], value, bytes);
  warp.arrived_mask |= 1u << lane;
  threads_[me].state = State::kInWarpOp;
  check_warp(me / 32);
  yield_to_scheduler();
  return &warp.slots[generation & 1][0][0];
}

void BlockScheduler::check_warp(unsigned warp_index) {
  Warp& warp = warps_[warp_index];
  if (warp.arrived_mask == 0) return;
  if ((warp.op_mask & warp.absent_mask) != 0) {
    fault(std::string("lanes ") + std::to_string(warp.op_mask & warp.absent_mask) + " of warp " +
          std::to_string(warp_index) + " have exited or do not exist, but " + warp.op +
          "'s mask " + std::to_string(warp.op_mask) + " names them");
  }
  if (warp.arrived_mask != warp.op_mask) return;
  const unsigned arrived = warp.arrived_mask;
  warp.arrived_mask = 0;
  ++warp.generation;
  for (unsigned i = 0; i < 32; ++i) {
    const unsigned lane = in_order(i, 32);
    if (arrived >> lane & 1u) make_ready(warp_index * 32 + lane);
  }
}

void BlockScheduler::fault(const std::string& what) {
  fault_ = std::string("cuda_sim: fault in kernel ") + kernel_name_ + ", " +
           thread_name(current_) + ": " + what;
  switch_fiber(threads_[current_].context, scheduler_context_);
  __builtin_unreachable();  // run_block throws; this fiber is abandoned
}

std::string BlockScheduler::thread_name(unsigned thread) const {
  const dim3 dim = g_builtins.block_dim;
  const uint3 b = g_builtins.block_idx;
  std::ostringstream out;
  out << "block (" << b.x << "," << b.y << "," << b.z << ") thread (" << thread % dim.x << ","
      << (thread / dim.x) % dim.y << "," << thread / (dim.x * dim.y) << ")";
  return out.str();
}

std::string BlockScheduler::deadlock_report() const {
  std::ostringstream out;
  out << exited_ << " of " << thread_count_ << " threads exited, " << at_barrier_
      << " wait at __syncthreads";
  for (size_t w = 0; w < warps_.size(); ++w) {
    const Warp& warp = warps_[w];
    if (warp.arrived_mask == 0) continue;
    out << "; warp " << w << ": lanes " << std::hex << warp.arrived_mask << " wait in " << warp.op
        << " (mask " << warp.op_mask << ")" << std::dec;
  }
  return out.str();
}

}  // namespace cuda_sim
