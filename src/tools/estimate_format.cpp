#include "tools/estimate_format.h"

#include <cstdio>

namespace zero::tools {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / kGiB);
  return text;
}

std::string describe_zero_options(const sharding::ZeroOptions& o) {
  std::string text = "ZeRO-" + std::to_string(o.stage);
  if (o.offload_optimizer != sharding::OffloadDevice::kNone) {
    text += std::string(", offload_optimizer=") +
            sharding::offload_device_name(o.offload_optimizer);
  }
  if (o.offload_param != sharding::OffloadDevice::kNone) {
    text += std::string(", offload_param=") + sharding::offload_device_name(o.offload_param);
  }
  if (o.stage == 3) text += o.zero_init ? ", zero_init=1" : ", zero_init=0";
  return text;
}

}  // namespace zero::tools
