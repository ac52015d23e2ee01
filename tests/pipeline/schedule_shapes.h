// The (stages, micro-batches) shapes on which the train and inference schedule tests check
// every property; one copy, as the folder's tests are compiled as one unit.
#pragma once
#include <cstdint>

namespace zero::pipeline::schedule_test {

struct Shape {
  int64_t stages;
  int64_t micro_batches;
};

inline constexpr Shape kShapes[] = {{2, 1}, {2, 4}, {4, 2}, {4, 8}, {3, 5}, {1, 3}};

}  // namespace zero::pipeline::schedule_test
