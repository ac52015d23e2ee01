#include "engine/offload_report.h"

#include <cstdio>

#include "engine/nvme_optimizer_state.h"

namespace zero::engine {
namespace {

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", bytes / (1024.0 * 1024.0));
  return text;
}

const char* tier_name(config::OffloadDevice device) {
  switch (device) {
    case config::OffloadDevice::kCpu:
      return "cpu";
    case config::OffloadDevice::kNvme:
      return "nvme";
    case config::OffloadDevice::kNone:
      break;
  }
  return "device";
}

std::string categories(const MemoryStats& a, const MemoryStats* b = nullptr) {
  auto live = [&](MemoryCategory c) {
    return static_cast<double>(a.live(c) + (b != nullptr ? b->live(c) : 0));
  };
  return "(params " + mib(live(MemoryCategory::kParams)) + ", grads " + mib(live(MemoryCategory::kGrads)) +
         ", optim " + mib(live(MemoryCategory::kOptimizer)) + ")";
}

int64_t optimizer_nvme_bytes(const Engine& engine) {
  const NvmeOptimizerState* state = engine.nvme_optimizer_state();
  if (state == nullptr) return 0;
  const auto& options = state->store().options();
  return options.numel * static_cast<int64_t>(options.tensor_names.size()) * 4;
}

// Partial offload (ratio < 1): how much of the partition updates on the device.
std::string partial_text(Engine& engine) {
  const int64_t split = engine.zero_stage().device_update_numel();
  if (split == 0) return "";
  char text[96];
  std::snprintf(text, sizeof(text), " (ratio %g: %lld of %lld partition elements update on the device)",
                engine.settings().zero.offload_optimizer.ratio, static_cast<long long>(split),
                static_cast<long long>(engine.zero_stage().layout().partition_numel()));
  return text;
}

}  // namespace

bool offloads(const Engine& engine) {
  const config::ZeroConfig& zero = engine.settings().zero;
  return zero.offload_optimizer.device != config::OffloadDevice::kNone ||
         (zero.stage == 3 && zero.offload_param.device != config::OffloadDevice::kNone);
}

std::string offload_placement_line(Engine& engine) {
  const config::ZeroConfig& zero = engine.settings().zero;
  backend::Backend& backend = engine.model().backend();
  const MemoryStats device = backend.allocator().stats();
  const MemoryStats pinned = backend.pinned_host_allocator().stats();
  const MemoryStats pageable = host_pageable_allocator().stats();
  int64_t nvme = optimizer_nvme_bytes(engine);
  if (const sharding::PartitionStore* store = engine.zero_stage().partition_store()) {
    nvme += store->placement().nvme_bytes;
  }
  const bool params_offloaded = zero.stage == 3 && zero.offload_param.device != config::OffloadDevice::kNone;
  return std::string("offload: parameters: ") +
         tier_name(params_offloaded ? zero.offload_param.device : config::OffloadDevice::kNone) +
         ", optimizer: " + tier_name(zero.offload_optimizer.device) + partial_text(engine) + " | device " +
         mib(static_cast<double>(device.total_live_bytes)) + " MiB " + categories(device) + " | host " +
         mib(static_cast<double>(pinned.total_live_bytes)) + " MiB pinned + " +
         mib(static_cast<double>(pageable.total_live_bytes)) + " MiB pageable " +
         categories(pinned, &pageable) + " | nvme " + mib(static_cast<double>(nvme)) + " MiB in files";
}

OffloadTraffic offload_traffic(Engine& engine) {
  const backend::TransferStats& t = engine.model().backend().transfer_stats();
  OffloadTraffic out{t.host_to_device_bytes, t.device_to_host_bytes, 0, 0};
  if (const NvmeOptimizerState* state = engine.nvme_optimizer_state()) {
    out.nvme_read += state->store().io_stats().bytes_read;
    out.nvme_write += state->store().io_stats().bytes_written;
  }
  if (const sharding::PartitionStore* store = engine.zero_stage().partition_store()) {
    out.nvme_read += store->traffic().nvme_read_bytes;
    out.nvme_write += store->traffic().nvme_write_bytes;
  }
  return out;
}

std::string offload_traffic_text(const OffloadTraffic& from, const OffloadTraffic& to, int64_t steps) {
  const double per = steps > 0 ? 1.0 / static_cast<double>(steps) : 1.0;
  auto d = [&](int64_t a, int64_t b) { return mib(static_cast<double>(b - a) * per); };
  return " | per step: h2d " + d(from.host_to_device, to.host_to_device) + " MiB d2h " +
         d(from.device_to_host, to.device_to_host) + " MiB nvme r " + d(from.nvme_read, to.nvme_read) +
         " w " + d(from.nvme_write, to.nvme_write) + " MiB";
}

}  // namespace zero::engine
