#include "engine/kernel_profile_step.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/check.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/writable_file.h"

namespace zero::engine {

KernelProfileStep::KernelProfileStep(const KernelProfileRequest& request,
                                     backend::ProfilingBackend* profiler, int64_t last_step,
                                     bool reports, bool prints)
    : request_(request), profiler_(profiler), reports_(reports), prints_(reports && prints) {
  if (request_.step < 0 || request_.step > last_step) {
    throw ConfigError("--profile-kernels " + std::to_string(request_.step) +
                      ": the step to profile must be between 1 and --steps (" +
                      std::to_string(last_step) + "), or 0 for none; a few steps in (e.g. 10) "
                      "leaves the warm-up out");
  }
  if (request_.step == 0) {
    if (!request_.json_path.empty()) {
      throw ConfigError("--profile-kernels-json needs --profile-kernels STEP (the step to profile)");
    }
    return;
  }
  ZERO_CHECK(profiler_ != nullptr, "a kernel profile was requested without a ProfilingBackend");
  if (reports_ && !request_.json_path.empty()) {
    if (const auto reason = io::unwritable_file_reason(request_.json_path)) {
      throw ConfigError("--profile-kernels-json: cannot write '" + request_.json_path + "': " +
                        *reason + "; give a writable file");
    }
  }
}

void KernelProfileStep::before_step(int64_t completed_steps) {
  if (request_.step == 0 || completed_steps + 1 != request_.step) return;
  // The step's wall time starts with the device idle, so it holds only this step's work.
  profiler_->synchronize();
  started_ = Clock::now();
  profiler_->start_profile();
  active_ = true;
}

void KernelProfileStep::after_step() {
  if (!active_) return;
  active_ = false;
  profiler_->synchronize();
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  profile_ = profiler_->stop_profile(request_.step, seconds);
  if (!reports_) return;
  if (prints_) {
    std::printf("%s", backend::format_kernel_profile(*profile_, request_.table_rows).c_str());
    std::fflush(stdout);
  }
  if (request_.json_path.empty()) return;
  const std::string text = backend::kernel_profile_json(*profile_) + "\n";
  const std::string& path = request_.json_path;
  io::write_file_atomically(path, [&](std::FILE* f) {
    if (std::fwrite(text.data(), 1, text.size(), f) != text.size()) {
      throw FileError(path + ": cannot write the kernel profile: " + std::strerror(errno));
    }
  });
}

void KernelProfileStep::finish() const {
  if (request_.step == 0 || !reports_ || profile_) return;
  std::fprintf(stderr,
               "zero: warning: --profile-kernels %lld: no profile was taken (this run did not "
               "train that step; was it resumed past it?)\n",
               static_cast<long long>(request_.step));
}

}  // namespace zero::engine
