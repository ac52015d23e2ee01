#include "backend/profiling/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include <nlohmann/json.hpp>

namespace zero::backend {

void add_kernel_call(std::vector<KernelRecord>& rows, const std::string& op,
                     const std::string& shape, const std::string& dtype, double seconds,
                     double flops) {
  auto row = std::find_if(rows.begin(), rows.end(), [&](const KernelRecord& r) {
    return r.op == op && r.shape == shape && r.dtype == dtype;
  });
  if (row == rows.end()) {
    rows.push_back(KernelRecord{op, shape, dtype, 0, 0.0, 0.0});
    row = rows.end() - 1;
  }
  ++row->calls;
  row->seconds += seconds;
  row->flops += flops;
}

void finish_kernel_profile(KernelProfile& profile) {
  std::sort(profile.records.begin(), profile.records.end(),
            [](const KernelRecord& a, const KernelRecord& b) {
              if (a.seconds != b.seconds) return a.seconds > b.seconds;
              return std::tie(a.op, a.shape, a.dtype) < std::tie(b.op, b.shape, b.dtype);
            });
  profile.kernel_seconds = 0.0;
  for (const KernelRecord& r : profile.records) profile.kernel_seconds += r.seconds;
}

namespace {

std::string printf_string(const char* format, auto... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string out(static_cast<size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, format, args...);
  return out;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

std::string tflops_text(double flops, double seconds) {
  if (flops <= 0 || seconds <= 0) return "-";
  return printf_string("%.2f", flops / seconds / 1e12);
}

}  // namespace

std::string format_kernel_profile(const KernelProfile& profile, size_t max_rows) {
  std::string out = printf_string(
      "kernel profile of step %lld on %s: %zu kinds of call, %.3f ms of kernels in a %.3f ms step\n",
      static_cast<long long>(profile.step), profile.device.c_str(), profile.records.size(),
      1e3 * profile.kernel_seconds, 1e3 * profile.step_seconds);
  out += printf_string("%4s  %-33s %-44s %-5s %6s %10s %7s %8s\n", "#", "op", "shape", "dtype",
                       "calls", "ms", "% step", "TFLOP/s");
  const size_t shown = max_rows == 0 ? profile.records.size()
                                     : std::min(max_rows, profile.records.size());
  for (size_t i = 0; i < shown; ++i) {
    const KernelRecord& r = profile.records[i];
    out += printf_string("%4zu  %-33s %-44s %-5s %6lld %10.3f %6.1f%% %8s\n", i + 1, r.op.c_str(),
                         r.shape.c_str(), r.dtype.c_str(), static_cast<long long>(r.calls),
                         1e3 * r.seconds, percent(r.seconds, profile.step_seconds),
                         tflops_text(r.flops, r.seconds).c_str());
  }
  if (shown < profile.records.size()) {
    double seconds = 0.0;
    int64_t calls = 0;
    for (size_t i = shown; i < profile.records.size(); ++i) {
      seconds += profile.records[i].seconds;
      calls += profile.records[i].calls;
    }
    const std::string rest = printf_string("(%zu more kinds, %lld calls)",
                                           profile.records.size() - shown,
                                           static_cast<long long>(calls));
    out += printf_string("      %-91s %10.3f %6.1f%%\n", rest.c_str(),
                         1e3 * seconds, percent(seconds, profile.step_seconds));
  }
  double flops = 0.0;
  for (const KernelRecord& r : profile.records) flops += r.flops;
  out += printf_string(
      "kernels %.3f ms = %.1f%% of the step (the rest is host work, waits and launch gaps); "
      "matrix products %.3f TFLOP, %s TFLOP/s over the kernel time\n",
      1e3 * profile.kernel_seconds, percent(profile.kernel_seconds, profile.step_seconds),
      flops / 1e12, tflops_text(flops, profile.kernel_seconds).c_str());
  return out;
}

std::string kernel_profile_json(const KernelProfile& profile) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelRecord& r : profile.records) {
    kernels.push_back({{"op", r.op},
                       {"shape", r.shape},
                       {"dtype", r.dtype},
                       {"calls", r.calls},
                       {"seconds", r.seconds},
                       {"flops", r.flops}});
  }
  const nlohmann::json out = {{"device", profile.device},
                              {"step", profile.step},
                              {"step_seconds", profile.step_seconds},
                              {"kernel_seconds", profile.kernel_seconds},
                              {"kernels", kernels}};
  return out.dump(1);
}

}  // namespace zero::backend
