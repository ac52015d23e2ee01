#include "backend/backend_factory.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/sim/simulated_device_backend.h"
#include "core/error.h"

namespace zero::backend {

std::unique_ptr<Backend> create_backend(const std::string& device) {
  if (device == "cpu") return std::make_unique<CpuBackend>();
  if (device == "sim") return std::make_unique<SimulatedDeviceBackend>();
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    throw UnsupportedError("--device " + device +
                           ": this build of zero.cpp has no CUDA backend yet (it is being built: "
                           "the CUDA backend issue); train with --device cpu, or --device sim to "
                           "check a run is device-clean");
  }
  std::string shown = device.substr(0, 40);
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  throw ConfigError("--device \"" + shown + "\" is not a device zero.cpp knows; use cpu, sim or cuda");
}

}  // namespace zero::backend
