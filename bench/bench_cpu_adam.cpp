// The offloaded CPU optimizer step (offload::CpuOptimizerStep) next to this machine's memory
// bandwidth measured in the same run, and next to the CPU backend's optimizer_update.
//   build/default/bench/bench_cpu_adam [log2_elements=26] [rounds=7] [max_threads=2]
// Bandwidth counts bytes read plus bytes written (STREAM's convention: write-allocate traffic
// is not counted), for the stream kernels and the optimizer alike. Every measurement runs once
// per round, round-robin, and reports its best round: on a shared machine all of them then see
// the same neighbours, and the ratios stay meaningful even when the absolute figures move.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "offload/cpu_optimizer.h"
#include "offload/simd_target.h"

namespace {

using namespace zero;
using backend::OptimizerKind;

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// One timed kernel: `bytes` moved per run.
struct Measurement {
  std::string group;  // "stream" or "adam"
  std::string name;
  int threads;
  double bytes;
  std::function<void()> run;
  std::string target;  // SIMD target to force ("" = automatic)
  double best = 1e30;
};

struct AdamBuffers {
  Tensor master, grads, m, v, copy;
  AdamBuffers(int64_t n, DType grad_dtype, bool with_copy) {
    master = Tensor::zeros_host({n}, DType::kF32);
    grads = Tensor::zeros_host({n}, grad_dtype);
    m = Tensor::zeros_host({n}, DType::kF32);
    v = Tensor::zeros_host({n}, DType::kF32);
    if (with_copy) copy = Tensor::zeros_host({n}, DType::kBF16);
    float* p = master.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      p[i] = 0.01f * static_cast<float>(i % 1000 - 500);
      const float g = 1e-3f * static_cast<float>(i % 777 - 388);
      if (grad_dtype == DType::kF32) {
        grads.data<float>()[i] = g;
      } else {
        grads.data<bf16>()[i] = to_bf16(g);
      }
    }
  }
  offload::CpuStepBuffers step_buffers() const { return {master, grads, {m, v}, copy}; }
};

}  // namespace

