// Device: where a tensor's bytes live. CPU is device 0 of kind kCpu; CUDA devices are numbered.
// kSimulated is device memory that physically is host memory but that host code must treat as
// a GPU's: the simulated device backend (backend/sim/) runs every op on it, so a machine without
// a GPU proves that layers never touch device elements (Tensor::data<T>() refuses them).
#pragma once
#include <string>

namespace zero {

enum class DeviceKind { kCpu, kCuda, kSimulated };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device cpu() { return Device{DeviceKind::kCpu, 0}; }
  static Device cuda(int index) { return Device{DeviceKind::kCuda, index}; }
  static Device simulated(int index) { return Device{DeviceKind::kSimulated, index}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool operator==(const Device&) const = default;
  std::string to_string() const {
    switch (kind) {
      case DeviceKind::kCpu: return "cpu";
      case DeviceKind::kCuda: return "cuda:" + std::to_string(index);
      case DeviceKind::kSimulated: return "sim:" + std::to_string(index);
    }
    return "unknown";
  }
};

}  // namespace zero
