// A temporary folder that every rank of an MPI test job names alike: `name` + "_" + rank 0's
// process id, which one all-reduce spreads (collective: every rank calls it, in the same order).
// Concurrent jobs (ctest -j) get different folders; the caller creates and removes it.
#pragma once
#include <unistd.h>

#include <filesystem>
#include <string>

#include "comm/comm.h"

namespace zero::testing {

inline std::filesystem::path job_directory(comm::Comm& world, const std::string& name) {
  const long job = static_cast<long>(world.all_reduce_scalar(
      world.rank() == 0 ? static_cast<double>(::getpid()) : 0.0, comm::ReduceOp::kMax));
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(job));
}

}  // namespace zero::testing
