// Text pieces every part of `zero estimate`'s output shares: byte counts as GiB with two
// decimals and a ZeRO configuration in words.
#pragma once
#include <cstdint>
#include <string>

#include "sharding/memory_estimator.h"

namespace zero::tools {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// "13.40 GiB" for `bytes`.
std::string gib(int64_t bytes);

// "ZeRO-3, offload_optimizer=cpu, zero_init=1": the stage, the offloads that are on, and
// zero_init at stage 3.
std::string describe_zero_options(const sharding::ZeroOptions& options);

}  // namespace zero::tools
