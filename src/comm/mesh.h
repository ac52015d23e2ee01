// Mesh: the world's ranks laid out over pipeline (pp), data (dp), sequence (sp) and tensor (tp)
// axes, ordered as DeepSpeed orders them (PipeModelDataParallelTopology puts pipe slowest and
// model/tensor fastest; Ulysses sequence groups are consecutive ranks inside a data-parallel
// replica):
//   rank = ((p * dp + d) * sp + s) * tp + t
// Each axis has a group: the ranks that differ only along it (ZeRO partitions over the data
// group, or over the data x sequence group with Ulysses sequence parallelism).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/comm.h"

namespace zero::comm {

enum class MeshAxis : int { kPipeline = 0, kData, kSequence, kTensor };
const char* mesh_axis_name(MeshAxis axis);

struct MeshShape {
  int pp = 1, dp = 1, sp = 1, tp = 1;
  int size() const { return pp * dp * sp * tp; }
  int extent(MeshAxis axis) const;
};

class Mesh {
 public:
  // Every rank of `world` must construct the mesh (it splits groups). Throws ConfigError when
  // the shape does not multiply to the world size, showing the numbers. `world` must outlive it.
  Mesh(Comm& world, MeshShape shape);

  const MeshShape& shape() const { return shape_; }
  // This rank's position along `axis`.
  int coordinate(MeshAxis axis) const { return coords_[static_cast<int>(axis)]; }
  // The group along `axis` (size shape().extent(axis); its rank() is coordinate(axis)).
  Comm& group(MeshAxis axis) { return *groups_[static_cast<int>(axis)]; }

  // The ranks that share this rank's pipeline and tensor coordinates: the data x sequence
  // group (DeepSpeed's seq_data_parallel_group), size dp * sp, group rank d * sp + s. ZeRO
  // partitions and reduces over it under sequence parallelism: parameters are replicated
  // across the sequence group, each rank's gradient is the part from its own tokens.
  Comm& data_sequence_group() { return *data_sequence_group_; }

  // World rank of the given coordinates (p, d, s, t).
  static int rank_of(const MeshShape& shape, int p, int d, int s, int t);
  // The shape of `world_size` ranks split into sequence-parallel groups of
  // `sequence_parallel_size` (DeepSpeed's top-level key): dp = world / sp, pp = tp = 1. Throws
  // ConfigError naming both numbers when sp < 1 or sp does not divide the world size.
  static MeshShape sequence_parallel_shape(int world_size, int64_t sequence_parallel_size);

 private:
  Comm& world_;
  MeshShape shape_;
  std::array<int, 4> coords_{};
  std::array<std::unique_ptr<Comm>, 4> groups_;
  std::unique_ptr<Comm> data_sequence_group_;
};

}  // namespace zero::comm
