# Sourced by scripts/build.sh and scripts/test.sh: zero_launcher_args holds the CMake arguments
# that compile C++ through ccache where it is installed, else nothing.
#
# ccache's preprocessor mode hashes the preprocessed source and the flags that are not
# preprocessor flags, so the default and cuda-sim presets share every library object whose
# source does not include a CUDA header. ZERO_CCACHE=0 compiles without it.
#
# The libraries are unity builds (ZERO_UNITY_BUILD): their batch files are generated in each
# build folder, so the two presets compile the same text from different paths. CCACHE_BASEDIR
# (the checkout) makes ccache rewrite absolute paths below it into paths relative to the build
# folder - the same in build/default and build/cuda-sim - before it hashes. It rides in the
# launcher itself, so a later plain `ninja` in either folder shares the same way.
zero_launcher_args=()
if [ "${ZERO_CCACHE:-1}" != 0 ] && command -v ccache >/dev/null 2>&1; then
  zero_launcher_args=("-DCMAKE_CXX_COMPILER_LAUNCHER=env;CCACHE_BASEDIR=$(pwd -P);ccache")
fi
