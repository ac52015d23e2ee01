// The backends a run picks by name (`zero train --device`):
//   "cpu"  the CPU backend (the default, and the oracle every other backend is tested against);
//   "sim"  the simulated device (backend/sim/): the CPU kernels on memory that host code may not
//          touch, every transfer counted; a run that passes on it is device-clean;
//   "cuda", "cuda:N"  the CUDA backend (backend/cuda/) on device N (default 0); a build without
//          CUDA throws UnsupportedError saying so, a machine without the device a zero::Error
//          naming what is missing.
// Anything else is a ConfigError listing the choices.
// "auto" (what `zero train` defaults to) is not a backend: resolve it with cuda_visible() first.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace zero::backend {

std::unique_ptr<Backend> create_backend(const std::string& device);

// Whether this build has the CUDA backend and this process sees at least one GPU.
bool cuda_visible();

}  // namespace zero::backend
