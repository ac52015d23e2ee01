// Which GPU a rank of a multi-process job trains on, and whether the job can use NCCL: pure
// functions of what each rank sees, so every rank reaches the same answer from the same
// all-gathered facts (tools/train_device.cpp gathers them).
#pragma once
#include <cstdint>
#include <vector>

namespace zero::comm {

// The device index this rank would own: 0 when it sees exactly one GPU (a launcher that gives
// each rank its own CUDA_VISIBLE_DEVICES, as Slurm's --gpus-per-task), else its local rank on the
// node. -1 when that index is not visible (more ranks on the node than GPUs, or none).
int candidate_gpu(int local_rank, int visible_gpus);

// Whether NCCL can run the job: every rank has a GPU (a non-zero UUID hash; 0 means none or
// unknown) and no two ranks have the same physical one (NCCL refuses duplicate devices).
bool every_rank_has_its_own_gpu(const std::vector<uint64_t>& gpu_uuid_hashes);

}  // namespace zero::comm
