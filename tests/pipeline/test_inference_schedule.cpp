// DeepSpeed's InferenceSchedule (forward only) and the pipeline bubble of both schedules.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/pipeline_schedule.h"
#include "pipeline/schedule_rendezvous.h"
#include "pipeline/schedule_shapes.h"

namespace zero::pipeline {
namespace {

using Kind = InstructionKind;
using Lines = std::vector<std::string>;

Lines inference_lines(int64_t micro_batches, int64_t stages, int64_t stage) {
  Lines out;
  for (const PipeStep& step : InferenceSchedule(micro_batches, stages, stage).steps()) {
    out.push_back(step_to_string(step));
  }
  return out;
}

TEST(InferenceSchedule, TwoStagesTwoMicroBatchesByHand) {
  // Stepping DeepSpeed's InferenceSchedule.steps() by hand: m + p - 1 = 3 steps, micro-batch
  // step - stage; an even stage receives into buffer step % 2 and sends from (step + 1) % 2, an
  // odd stage the other way round; LoadMicroBatch (first and last stage) comes first, then an
  // even stage sends before it receives and an odd one receives before it sends, then the
  // forward pass on the receive buffer.
  EXPECT_EQ(inference_lines(2, 2, 0),
            (Lines{"[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[LoadMicroBatch(buffer_id=1), SendActivation(buffer_id=0), "
                   "ForwardPass(buffer_id=1)]",
                   "[SendActivation(buffer_id=1)]"}));
  EXPECT_EQ(inference_lines(2, 2, 1),
            (Lines{"[]",
                   "[LoadMicroBatch(buffer_id=0), RecvActivation(buffer_id=0), "
                   "ForwardPass(buffer_id=0)]",
                   "[LoadMicroBatch(buffer_id=1), RecvActivation(buffer_id=1), "
                   "ForwardPass(buffer_id=1)]"}));
}

TEST(InferenceSchedule, ThreeStagesMiddleStageByHand) {
  // Stage 1 of 3 (odd: receive before send), m = 2: 4 steps.
  EXPECT_EQ(inference_lines(2, 3, 1),
            (Lines{"[]",
                   "[RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[RecvActivation(buffer_id=1), SendActivation(buffer_id=0), "
                   "ForwardPass(buffer_id=1)]",
                   "[SendActivation(buffer_id=1)]"}));
}

using schedule_test::Shape;
using schedule_test::kShapes;

TEST(InferenceSchedule, EachMicroBatchForwardedOnceAndHandedOn) {
  for (const Shape& shape : kShapes) {
    std::vector<std::vector<PipeStep>> streams;
    for (int64_t s = 0; s < shape.stages; ++s) {
      const InferenceSchedule schedule(shape.micro_batches, shape.stages, s);
      streams.push_back(schedule.steps());
      const std::vector<PipeStep>& steps = streams.back();
      ASSERT_EQ(static_cast<int64_t>(steps.size()), shape.micro_batches + shape.stages - 1);
      std::vector<int64_t> forward_buffer(steps.size(), -1);  // per step; -1: no forward
      int64_t forwards = 0;
      for (size_t t = 0; t < steps.size(); ++t) {
        for (const PipeInstruction& op : steps[t]) {
          EXPECT_NE(op.kind, Kind::kBackwardPass);
          if (op.kind == Kind::kForwardPass) {
            // Stage s forwards micro-batch k in step k + s.
            EXPECT_EQ(static_cast<int64_t>(t), forwards++ + s);
            forward_buffer[t] = op.buffer_id;
          }
          if (op.kind == Kind::kSendActivation) {
            // It sends the output of the micro-batch it forwarded in the step before.
            ASSERT_GT(t, 0u);
            EXPECT_EQ(op.buffer_id, forward_buffer[t - 1]);
          }
        }
      }
      EXPECT_EQ(forwards, shape.micro_batches);
    }
    EXPECT_TRUE(runs_without_deadlock(streams, "inference p=" + std::to_string(shape.stages)));
  }
}

// ---- Bubble ---------------------------------------------------------------------------------
// Counted in steps, the idle fraction of 1F1B is exactly (p - 1) / (m + p - 1) on every stage:
// each stage computes in 2m of its 2(m + p - 1) steps (one pass per step, each micro-batch
// forwarded and backwarded once), so 2(p - 1) steps are idle. In wall time the formula is an
// approximation: a backward costs about twice a forward, and stages wait for neighbours rather
// than for global step barriers.

TEST(PipelineBubble, TrainScheduleIdleFractionIsTheClosedForm) {
  for (const int64_t p : {1, 2, 3, 4}) {
    for (int64_t m = 1; m <= 16; ++m) {
      const double expected = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_DOUBLE_EQ(bubble_fraction(TrainSchedule(m, p, s).steps()), expected)
            << "p=" << p << " m=" << m << " stage " << s;
      }
    }
  }
}

TEST(PipelineBubble, InferenceScheduleIdleFractionIsTheClosedForm) {
  for (const int64_t p : {2, 4}) {
    for (int64_t m = 1; m <= 16; ++m) {
      const double expected = static_cast<double>(p - 1) / static_cast<double>(m + p - 1);
      for (int64_t s = 0; s < p; ++s) {
        EXPECT_DOUBLE_EQ(bubble_fraction(InferenceSchedule(m, p, s).steps()), expected);
      }
    }
  }
}

TEST(PipelineBubble, CountsStepsWithoutAPass) {
  const PipeInstruction forward{Kind::kForwardPass, 0, 0};
  const PipeInstruction send{Kind::kSendActivation, 0, 0};
  EXPECT_DOUBLE_EQ(bubble_fraction({{forward}, {send}, {}, {send, forward}}), 0.5);
  EXPECT_DOUBLE_EQ(bubble_fraction({}), 0.0);
}

}  // namespace
}  // namespace zero::pipeline
