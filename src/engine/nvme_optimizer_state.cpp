#include "engine/nvme_optimizer_state.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"
#include "offload/nvme_offload_validation.h"

namespace zero::engine {

NvmeOptimizerState::NvmeOptimizerState(const config::AioConfig& aio,
                                       const config::OffloadOptimizerConfig& offload,
                                       int64_t sub_group_size, int rank,
                                       std::vector<std::string> state_names, int64_t numel,
                                       Allocator& staging)
    : names_(std::move(state_names)), numel_(numel) {
  offload::validate_nvme_offload(aio, offload);
  offload::NvmeSwapStoreOptions options =
      offload::NvmeSwapStoreOptions::from_config(aio, offload, sub_group_size, rank, names_, numel);
  options.warn = [](const std::string& text) { std::fprintf(stderr, "zero: warning: %s\n", text.c_str()); };
  store_ = std::make_unique<offload::NvmeSwapStore>(options, staging);
}

void NvmeOptimizerState::step(offload::CpuOptimizerStep& cpu_step, const Tensor& master,
                              const Tensor& grads, const Tensor& param_copy,
                              std::span<const backend::ParamSegment> segments,
                              const backend::OptimizerHyper& hyper, double clip_coefficient) {
  ZERO_CHECK(master.numel() == numel_ && grads.numel() == numel_,
             "NVMe optimizer step over " << master.numel() << " elements, state of " << numel_);
  std::vector<backend::ParamSegment> local;
  store_->for_each_sub_group([&](int64_t, int64_t begin, int64_t count, std::span<Tensor> views) {
    // The segments inside [begin, begin + count), in the sub-group's coordinates.
    local.clear();
    for (const backend::ParamSegment& s : segments) {
      const int64_t lo = std::max(begin, s.offset);
      const int64_t hi = std::min(begin + count, s.offset + s.length);
      if (lo < hi) local.push_back({lo - begin, hi - lo, s.weight_decay});
    }
    if (local.empty()) return;
    offload::CpuStepBuffers buffers;
    buffers.master = master.view(begin, {count});
    buffers.grads = grads.view(begin, {count});
    buffers.state.assign(views.begin(), views.end());
    if (param_copy.defined()) buffers.param_copy = param_copy.view(begin, {count});
    cpu_step.step(buffers, local, hyper, 1.0, clip_coefficient);
  });
}

std::vector<std::pair<std::string, Tensor>> NvmeOptimizerState::read_all() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& name : names_) {
    Tensor host = Tensor::empty(cpu_allocator(), {numel_}, DType::kF32, MemoryCategory::kOptimizer);
    store_->read_all(name, std::span<float>(host.data<float>(), static_cast<size_t>(numel_)));
    out.emplace_back(name, host);
  }
  return out;
}

void NvmeOptimizerState::write_all(const std::vector<std::pair<std::string, Tensor>>& state) {
  for (const auto& entry : state) {
    const Tensor& t = entry.second;
    ZERO_CHECK(t.dtype() == DType::kF32 && t.numel() == numel_ && t.device().is_cpu(),
               "NVMe state " << entry.first << ": " << t.describe());
    store_->write_all(entry.first, std::span<const float>(t.data<float>(), static_cast<size_t>(numel_)));
  }
}

}  // namespace zero::engine
