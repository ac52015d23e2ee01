#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

// cuda_sim_switch_stack(save, load): pushes the callee-saved registers (System V ABI), stores the
// stack pointer to *save, loads `load` and pops the registers saved there. A new fiber's stack is
// laid out by prepare_fiber so that its first "return" lands in cuda_sim_fiber_start, which calls
// entry(argument) (kept in r13 and r12).
asm(R"(
  .text
  .p2align 4
  .globl cuda_sim_switch_stack
  .type cuda_sim_switch_stack, @function
cuda_sim_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_sim_switch_stack, .-cuda_sim_switch_stack

  .p2align 4
  .globl cuda_sim_fiber_start
  .type cuda_sim_fiber_start, @function
cuda_sim_fiber_start:
  movq %r12, %rdi
  callq *%r13
  ud2
  .size cuda_sim_fiber_start, .-cuda_sim_fiber_start
)");

extern "C" void cuda_sim_switch_stack(void** save, void* load);
extern "C" void cuda_sim_fiber_start();

namespace cuda_sim {

void prepare_fiber(FiberContext& fiber, void* stack_base, size_t stack_bytes, FiberEntry entry,
                   void* argument) {
  auto top = reinterpret_cast<uintptr_t>(stack_base) + stack_bytes;
  top &= ~uintptr_t{15};
  // Nine words: six registers (r15, r14, r13, r12, rbx, rbp), the return address and padding so
  // that cuda_sim_fiber_start's call is made with a 16-byte aligned stack.
  auto* words = reinterpret_cast<uintptr_t*>(top - 9 * sizeof(uintptr_t));
  std::memset(words, 0, 9 * sizeof(uintptr_t));
  words[2] = reinterpret_cast<uintptr_t>(entry);     // r13
  words[3] = reinterpret_cast<uintptr_t>(argument);  // r12
  words[6] = reinterpret_cast<uintptr_t>(&cuda_sim_fiber_start);
  fiber.stack_pointer = words;
}

void switch_fiber(FiberContext& from, FiberContext& to) {
  cuda_sim_switch_stack(&from.stack_pointer, to.stack_pointer);
}

FiberStacks::FiberStacks(size_t count) : count_(count) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  slot_bytes_ = page + kStackBytes;
  void* region = mmap(nullptr, slot_bytes_ * count_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) throw std::runtime_error("cuda_sim: cannot map the fiber stacks");
  region_ = static_cast<char*>(region);
  for (size_t i = 0; i < count_; ++i) mprotect(region_ + i * slot_bytes_, page, PROT_NONE);
}

FiberStacks::~FiberStacks() { munmap(region_, slot_bytes_ * count_); }

void* FiberStacks::stack(size_t index) const {
  return region_ + index * slot_bytes_ + (slot_bytes_ - kStackBytes);
}

}  // namespace cuda_sim
