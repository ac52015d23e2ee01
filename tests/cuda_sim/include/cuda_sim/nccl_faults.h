// Faults of the simulator's NCCL (tests/cuda_sim/nccl.cpp), for tests of how NcclComm copes.
#pragma once

namespace cuda_sim {

// The next collective (or send/receive) on any communicator hangs - its stream waits until the
// communicator is aborted - and the communicator reports ncclRemoteError through
// ncclCommGetAsyncError: what a real job sees when a peer rank dies mid-collective.
void nccl_fail_next_collective();

}  // namespace cuda_sim
