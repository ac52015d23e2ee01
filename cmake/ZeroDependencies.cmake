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
