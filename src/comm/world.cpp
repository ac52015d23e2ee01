#include "comm/world.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "comm/self_comm.h"
#include "core/error.h"

#ifdef ZERO_HAVE_MPI
#include <mpi.h>

#include "comm/mpi_comm.h"
#endif

namespace zero::comm {
namespace {

std::unique_ptr<Comm>& world_slot() {
  static std::unique_ptr<Comm> slot;
  return slot;
}

#ifdef ZERO_HAVE_MPI
bool mpi_active = false;  // MPI_Init ran here, so MPI_Finalize is ours to call
#endif

long env_long(const char* name, long fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  return std::strtol(value, nullptr, 10);
}

}  // namespace

bool launched_by_mpi() {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr) return true;
  if (std::getenv("PMI_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr) return true;
  return std::getenv("SLURM_PROCID") != nullptr && env_long("SLURM_NTASKS", 1) > 1;
}

WorldScope::WorldScope() {
  if (!launched_by_mpi()) return;
#ifdef ZERO_HAVE_MPI
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    throw Error("MPI_Init_thread failed; check the MPI installation and the launcher");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    throw Error("the MPI library provides thread level " + std::to_string(provided) +
                ", zero.cpp needs MPI_THREAD_SERIALIZED (" + std::to_string(MPI_THREAD_SERIALIZED) + ")");
  }
  mpi_active = true;
  world_slot() = MpiComm::world(std::make_shared<CommExecutor>());
#else
  throw Error("this process was started by an MPI launcher, but zero.cpp was built without MPI; "
              "install libopenmpi-dev (scripts/bootstrap.sh) and rebuild with -DZERO_MPI=ON");
#endif
}

WorldScope::~WorldScope() {
  world_slot().reset();  // stops the communication thread before MPI goes away
#ifdef ZERO_HAVE_MPI
  if (mpi_active) {
    MPI_Finalize();
    mpi_active = false;
  }
#endif
}

Comm& world() {
  auto& slot = world_slot();
  if (!slot) slot = std::make_unique<SelfComm>();
  return *slot;
}

}  // namespace zero::comm
