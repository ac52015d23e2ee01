#include "comm/gpu_assignment.h"

#include <unordered_set>

namespace zero::comm {

int candidate_gpu(int local_rank, int visible_gpus) {
  if (visible_gpus <= 0 || local_rank < 0) return -1;
  if (visible_gpus == 1) return 0;
  return local_rank < visible_gpus ? local_rank : -1;
}

bool every_rank_has_its_own_gpu(const std::vector<uint64_t>& gpu_uuid_hashes) {
  std::unordered_set<uint64_t> seen;
  for (uint64_t gpu : gpu_uuid_hashes) {
    if (gpu == 0 || !seen.insert(gpu).second) return false;
  }
  return true;
}

}  // namespace zero::comm
