// Where the DeepSpeed config meets the NVMe swap: the settings of zero_optimization.
// offload_optimizer {device: nvme} and the aio section that the swap cannot honour are refused
// here, before any file is created.
#pragma once

#include "config/aio_config.h"
#include "config/offload_config.h"

namespace zero::offload {

// For offload_optimizer.device == nvme (anything else: nothing to check, the aio section is
// unused): nvme_path must be set (ConfigError naming zero_optimization.offload_optimizer.
// nvme_path), buffer_count must be positive (ConfigError), and aio.use_gds is refused with an
// UnsupportedError (GPUDirect Storage needs the CUDA backend and NVIDIA's cuFile, which zero.cpp
// does not use; swaps go through pinned host buffers instead). Whether the directory exists and
// is writable, and whether buffer_count fits the number of swapped tensors and pipelining, is
// checked by NvmeSwapStore, which knows both.
void validate_nvme_offload(const config::AioConfig& aio, const config::OffloadOptimizerConfig& offload);

// For offload_param.device == nvme: nvme_path set, buffer_count and buffer_size positive
// (ConfigErrors naming the zero_optimization.offload_param keys), aio.use_gds refused as above.
void validate_nvme_param_offload(const config::AioConfig& aio, const config::OffloadParamConfig& offload);

}  // namespace zero::offload
