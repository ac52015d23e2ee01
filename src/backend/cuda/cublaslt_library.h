// cuBLASLt, loaded when the CUDA backend first needs it rather than when a process starts.
//
// Why: libcublasLt is 540 MB, and a process linked against it pays ~0.16 s and ~210 MB of
// resident memory at start-up for its relocations, whether or not it ever touches a GPU. Every
// `zero` command on a CPU machine and every test process of a CUDA-enabled build paid that
// (1,200 test processes: minutes of CI). Now only a CudaBackend's first product loads it
// (dlopen of the toolkit's soname, libcublasLt.so.<major>, through the usual search: the
// executable's runpath, LD_LIBRARY_PATH, the loader's cache).
//
// The CUDA simulator's build (ZERO_CUBLASLT_LINKED) calls its linked cuBLASLt instead.
#pragma once
#include <cublasLt.h>

namespace zero::backend::cuda {

// The cuBLASLt entry points the backend calls, with cuBLASLt's own signatures.
struct CublasLtLibrary {
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtGetStatusName) status_name = nullptr;
  decltype(&::cublasLtGetStatusString) status_string = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set_attribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
};

// The loaded library, every entry point resolved; loaded on the first call (thread-safe) and
// kept for the process's life. Throws zero::Error naming the library, the loader's message and
// the fix when it cannot be loaded or lacks an entry point; later calls throw the same again.
const CublasLtLibrary& cublaslt();

// The file name cublaslt() loads: the soname of the toolkit zero was built with.
const char* cublaslt_soname();

}  // namespace zero::backend::cuda
