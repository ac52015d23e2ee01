// 1-bit Adam's error-feedback buffers in checkpoints. Each rank's worker and server errors are
// its own (they hold what its compressions lost), so each rank writes
//   onebit_errors_<rank>_of_<world>.safetensors   "worker_error", "server_error" (f32, 1-D)
// beside the stage-0 files, once the compressed stage has started. Loading at the same world
// size restores them, so a resumed run continues bit for bit; at another world size the layout
// differs and the errors restart at zero, as DeepSpeed's always do (with a warning on rank 0).
#pragma once
#include <string>

#include "backend/backend.h"
#include "comm/comm.h"
#include "optim/optimizer.h"

namespace zero::engine {

// Writes this rank's file into `staging` when the optimizer has compressed (a no-op otherwise).
void save_onebit_errors(optim::Optimizer& optimizer, comm::Comm& comm, const std::string& staging);

// Hands the optimizer this rank's errors from checkpoint `folder` (or none, when the
// checkpoint has none for this world size). `segments` are the optimizer's update segments,
// to check the buffers' sizes before anything changes. FileError when the checkpoint has files
// for this world size but not this rank's, or one of the wrong size.
void load_onebit_errors(optim::Optimizer& optimizer, comm::Comm& comm, const std::string& folder,
                        std::span<const backend::ParamSegment> segments);

}  // namespace zero::engine
