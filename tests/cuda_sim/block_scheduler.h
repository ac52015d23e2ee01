// Runs the threads of one thread block as fibers on the calling OS thread: in thread order, each
// until it waits (a barrier, a warp exchange) or exits; a barrier that completes makes its
// waiters ready again, in thread order. When nothing is ready but some threads have not exited,
// the block can never finish: that is reported as a deadlock instead of hanging.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_sim/thread_state.h"
#include "fiber.h"

namespace cuda_sim {

using ThreadBody = void (*)(void* closure);

// CUDA_SIM_SCHEDULE=reverse runs blocks, threads and released waiters in descending order
// instead of ascending: another legal schedule. A kernel whose results change with it has a race
// (a missing barrier, blocks that depend on each other's order).
bool reverse_schedule();
// The i-th of `count` indices in the schedule's order.
unsigned in_order(unsigned i, unsigned count);

class BlockScheduler {
 public:
  // Runs every thread of the current block (g_builtins.block_dim threads) through body(closure);
  // throws std::runtime_error naming `kernel_name` and the thread on a fault or a deadlock.
  void run_block(const char* kernel_name, ThreadBody body, void* closure);

  // The operations of thread_state.h, called from the running fiber.
  void sync_threads();
  const unsigned char* warp_exchange(unsigned mask, const void* value, size_t bytes,
                                     const char* op);
  [[noreturn]] void fault(const std::string& what);
  unsigned lane() const { return current_ % 32; }

 private:
  enum class State { kReady, kAtBarrier, kInWarpOp, kExited };
  struct Thread {
    FiberContext context;
    State state = State::kReady;
  };
  struct Warp {
    unsigned absent_mask = 0;   // lanes that exited or that the block does not have
    unsigned arrived_mask = 0;  // lanes waiting in the pending exchange
    unsigned op_mask = 0;       // the pending exchange's mask
    const char* op = nullptr;   // ... and its name
    uint64_t generation = 0;    // completed exchanges; slots alternate between two buffers
    alignas(16) unsigned char slots[2][32][kWarpSlotBytes];
  };

  static void thread_main(void* scheduler);
  void run_current_thread();
  void yield_to_scheduler();
  void switch_away(unsigned me);
  unsigned pop_ready();
  void make_ready(unsigned thread);
  void release_barrier_if_complete();
  void check_warp(unsigned warp_index);
  void set_current(unsigned thread);
  std::string thread_name(unsigned thread) const;
  std::string deadlock_report() const;

  const char* kernel_name_ = "";
  ThreadBody body_ = nullptr;
  void* closure_ = nullptr;
  unsigned thread_count_ = 0;
  unsigned current_ = 0;
  unsigned exited_ = 0;
  unsigned at_barrier_ = 0;
  std::vector<Thread> threads_;
  std::vector<uint3> thread_indices_;  // threadIdx of each linear thread
  std::vector<Warp> warps_;
  std::vector<unsigned> ready_;
  size_t ready_head_ = 0;
  FiberContext scheduler_context_;
  std::unique_ptr<FiberStacks> stacks_;
  std::string fault_;  // set by a faulting fiber: run_block throws it
};

}  // namespace cuda_sim
