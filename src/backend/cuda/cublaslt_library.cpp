#include "backend/cuda/cublaslt_library.h"

#include <string>

#include "core/error.h"

#if !defined(ZERO_CUBLASLT_LINKED)
#include <dlfcn.h>
#endif

namespace zero::backend::cuda {
namespace {

#define ZERO_CUBLASLT_STRINGIFY_INNER(x) #x
#define ZERO_CUBLASLT_STRINGIFY(x) ZERO_CUBLASLT_STRINGIFY_INNER(x)

#if defined(ZERO_CUBLASLT_LINKED)

CublasLtLibrary load() {
  CublasLtLibrary lib;
  lib.create = &::cublasLtCreate;
  lib.destroy = &::cublasLtDestroy;
  lib.status_name = &::cublasLtGetStatusName;
  lib.status_string = &::cublasLtGetStatusString;
  lib.matmul = &::cublasLtMatmul;
  lib.algo_get_heuristic = &::cublasLtMatmulAlgoGetHeuristic;
  lib.desc_create = &::cublasLtMatmulDescCreate;
  lib.desc_destroy = &::cublasLtMatmulDescDestroy;
  lib.desc_set_attribute = &::cublasLtMatmulDescSetAttribute;
  lib.preference_create = &::cublasLtMatmulPreferenceCreate;
  lib.preference_destroy = &::cublasLtMatmulPreferenceDestroy;
  lib.preference_set_attribute = &::cublasLtMatmulPreferenceSetAttribute;
  lib.layout_create = &::cublasLtMatrixLayoutCreate;
  lib.layout_destroy = &::cublasLtMatrixLayoutDestroy;
  return lib;
}

#else

std::string loader_message() {
  const char* message = dlerror();
  return message != nullptr ? message : "no message from the loader";
}

// Resolves `name` into `slot` (typed as the header declares it).
template <typename Fn>
void resolve(void* handle, const char* name, Fn& slot) {
  dlerror();  // clear an older message
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    throw Error(std::string("the CUDA backend: ") + cublaslt_soname() + " has no " + name + " (" +
                loader_message() + "); it must be the cuBLASLt of CUDA " +
                ZERO_CUBLASLT_STRINGIFY(CUBLAS_VER_MAJOR) + ", the toolkit zero was built with");
  }
  slot = reinterpret_cast<Fn>(symbol);
}

CublasLtLibrary load() {
  // RTLD_LOCAL: nothing else in the process binds to it by accident; never closed (its handles
  // and plans live as long as the backends that made them).
  void* handle = dlopen(cublaslt_soname(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    throw Error(std::string("the CUDA backend needs cuBLASLt, and ") + cublaslt_soname() +
                " could not be loaded (" + loader_message() +
                "): install the CUDA toolkit's cuBLAS, or add the folder that holds it to "
                "LD_LIBRARY_PATH");
  }
  CublasLtLibrary lib;
  resolve(handle, "cublasLtCreate", lib.create);
  resolve(handle, "cublasLtDestroy", lib.destroy);
  resolve(handle, "cublasLtGetStatusName", lib.status_name);
  resolve(handle, "cublasLtGetStatusString", lib.status_string);
  resolve(handle, "cublasLtMatmul", lib.matmul);
  resolve(handle, "cublasLtMatmulAlgoGetHeuristic", lib.algo_get_heuristic);
  resolve(handle, "cublasLtMatmulDescCreate", lib.desc_create);
  resolve(handle, "cublasLtMatmulDescDestroy", lib.desc_destroy);
  resolve(handle, "cublasLtMatmulDescSetAttribute", lib.desc_set_attribute);
  resolve(handle, "cublasLtMatmulPreferenceCreate", lib.preference_create);
  resolve(handle, "cublasLtMatmulPreferenceDestroy", lib.preference_destroy);
  resolve(handle, "cublasLtMatmulPreferenceSetAttribute", lib.preference_set_attribute);
  resolve(handle, "cublasLtMatrixLayoutCreate", lib.layout_create);
  resolve(handle, "cublasLtMatrixLayoutDestroy", lib.layout_destroy);
  return lib;
}

#endif

}  // namespace

const char* cublaslt_soname() {
  return "libcublasLt.so." ZERO_CUBLASLT_STRINGIFY(CUBLAS_VER_MAJOR);
}

const CublasLtLibrary& cublaslt() {
  // A failed load throws out of the initialiser, so the next call tries (and throws) again.
  static const CublasLtLibrary library = load();
  return library;
}

}  // namespace zero::backend::cuda
