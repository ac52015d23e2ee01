// mpi-ranks: 2 4
// Mesh for Ulysses sequence parallelism: sequence_parallel_shape(world, sp) gives dp = world / sp
// (or a ConfigError naming both numbers), sequence groups are sp consecutive ranks, data groups
// the ranks with the same sequence coordinate, and the data x sequence group (ZeRO's group under
// sequence parallelism) every rank with the same pipeline and tensor coordinates, ordered by
// d * sp + s.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/mesh.h"
#include "comm/world.h"
#include "core/error.h"

namespace zero::comm {
namespace {

// World ranks of `group`'s members, in group-rank order.
std::vector<int> members(Comm& group, int world_rank) {
  Tensor mine = Tensor::zeros_host({1}, DType::kI32);
  mine.data<int32_t>()[0] = world_rank;
  Tensor all = Tensor::zeros_host({group.world_size()}, DType::kI32);
  group.all_gather(mine, all);
  return std::vector<int>(all.data<int32_t>(), all.data<int32_t>() + group.world_size());
}

TEST(MeshSequence, GroupsFollowDeepSpeedsLayout) {
  Comm& world = comm::world();
  const int n = world.world_size(), r = world.rank();
  for (int sp = 1; sp <= n; ++sp) {
    if (n % sp != 0) continue;
    SCOPED_TRACE("sp=" + std::to_string(sp));
    const MeshShape shape = Mesh::sequence_parallel_shape(n, sp);
    EXPECT_EQ(shape.sp, sp);
    EXPECT_EQ(shape.dp, n / sp);
    Mesh mesh(world, shape);
    EXPECT_EQ(mesh.coordinate(MeshAxis::kSequence), r % sp);
    EXPECT_EQ(mesh.coordinate(MeshAxis::kData), r / sp);
    std::vector<int> sequence, data, both;
    for (int s = 0; s < sp; ++s) sequence.push_back(r - r % sp + s);
    for (int d = 0; d < n / sp; ++d) data.push_back(d * sp + r % sp);
    for (int i = 0; i < n; ++i) both.push_back(i);
    EXPECT_EQ(members(mesh.group(MeshAxis::kSequence), r), sequence);
    EXPECT_EQ(members(mesh.group(MeshAxis::kData), r), data);
    EXPECT_EQ(members(mesh.data_sequence_group(), r), both);
    EXPECT_EQ(mesh.data_sequence_group().rank(), r);
  }
}

TEST(MeshSequence, SizeThatDoesNotDivideIsAClearError) {
  for (const int64_t sp : {int64_t{0}, int64_t{3}, int64_t{8}}) {
    try {
      Mesh::sequence_parallel_shape(4, sp);
      ADD_FAILURE() << sp << " accepted";
    } catch (const ConfigError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("sequence_parallel_size " + std::to_string(sp)), std::string::npos) << what;
      EXPECT_NE(what.find("number of ranks, 4"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace zero::comm
