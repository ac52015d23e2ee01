// cuBLASLt is loaded when the CUDA backend first needs it, not when a process starts
// (backend/cuda/cublaslt_library.h): linked, its 540 MB cost every process ~0.16 s and ~210 MB
// of resident memory at start-up, GPU or not. Needs no GPU: loading a library does not touch one.
#include <dlfcn.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "backend/cuda/cublaslt_library.h"

namespace zero::backend::cuda {
namespace {

bool cublaslt_is_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libcublasLt") != std::string::npos) return true;
  }
  return false;
}

TEST(CublasLtLibrary, IsNotLoadedAtStartAndLoadsEveryEntryPointOnFirstUse) {
  // ctest runs each test in its own process: nothing has asked for cuBLASLt yet.
  EXPECT_FALSE(cublaslt_is_mapped()) << "libcublasLt was loaded at process start";
  const CublasLtLibrary& lib = cublaslt();
  for (const void* entry :
       {reinterpret_cast<const void*>(lib.create), reinterpret_cast<const void*>(lib.destroy),
        reinterpret_cast<const void*>(lib.status_name),
        reinterpret_cast<const void*>(lib.status_string),
        reinterpret_cast<const void*>(lib.matmul),
        reinterpret_cast<const void*>(lib.algo_get_heuristic),
        reinterpret_cast<const void*>(lib.desc_create),
        reinterpret_cast<const void*>(lib.desc_destroy),
        reinterpret_cast<const void*>(lib.desc_set_attribute),
        reinterpret_cast<const void*>(lib.preference_create),
        reinterpret_cast<const void*>(lib.preference_destroy),
        reinterpret_cast<const void*>(lib.preference_set_attribute),
        reinterpret_cast<const void*>(lib.layout_create),
        reinterpret_cast<const void*>(lib.layout_destroy)}) {
    EXPECT_NE(entry, nullptr);
  }
  EXPECT_STREQ(lib.status_name(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  // The same table on every call.
  EXPECT_EQ(&cublaslt(), &lib);
  // Where the entry points live: the toolkit's library by its soname, or (the CUDA simulator's
  // build) the simulated cuBLASLt linked into this executable.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<const void*>(lib.matmul), &info), 0);
  const std::string object = info.dli_fname != nullptr ? info.dli_fname : "";
  if (object.find("libcublasLt") != std::string::npos) {
    EXPECT_NE(object.find(cublaslt_soname()), std::string::npos) << object;
    EXPECT_TRUE(cublaslt_is_mapped());
  } else {
    EXPECT_FALSE(cublaslt_is_mapped()) << "the simulator's build loaded the real library";
  }
}

}  // namespace
}  // namespace zero::backend::cuda