int main(int argc, char** argv) {
  const int log2_n = argc > 1 ? std::atoi(argv[1]) : 26;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const int max_threads = argc > 3 ? std::atoi(argv[3]) : 2;
  if (log2_n < 10 || log2_n > 32 || rounds < 1 || max_threads < 1) {
    std::fprintf(stderr, "usage: bench_cpu_adam [log2_elements 10..32] [rounds >= 1] [max_threads >= 1]\n");
    return 2;
  }
  const int64_t n = int64_t{1} << log2_n;
  const auto elements = static_cast<double>(n);
  std::printf("CPU: %s; SIMD target: %s (available:", cpu_model().c_str(), offload::active_simd_target().c_str());
  for (const std::string& t : offload::available_simd_targets()) std::printf(" %s", t.c_str());
  std::printf("); %lld elements; best of %d rounds\n\n", static_cast<long long>(n), rounds);

  std::vector<Measurement> all;
  // Stream kernels over f32 arrays of n elements. copy b = a and triad a = b + s c are STREAM's;
  // their stores go to lines not read before (a hidden write-allocate read). The optimizer's
  // stores (all but the small 16-bit copy) go to lines it has just read, as in add a += b.
  std::vector<float> a(static_cast<size_t>(n), 1.0f), b(static_cast<size_t>(n), 2.0f), c(static_cast<size_t>(n), 3.0f);
  float* pa = a.data();
  float* pb = b.data();
  float* pc = c.data();
  for (int t = 1; t <= max_threads; ++t) {
    all.push_back({"stream", "copy", t, 8 * elements, [=] {
#pragma omp parallel for schedule(static) num_threads(t)
                     for (int64_t i = 0; i < n; ++i) pb[i] = pa[i];
                   }, ""});
    all.push_back({"stream", "triad", t, 12 * elements, [=] {
#pragma omp parallel for schedule(static) num_threads(t)
                     for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + 0.5f * pc[i];
                   }, ""});
    all.push_back({"stream", "add", t, 12 * elements, [=] {
#pragma omp parallel for schedule(static) num_threads(t)
                     for (int64_t i = 0; i < n; ++i) pa[i] += pb[i];
                   }, ""});
  }

  backend::OptimizerHyper h;
  h.lr = 1e-4;
  h.weight_decay = 0.01;
  const backend::ParamSegment whole[] = {{0, n, true}};
  const std::span<const backend::ParamSegment> segments(whole);
  AdamBuffers mixed(n, DType::kBF16, true);
  AdamBuffers f32(n, DType::kF32, false);
  const offload::CpuStepBuffers mixed_buffers = mixed.step_buffers();
  const offload::CpuStepBuffers f32_buffers = f32.step_buffers();
  const auto mixed_bytes = static_cast<double>(offload::step_traffic_bytes(OptimizerKind::kAdam, mixed_buffers));
  const auto f32_bytes = static_cast<double>(offload::step_traffic_bytes(OptimizerKind::kAdam, f32_buffers));
  std::vector<offload::CpuOptimizerStep> steps;
  for (int t = 0; t <= max_threads; ++t) steps.emplace_back(OptimizerKind::kAdam, t);
  backend::CpuBackend cpu;
  std::vector<Tensor> f32_state = {f32.m, f32.v};
  for (int t = 1; t <= max_threads; ++t) {
    offload::CpuOptimizerStep* step = &steps[static_cast<size_t>(t)];
    all.push_back({"adam", "offload: bf16 grads (x 1/1024), f32 state, bf16 copy", t, mixed_bytes,
                   [&, step] { step->step(mixed_buffers, segments, h, 1.0 / 1024.0); }, ""});
    all.push_back({"adam", "offload: f32 grads, f32 state, no copy", t, f32_bytes,
                   [&, step] { step->step(f32_buffers, segments, h); }, ""});
    all.push_back({"adam", "CpuBackend::optimizer_update: f32 grads, f32 state", t, f32_bytes, [&, t] {
                     omp_set_num_threads(t);
                     cpu.optimizer_update(OptimizerKind::kAdam, f32.master, f32.grads, f32_state, segments, h);
                   }, ""});
  }
  // Every SIMD target on the headline configuration, at the most threads.
  for (const std::string& target : offload::available_simd_targets()) {
    offload::CpuOptimizerStep* step = &steps[static_cast<size_t>(max_threads)];
    all.push_back({"adam", "offload: bf16 grads, f32 state, bf16 copy on " + target, max_threads, mixed_bytes,
                   [&, step] { step->step(mixed_buffers, segments, h, 1.0 / 1024.0); }, target});
  }

  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up (page faults, thread pools)
    for (Measurement& m : all) {
      std::optional<offload::ScopedSimdTarget> force;
      if (!m.target.empty()) force.emplace(m.target);
      const auto t0 = std::chrono::steady_clock::now();
      m.run();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (round > 0) m.best = std::min(m.best, seconds);
      ++h.step;
    }
  }

  std::printf("| stream kernel | threads | GB/s |\n|---|---|---|\n");
  std::vector<double> best_stream(static_cast<size_t>(max_threads) + 1, 0.0);
  for (const Measurement& m : all) {
    if (m.group != "stream") continue;
    const double gbs = m.bytes / m.best / 1e9;
    best_stream[static_cast<size_t>(m.threads)] = std::max(best_stream[static_cast<size_t>(m.threads)], gbs);
    std::printf("| %s | %d | %.1f |\n", m.name.c_str(), m.threads, gbs);
  }
  std::printf("\n| Adam step | threads | ms | G params/s | B/param | GB/s | of best stream |\n"
              "|---|---|---|---|---|---|---|\n");
  for (const Measurement& m : all) {
    if (m.group != "adam") continue;
    const double gbs = m.bytes / m.best / 1e9;
    std::printf("| %s | %d | %.1f | %.2f | %.0f | %.1f | %.0f%% |\n", m.name.c_str(), m.threads, m.best * 1e3,
                elements / m.best / 1e9, m.bytes / elements, gbs,
                100.0 * gbs / best_stream[static_cast<size_t>(m.threads)]);
  }
  return 0;
}
