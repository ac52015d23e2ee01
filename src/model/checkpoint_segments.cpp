#include "model/checkpoint_segments.h"

#include "core/check.h"

namespace zero::model {

std::vector<CheckpointSegment> plan_checkpoint_segments(const std::vector<bool>& chosen,
                                                        int64_t units_per_segment) {
  ZERO_CHECK(units_per_segment >= 1,
             "checkpoint segments need at least one unit each, got " << units_per_segment);
  const auto length = static_cast<size_t>(units_per_segment);
  std::vector<CheckpointSegment> segments;
  bool open = false;  // the last segment can still take the next unit
  for (size_t u = 0; u < chosen.size(); ++u) {
    if (!chosen[u]) {
      open = false;
      continue;
    }
    if (open && segments.back().last + 1 == u && u - segments.back().first < length) {
      segments.back().last = u;
    } else {
      segments.push_back({u, u});
      open = true;
    }
  }
  return segments;
}

}  // namespace zero::model
