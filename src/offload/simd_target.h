// Which SIMD instruction set the offloaded CPU optimizer step runs with. The kernels are compiled
// for every Highway target attainable on the build architecture (on x86: SSSE3, SSE4, AVX2,
// AVX3 = AVX-512 F/BW/DQ/VL, AVX3_DL = AVX3 plus VNNI/VBMI2/BITALG, and the scalar fallback
// "SCALAR"/"EMU128") and the best one this CPU supports is chosen at the first call.
#pragma once
#include <string>
#include <vector>

namespace zero::offload {

// The target the kernels dispatch to now, e.g. "AVX3_DL", "AVX2" or "SCALAR".
std::string active_simd_target();

// Every compiled target this CPU can run, best first.
std::vector<std::string> available_simd_targets();

// Forces the kernels onto one target (a name from available_simd_targets()) for the lifetime of
// the object, then restores the automatic choice: tests prove each target, benchmarks compare
// them. Process-wide; do not run steps on other threads meanwhile. An unknown or unsupported
// name throws UnsupportedError listing the available ones.
class ScopedSimdTarget {
 public:
  explicit ScopedSimdTarget(const std::string& name);
  ~ScopedSimdTarget();
  ScopedSimdTarget(const ScopedSimdTarget&) = delete;
  ScopedSimdTarget& operator=(const ScopedSimdTarget&) = delete;
};

}  // namespace zero::offload
