// Fibers: the simulated GPU threads of one block run as fibers on one OS thread, each with its
// own stack, switching only where a thread must wait for others (a barrier or a warp exchange).
// The switch is a few instructions of x86-64 assembly, because a kernel switches at every
// __syncthreads and every shuffle: ucontext's signal-mask system call per switch would make the
// simulator several times slower. (Other architectures: port cuda_sim_switch_stack in fiber.cpp.)
#pragma once
#include <cstddef>
#include <vector>

#if !defined(__x86_64__)
#error "the CUDA simulator's fiber switch (tests/cuda_sim/fiber.cpp) is written for x86-64"
#endif

namespace cuda_sim {

// The saved state of a suspended fiber (or of the scheduler that resumes fibers).
struct FiberContext {
  void* stack_pointer = nullptr;
};

using FiberEntry = void (*)(void* argument);

// Readies `fiber` to start entry(argument) on the stack [stack_base, stack_base + stack_bytes)
// at its first resume. `entry` must never return: it switches away for good.
void prepare_fiber(FiberContext& fiber, void* stack_base, size_t stack_bytes, FiberEntry entry,
                   void* argument);

// Saves the running context into `from` and resumes `to`.
void switch_fiber(FiberContext& from, FiberContext& to);

// Stacks for up to `count` fibers, reused by every block of every launch (blocks run one after
// another). Each stack has an inaccessible guard page below it, so an overflow faults at once
// instead of corrupting a neighbour.
class FiberStacks {
 public:
  static constexpr size_t kStackBytes = 128 * 1024;
  explicit FiberStacks(size_t count);
  ~FiberStacks();
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;

  size_t count() const { return count_; }
  void* stack(size_t index) const;

 private:
  size_t count_ = 0;
  size_t slot_bytes_ = 0;  // one guard page plus one stack
  char* region_ = nullptr;
};

}  // namespace cuda_sim
