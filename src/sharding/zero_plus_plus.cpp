#include "sharding/zero_plus_plus.h"

#include <string>

#include "core/error.h"

namespace zero::sharding {

ZeroPlusPlus ZeroPlusPlus::from(const config::ZeroConfig& zero, int stage, int world) {
  ZeroPlusPlus options;
  if (stage != 3 || world == 1) return options;
  const int64_t hpz = zero.zero_hpz_partition_size;
  if (hpz > 1) {
    if (hpz > world || world % hpz != 0) {
      throw ConfigError("zero_optimization.zero_hpz_partition_size " + std::to_string(hpz) +
                        " must divide the " + std::to_string(world) +
                        " data-parallel ranks (it is the number of GPUs per node that share a "
                        "secondary partition); set it to a divisor of " +
                        std::to_string(world) + ", or 1 to turn hpZ off");
    }
    options.hpz_size = hpz;
  }
  if (zero.zero_quantized_weights) options.weight_group = kZeroPlusPlusGroup;
  if (zero.zero_quantized_gradients) {
    if (!zero.reduce_scatter) {
      throw ConfigError("zero_optimization.zero_quantized_gradients sends gradients through a "
                        "quantized reduce-scatter, but reduce_scatter is false (all-reduce "
                        "whole buckets); set reduce_scatter to true or remove "
                        "zero_quantized_gradients");
    }
    options.gradient_group = kZeroPlusPlusGroup;
  }
  return options;
}

std::unique_ptr<comm::Comm> make_hpz_group(comm::Comm& data_parallel, int64_t size) {
  const int rank = data_parallel.rank();
  return data_parallel.split(static_cast<int>(rank / size), rank);
}

}  // namespace zero::sharding
