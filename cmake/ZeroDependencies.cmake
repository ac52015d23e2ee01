# Every dependency comes from Debian packages installed by scripts/bootstrap.sh.
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3.10 REQUIRED)
# zlib compresses `zero plot`'s PNG output (zlib1g-dev).
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
# The Hugging Face tokenizer (src/data/tokenizer): PCRE2 runs the split regexes (Unicode
# classes, JIT; libpcre2-dev), utf8proc the NFC/NFKC normalizers (libutf8proc-dev).
pkg_check_modules(ZERO_PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
pkg_check_modules(ZERO_UTF8PROC REQUIRED IMPORTED_TARGET GLOBAL libutf8proc)
# Highway (libhwy-dev): SIMD with runtime dispatch for the offloaded CPU optimizer step (src/offload).
find_package(hwy REQUIRED)
# liburing (liburing-dev): io_uring for the NVMe swap of ZeRO-Infinity (src/offload/aio_engine).
pkg_check_modules(ZERO_LIBURING REQUIRED IMPORTED_TARGET GLOBAL liburing)
# OpenBLAS: prefer the OpenMP build so BLAS threads and our OpenMP threads share one pool.
# Look in Debian's openblas-openmp folder first: the plain libopenblas.so is an alternatives link
# that may point at the pthread build.
find_library(ZERO_OPENBLAS_LIBRARY NAMES openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
find_library(ZERO_OPENBLAS_LIBRARY NAMES openblaso openblas REQUIRED)
find_path(ZERO_CBLAS_INCLUDE_DIR NAMES cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
        /usr/include/openblas REQUIRED)
add_library(zero_openblas INTERFACE)
target_link_libraries(zero_openblas INTERFACE ${ZERO_OPENBLAS_LIBRARY})
target_include_directories(zero_openblas INTERFACE ${ZERO_CBLAS_INCLUDE_DIR})
# MPI (OpenMPI from Debian): multi-process data parallelism. Optional so the library still
# builds where it is missing; `mpirun zero ...` then fails with a clear message.
option(ZERO_MPI "Build the MPI communicator (OFF: single process only)" ON)
if(ZERO_MPI)
  find_package(MPI COMPONENTS CXX)
endif()
set(ZERO_HAVE_MPI ${MPI_CXX_FOUND})
# CUDA (the GPU backend, src/backend/cuda). ZERO_CUDA=AUTO compiles it wherever a CUDA compiler
# and toolkit are found (CI has CUDA 13 and no GPU: the kernels are compiled on every run and
# their tests skip), ON requires it, OFF leaves it out. Hopper (sm_90) only: the target is an
# H100, and every extra architecture multiplies nvcc's time on CI's 2 cores.
# SIM builds the backend with the host compiler against the CUDA simulator (tests/cuda_sim):
# the kernels run on the CPU and the `cuda` tests execute without a GPU (only the toolkit's
# headers are needed, no nvcc).
set(ZERO_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when CUDA is found), ON, OFF or SIM")
set_property(CACHE ZERO_CUDA PROPERTY STRINGS AUTO ON OFF SIM)
set(ZERO_HAVE_CUDA OFF)
set(ZERO_CUDA_SIM OFF)
if(ZERO_CUDA STREQUAL "SIM")
  find_package(CUDAToolkit REQUIRED)
  set(ZERO_HAVE_CUDA ON)
  set(ZERO_CUDA_SIM ON)
  message(STATUS "CUDA backend: simulated on the CPU (ZERO_CUDA=SIM, CUDA ${CUDAToolkit_VERSION} headers)")
elseif(NOT ZERO_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE)
    # nvcc need not be on PATH: take the toolkit's own.
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 flag; the project's C++20 standard applies to CUDA too.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(ZERO_HAVE_CUDA ON)
    message(STATUS "CUDA backend: on (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(ZERO_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZERO_CUDA=ON but no CUDA compiler and toolkit were found; install the CUDA "
                        "toolkit (nvcc, cuBLASLt), point CUDAToolkit_ROOT at it, or use -DZERO_CUDA=OFF")
  else()
    message(STATUS "CUDA backend: off (no CUDA compiler and toolkit found; -DZERO_CUDA=ON to require it)")
  endif()
else()
  message(STATUS "CUDA backend: off (ZERO_CUDA=OFF)")
endif()
