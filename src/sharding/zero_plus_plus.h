// ZeRO++ (Wang et al., "ZeRO++", arXiv 2306.10209): three communication savers on top of
// ZeRO-3, switched by DeepSpeed's keys in zero_optimization:
//   zero_quantized_weights  (qwZ)  parameter gathers from the partition send int8 codes in
//                                  groups of kZeroPlusPlusGroup elements (ParameterFetcher);
//   zero_hpz_partition_size (hpZ)  a unit released before its backward leaves each rank a
//                                  secondary slice within a group of that many consecutive ranks
//                                  (the GPUs of a node), and the unit's later gathers in the same
//                                  pass - the backward's - stay within that group
//                                  (ParameterFetcher);
//   zero_quantized_gradients (qgZ) gradient reduce-scatters send int8 codes through an
//                                  all-to-all and sum the decoded chunks (GradientReducer); with
//                                  hpZ in two hops, within the hpZ groups and then across them,
//                                  so only 1/k of the bytes cross nodes.
// The partitions, master weights and optimizer never see quantized values: qwZ changes the
// weights the layers compute with (each moves by at most 1/254 of its group's largest
// magnitude) and qgZ each rank's contribution to the reduced gradient likewise.
//
// Where DeepSpeed's own ZeRO++ differs: qgZ's codes are int8 in both hops (DeepSpeed: int4
// within the node), its nodes are hpZ's groups (DeepSpeed: the GPUs of each machine; the same
// when zero_hpz_partition_size is the GPUs per node, as DeepSpeed advises), and without hpZ it
// is one all-to-all over the data-parallel group; quantization groups are 2048 elements of each
// rank's shard (DeepSpeed picks a group count per tensor). On one rank nothing is communicated,
// so nothing is quantized. Below stage 3 DeepSpeed ignores the keys (the config reader notes
// that) and so does ZeroStage.
#pragma once
#include <cstdint>
#include <memory>

#include "comm/comm.h"
#include "config/zero_config.h"

namespace zero::sharding {

// Elements per quantization group (one f32 scale each): 2048 keeps the scales at 0.2% of the
// codes and a group's range local.
inline constexpr int64_t kZeroPlusPlusGroup = 2048;

struct ZeroPlusPlus {
  int64_t weight_group = 0;    // > 0: qwZ with groups of this many elements
  int64_t gradient_group = 0;  // > 0: qgZ with groups of this many elements
  int64_t hpz_size = 1;        // > 1: hpZ with secondary groups of this many ranks

  // The options in effect for `zero` on a data-parallel group of `world` ranks at `stage`.
  // ConfigError for an hpZ size that does not divide the world, and for qgZ with
  // reduce_scatter false (one replaces the reduce-scatter the other turns off).
  static ZeroPlusPlus from(const config::ZeroConfig& zero, int stage, int world);
  bool any() const { return weight_group > 0 || gradient_group > 0 || hpz_size > 1; }
};

// The hpZ secondary group of this rank: ranks [k * size, (k + 1) * size) of `data_parallel`
// (consecutive ranks share a node under mpirun's and Slurm's default placement). A collective
// over `data_parallel`.
std::unique_ptr<comm::Comm> make_hpz_group(comm::Comm& data_parallel, int64_t size);

}  // namespace zero::sharding
