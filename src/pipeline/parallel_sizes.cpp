#include "pipeline/parallel_sizes.h"

#include <string>

#include "core/check.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace zero::pipeline {
namespace {

// One axis size and the words saying where it came from ("--pipeline-parallel-size 2").
struct Size {
  int64_t value;
  std::string origin;
};

Size from_flag_or_key(const std::optional<int64_t>& flag, const char* flag_name,
                      int64_t key_value, const std::string& key_origin) {
  if (flag) {
    if (*flag < 1) {
      throw ConfigError(std::string(flag_name) + " " + std::to_string(*flag) +
                        " must be 1 or more (1 turns the axis off)");
    }
    return {*flag, std::string(flag_name) + " " + std::to_string(*flag)};
  }
  return {key_value, key_origin};
}

}  // namespace

comm::MeshShape resolve_parallel_sizes(int world_size, const config::DeepSpeedConfig& config,
                                       const ParallelSizeFlags& flags) {
  ZERO_CHECK(world_size >= 1, "resolve_parallel_sizes needs a positive world size, got "
                                  << world_size);
  const std::optional<int64_t>& stages = config.pipeline.stages;
  const Size pp = from_flag_or_key(
      flags.pipeline_parallel_size, "--pipeline-parallel-size", stages.value_or(1),
      stages ? "pipeline.stages " + std::to_string(*stages) : "pipeline.stages \"auto\" (1)");
  const int64_t autotp = config.tensor_parallel.autotp_size;
  const Size tp = from_flag_or_key(
      flags.tensor_parallel_size, "--tensor-parallel-size", autotp > 1 ? autotp : 1,
      autotp > 1 ? "tensor_parallel.autotp_size " + std::to_string(autotp)
                 : "tensor_parallel.autotp_size " + std::to_string(autotp) + " (1: off)");
  const int64_t sp_value = config.sequence_parallel_size;
  const Size sp = {sp_value, "sequence_parallel_size " + std::to_string(sp_value)};
  ZERO_CHECK(sp.value >= 1, "sequence_parallel_size below 1 passed the config reader: " << sp.value);

  std::optional<int64_t> product = 1;
  for (const Size* size : {&pp, &tp, &sp}) {
    if (product) product = mul_if_fits(*product, size->value);
  }
  if (!product || world_size % *product != 0) {
    throw ConfigError(
        "the parallel sizes do not fit the " + std::to_string(world_size) + " ranks: " +
        pp.origin + " x " + tp.origin + " x " + sp.origin + " = " +
        (product ? std::to_string(*product) : std::string("more than 2^63")) +
        ", which does not divide " + std::to_string(world_size) +
        " (the data-parallel size is ranks / (pipeline x tensor x sequence)); run a multiple of "
        "that product, or lower --pipeline-parallel-size / --tensor-parallel-size or the config "
        "keys");
  }
  comm::MeshShape shape;
  shape.pp = static_cast<int>(pp.value);
  shape.tp = static_cast<int>(tp.value);
  shape.sp = static_cast<int>(sp.value);
  shape.dp = static_cast<int>(world_size / *product);
  return shape;
}

}  // namespace zero::pipeline
