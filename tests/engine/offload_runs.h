// The llama runs test_{optimizer,param,partial}_offload.cpp compare, kept once for the unity build.
#pragma once
#include <cstdint>
#include <functional>

#include "engine/zero_harness.h"

namespace zero::engine::offload_runs {

constexpr int64_t kSeqLen = 8;

inline std::function<model::Batch()> batches(int64_t step) {
  return zero_test::step_batches(step, 2, kSeqLen, 41);
}

using Result = zero_test::TrainedRun;

inline Result train(backend::Backend& backend, const EngineSettings& settings, int steps) {
  return zero_test::train_one_rank(zero_test::small_model("llama", backend), settings, steps,
                                   kSeqLen);
}

}  // namespace zero::engine::offload_runs
