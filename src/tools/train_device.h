// The device and the communicator `zero train` trains with: `--device cpu|sim|cuda[:N]`, and how
// its ranks reach each other. With `--device cuda` and several ranks, when every rank has a GPU
// of its own (local rank < GPUs on its machine) rank r of a machine takes GPU r and the ranks
// talk over NCCL (NcclComm); otherwise they share GPU 0 and reach each other through pinned host
// staging buffers (HostStagedComm). On the CPU the world communicator is used as it is.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "backend/profiling/profiling_backend.h"
#include "comm/comm.h"

namespace zero::tools {

struct TrainDevice {
  std::unique_ptr<backend::Backend> backend;
  // The device-aware communicator over the world's ranks, when the world's own cannot carry
  // device tensors (null on the CPU: use the world communicator).
  std::unique_ptr<comm::Comm> device_group;
  // The communicator training uses: device_group, else `world`.
  comm::Comm* group = nullptr;
  // With profile_kernels: `backend` is a ProfilingBackend over the device's backend (this
  // points at it), so the communicators' copies are profiled too; null otherwise.
  backend::ProfilingBackend* profiler = nullptr;
  // The device name after resolving "auto" (e.g. "cuda", "cpu").
  std::string resolved;
  // Each rank has a device of its own (NCCL, or a world of one); otherwise this machine's ranks
  // share one device (host-staged) and the memory preflight adds up their needs there.
  bool device_per_rank = true;
};

// Collective over `world` (the NCCL choice is agreed by all ranks). `world` must outlive the
// result. Throws the backend factory's errors for an unknown or unavailable device.
// "auto" trains on the GPU when every rank sees one (and the build has CUDA), else on the CPU;
// TrainDevice::resolved says which.
TrainDevice open_train_device(const std::string& device_name, comm::Comm& world,
                              bool profile_kernels = false);

}  // namespace zero::tools
