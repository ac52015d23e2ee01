// validate_nvme_offload: the config checks of offload_optimizer {device: nvme}.
#include "offload/nvme_offload_validation.h"

#include <string>

#include "core/error.h"

namespace zero::offload {

namespace {

void refuse_gds(const config::AioConfig& aio) {
  if (aio.use_gds) {
    throw UnsupportedError(
        "aio.use_gds: GPUDirect Storage is not supported: it needs the CUDA backend and NVIDIA's "
        "cuFile library, which zero.cpp does not use. Set \"use_gds\": false; NVMe swaps then go "
        "through pinned host buffers with io_uring");
  }
}

}  // namespace

void validate_nvme_offload(const config::AioConfig& aio, const config::OffloadOptimizerConfig& offload) {
  if (offload.device != config::OffloadDevice::kNvme) return;
  refuse_gds(aio);
  if (!offload.nvme_path || offload.nvme_path->empty()) {
    throw ConfigError(
        "zero_optimization.offload_optimizer.nvme_path is required with \"device\": \"nvme\": "
        "set it to a folder on a fast local disk (the optimizer state is swapped to files there)");
  }
  if (offload.buffer_count <= 0) {
    throw ConfigError("zero_optimization.offload_optimizer.buffer_count must be positive with \"device\": "
                      "\"nvme\" (the staging buffers of the swap), got " +
                      std::to_string(offload.buffer_count));
  }
}

void validate_nvme_param_offload(const config::AioConfig& aio, const config::OffloadParamConfig& offload) {
  if (offload.device != config::OffloadDevice::kNvme) return;
  refuse_gds(aio);
  if (!offload.nvme_path || offload.nvme_path->empty()) {
    throw ConfigError(
        "zero_optimization.offload_param.nvme_path is required with \"device\": \"nvme\": set it "
        "to a folder on a fast local disk (the parameter partitions are swapped to a file there)");
  }
  if (offload.buffer_count <= 0 || offload.buffer_size <= 0) {
    throw ConfigError("zero_optimization.offload_param.buffer_count and buffer_size must be positive "
                      "with \"device\": \"nvme\" (the staging buffers the parameters are read "
                      "into), got " + std::to_string(offload.buffer_count) + " buffers of " +
                      std::to_string(offload.buffer_size) + " elements");
  }
}

}  // namespace zero::offload
