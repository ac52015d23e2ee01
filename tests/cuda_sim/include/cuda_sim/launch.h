// The launcher that the rewritten .cu files call in place of kernel<<<grid, block, smem,
// stream>>>(args...): the arguments are copied once (as the CUDA runtime copies them), pointer
// arguments are checked to be device-accessible, the configuration is checked, and the grid is
// enqueued on the stream; when it runs, every thread of every block calls the kernel with its own
// copy of the parameters.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_sim/streams.h"
#include "cuda_sim/thread_state.h"

namespace cuda_sim {

struct LaunchConfig {
  const char* kernel_name = "";  // the launch's kernel expression, as written
  const void* kernel = nullptr;  // identifies the kernel (cudaFuncSetAttribute's key)
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes = 0;
  cudaStream_t stream = nullptr;
};

// Checks the configuration as cudaLaunchKernel does: false after setting the runtime's last error
// (and saying why on stderr) when CUDA would refuse the launch.
bool accept_launch(const LaunchConfig& config);
// Runs every block of an accepted launch; a fault inside the kernel throws std::runtime_error.
void run_grid(const LaunchConfig& config, void (*thread_body)(void* closure), void* closure);

// Throws std::runtime_error unless `pointer` is null or inside a live cudaMalloc/cudaHostAlloc
// allocation (the memory a kernel can reach).
void check_kernel_pointer(const char* kernel_name, size_t argument, const void* pointer);

// `call` invokes the kernel by name with the stored arguments, so overload resolution, template
// argument deduction and parameter conversions happen exactly as in the <<<>>> launch; each
// thread's call copies the arguments into its own parameters. `kernel` is the kernel's address
// (cudaFuncSetAttribute's key), or null for a function template whose arguments the launch
// deduces (the rewriter cannot name that specialisation).
template <typename Call, typename... Args>
void launch_kernel(const char* kernel_name, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                   cudaStream_t stream, const void* kernel, Call call, Args&&... args) {
  struct Closure {
    Call call;
    std::tuple<std::decay_t<Args>...> arguments;
    static void run_thread(void* self) {
      auto* closure = static_cast<Closure*>(self);
      std::apply(closure->call, closure->arguments);
    }
  };
  auto closure = std::make_shared<Closure>(
      Closure{call, std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)});
  size_t argument = 0;
  auto check = [&](const auto& value) {
    if constexpr (std::is_pointer_v<std::decay_t<decltype(value)>>) {
      check_kernel_pointer(kernel_name, argument, value);
    }
    ++argument;
  };
  std::apply([&](const auto&... values) { (check(values), ...); }, closure->arguments);
  const LaunchConfig config{kernel_name, kernel, grid, block, dynamic_shared_bytes, stream};
  if (!accept_launch(config)) return;
  // The stream runs it later (streams.h): the closure owns the copied arguments until then.
  enqueue(stream, [config, closure] { run_grid(config, &Closure::run_thread, closure.get()); });
}

// `extern __shared__ T name[];` becomes `T* const name = dynamic_shared<T>();`.
template <typename T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(g_dynamic_shared);
}

}  // namespace cuda_sim
