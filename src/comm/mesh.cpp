#include "comm/mesh.h"

#include "core/error.h"

namespace zero::comm {

const char* mesh_axis_name(MeshAxis axis) {
  switch (axis) {
    case MeshAxis::kPipeline: return "pipeline";
    case MeshAxis::kData: return "data";
    case MeshAxis::kSequence: return "sequence";
    case MeshAxis::kTensor: return "tensor";
  }
  return "unknown";
}

int MeshShape::extent(MeshAxis axis) const {
  switch (axis) {
    case MeshAxis::kPipeline: return pp;
    case MeshAxis::kData: return dp;
    case MeshAxis::kSequence: return sp;
    case MeshAxis::kTensor: return tp;
  }
  return 1;
}

int Mesh::rank_of(const MeshShape& shape, int p, int d, int s, int t) {
  return ((p * shape.dp + d) * shape.sp + s) * shape.tp + t;
}

Mesh::Mesh(Comm& world, MeshShape shape) : world_(world), shape_(shape) {
  if (shape.pp < 1 || shape.dp < 1 || shape.sp < 1 || shape.tp < 1 ||
      shape.size() != world.world_size()) {
    throw ConfigError("parallel layout pipeline " + std::to_string(shape.pp) + " x data " +
                      std::to_string(shape.dp) + " x sequence " + std::to_string(shape.sp) +
                      " x tensor " + std::to_string(shape.tp) + " = " + std::to_string(shape.size()) +
                      " ranks, but the job has " + std::to_string(world.world_size()) +
                      "; make the product equal the number of ranks");
  }
  int rest = world.rank();
  coords_[3] = rest % shape.tp;
  rest /= shape.tp;
  coords_[2] = rest % shape.sp;
  rest /= shape.sp;
  coords_[1] = rest % shape.dp;
  coords_[0] = rest / shape.dp;
  // One split per axis: the color numbers the other three coordinates, the key orders by this
  // one, so group rank == coordinate.
  for (int axis = 0; axis < 4; ++axis) {
    int color = 0;
    for (int other = 0; other < 4; ++other) {
      if (other == axis) continue;
      color = color * shape.extent(static_cast<MeshAxis>(other)) + coords_[other];
    }
    groups_[axis] = world.split(color, coords_[axis]);
  }
  data_sequence_group_ = world.split(coords_[0] * shape.tp + coords_[3], coords_[1] * shape.sp + coords_[2]);
}

MeshShape Mesh::sequence_parallel_shape(int world_size, int64_t sequence_parallel_size) {
  if (sequence_parallel_size < 1 || world_size % sequence_parallel_size != 0) {
    throw ConfigError("sequence_parallel_size " + std::to_string(sequence_parallel_size) +
                      " must be >= 1 and divide the number of ranks, " +
                      std::to_string(world_size) +
                      " (the data-parallel size is ranks / sequence_parallel_size); run a "
                      "multiple of it, or change the key");
  }
  MeshShape shape;
  shape.sp = static_cast<int>(sequence_parallel_size);
  shape.dp = world_size / shape.sp;
  return shape;
}

}  // namespace zero::comm
