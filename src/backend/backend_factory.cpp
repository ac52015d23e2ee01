#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"
#if ZERO_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace zero::backend {

std::unique_ptr<Backend> create_backend(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuBackend>();
  if (device == "sim") return std::make_unique<SimulatedDeviceBackend>();
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
#if ZERO_HAVE_CUDA
    int index = 0;
    if (device != "cuda") {
      const std::string digits = device.substr(5);
      const bool number = !digits.empty() && digits.size() <= 4 &&
                          digits.find_first_not_of("0123456789") == std::string::npos;
      if (!number) {
        throw ConfigError("--device " + device.substr(0, 40) +
                          ": expected cuda or cuda:N with N a device number (0, 1, ...)");
      }
      index = std::stoi(digits);
    }
    return std::make_unique<CudaBackend>(index);
#else
    throw UnsupportedError("--device " + device.substr(0, 40) +
                           ": this build of zero.cpp has no CUDA backend (it was configured "
                           "without CUDA: -DZERO_CUDA=ON needs nvcc and the CUDA toolkit); train "
                           "with --device cpu, or --device sim to check a run is device-clean");
#endif
  }
  std::string shown = device.substr(0, 40);
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  throw ConfigError("--device \"" + shown + "\" is not a device zero.cpp knows; use auto, cpu, sim or cuda");
}

bool cuda_visible() {
#if ZERO_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

}  // namespace zero::backend
