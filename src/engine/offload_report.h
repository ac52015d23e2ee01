// What `zero train` says about ZeRO-Offload / ZeRO-Infinity: at the start, where each category of
// bytes lives (device, pinned and pageable host memory, NVMe files); in each step line, the
// host <-> device and NVMe traffic of the print window. Nothing is printed without offload.
#pragma once
#include <cstdint>
#include <string>

#include "engine/engine.h"

namespace zero::engine {

// Whether the engine offloads anything (optimizer or parameters).
bool offloads(const Engine& engine);

// One line: "offload: parameters: nvme, optimizer: cpu | device 4.6 MiB (params 0.0, grads 1.5,
// optim 0.0) | host 10.9 MiB pinned + 0.0 MiB pageable (params 1.5, grads 3.1, optim 6.2) |
// nvme 1.5 MiB in files".
std::string offload_placement_line(Engine& engine);

// Bytes moved since the engine started (cumulative; the trainer prints differences).
struct OffloadTraffic {
  int64_t host_to_device = 0;
  int64_t device_to_host = 0;
  int64_t nvme_read = 0;
  int64_t nvme_write = 0;
};
OffloadTraffic offload_traffic(Engine& engine);
// " | h2d 1.5 MiB d2h 3.1 MiB nvme r 3.0 w 1.5 MiB" for the traffic between `from` and `to`,
// per step over `steps` steps.
std::string offload_traffic_text(const OffloadTraffic& from, const OffloadTraffic& to, int64_t steps);

}  // namespace zero::engine
