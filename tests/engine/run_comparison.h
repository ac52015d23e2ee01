// Comparing a training run with its oracle's (tests of the device backends): every loss within
// `tol` relative, every parameter within `tol` x (1 + |reference|), at most five parameter
// failures reported so a diverged run stays readable.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "engine/zero_harness.h"

namespace zero::engine::zero_test {

// `where` names the run in every failure (a rank, a variant).
inline void expect_run_tracks(const TrainedRun& reference, const TrainedRun& run, double tol,
                              const std::string& where) {
  ASSERT_EQ(reference.losses.size(), run.losses.size()) << where;
  for (size_t i = 0; i < reference.losses.size(); ++i) {
    EXPECT_NEAR(run.losses[i], reference.losses[i], tol * std::fabs(reference.losses[i]))
        << "loss " << i << " " << where;
  }
  ASSERT_EQ(reference.params.size(), run.params.size()) << where;
  int reported = 0;
  for (size_t i = 0; i < reference.params.size(); ++i) {
    if (std::fabs(run.params[i] - reference.params[i]) >
            tol * (1.0 + std::fabs(reference.params[i])) &&
        reported++ < 5) {
      ADD_FAILURE() << "parameter " << i << ": reference " << reference.params[i] << ", run "
                    << run.params[i] << " " << where;
    }
  }
}

}  // namespace zero::engine::zero_test
