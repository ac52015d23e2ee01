// Target reporting and forcing for the offload kernels. Compiled per target like the kernels (the
// same HWY_COMPILE_ALL_ATTAINABLE set), so HWY_DYNAMIC_DISPATCH here picks exactly the target
// the kernels' dispatch picks: both read Highway's one process-wide choice.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "offload/simd_target.cpp"
#include "hwy/foreach_target.h"  // must come before highway.h

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace zero::offload {
namespace HWY_NAMESPACE {

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace zero::offload
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cstdint>

#include "core/error.h"
#include "offload/simd_target.h"

namespace zero::offload {

HWY_EXPORT(TargetName);

std::string active_simd_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

std::vector<std::string> available_simd_targets() {
  std::vector<std::string> names;
  // Highway lists targets with the best one in the lowest bit.
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) names.emplace_back(hwy::TargetName(target));
  return names;
}

ScopedSimdTarget::ScopedSimdTarget(const std::string& name) {
  std::string known;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (name == hwy::TargetName(target)) {
      hwy::SetSupportedTargetsForTest(target);
      return;
    }
    known += (known.empty() ? "" : ", ") + std::string(hwy::TargetName(target));
  }
  throw UnsupportedError("SIMD target \"" + name + "\" is not compiled in or not supported by this CPU; "
                         "available: " + known);
}

ScopedSimdTarget::~ScopedSimdTarget() { hwy::SetSupportedTargetsForTest(0); }

}  // namespace zero::offload
#endif  // HWY_ONCE
