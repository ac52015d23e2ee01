// Device: where a tensor's bytes live. CPU is device 0 of kind kCpu; CUDA devices are numbered.
#pragma once
#include <string>

namespace zero {

enum class DeviceKind { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device cpu() { return Device{DeviceKind::kCpu, 0}; }
  static Device cuda(int index) { return Device{DeviceKind::kCuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool operator==(const Device&) const = default;
  std::string to_string() const {
    return kind == DeviceKind::kCpu ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
};

}  // namespace zero
