// The pipeline schedules against DeepSpeed's (runtime/pipe/schedule.py): full instruction
// streams written out by hand for small shapes, and for larger ones the properties any correct
// synchronous 1F1B schedule has (each micro-batch forwarded then backwarded once per stage,
// sends matching receives, the buffer bound, the 1F1B order), plus the bubble formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "pipeline/pipeline_schedule.h"
#include "pipeline/schedule_rendezvous.h"
#include "pipeline/schedule_shapes.h"

namespace zero::pipeline {
namespace {

using Kind = InstructionKind;
using Lines = std::vector<std::string>;

Lines lines_of(const std::vector<PipeStep>& steps) {
  Lines out;
  for (const PipeStep& step : steps) out.push_back(step_to_string(step));
  return out;
}

Lines train_lines(int64_t micro_batches, int64_t stages, int64_t stage) {
  return lines_of(TrainSchedule(micro_batches, stages, stage).steps());
}

// ---- Hand-written streams -------------------------------------------------------------------
// Derived by stepping DeepSpeed's TrainSchedule.steps() by hand: total steps 2 * (m + p - 1);
// _step_to_micro_batch: an even stage forwards on even steps (micro-batch step/2 - stage/2) and
// backwards on odd steps (micro-batch (step-1)/2 - p + 1 + stage/2), an odd stage the other way
// round (forward (step-1)/2 - stage/2, backward step/2 - p + (stage+1)/2); buffers
// micro-batch mod max(2, min(p - stage, m)); in a forward step SendGrad(previous step's
// micro-batch) then RecvActivation, in a backward step RecvGrad then SendActivation(previous);
// LoadMicroBatch on the first and last stage in forward steps; then the pass; the last step
// ends with ReduceTiedGrads, ReduceGrads, OptimizerStep.

const std::string kEnd = "ReduceTiedGrads(), ReduceGrads(), OptimizerStep()";

TEST(TrainSchedule, TwoStagesOneMicroBatchByHand) {
  // p = 2, m = 1: 4 steps. Stage 0 forwards mb 0 in step 0 and sends it in step 1 (its
  // backward step, micro-batch -1: nothing to compute); stage 1 receives, forwards and
  // backwards it in steps 1-2 and sends the gradient back in step 3.
  EXPECT_EQ(train_lines(1, 2, 0),
            (Lines{"[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[SendActivation(buffer_id=0)]",
                   "[]",
                   "[RecvGrad(buffer_id=0), BackwardPass(buffer_id=0), " + kEnd + "]"}));
  EXPECT_EQ(train_lines(1, 2, 1),
            (Lines{"[]",
                   "[RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), "
                   "ForwardPass(buffer_id=0)]",
                   "[BackwardPass(buffer_id=0)]",
                   "[SendGrad(buffer_id=0), " + kEnd + "]"}));
}

TEST(TrainSchedule, TwoStagesFourMicroBatchesByHand) {
  // p = 2, m = 4: 10 steps, 2 buffers on both stages. Stage 0: forwards mb 0..3 in steps
  // 0, 2, 4, 6 and backwards them in steps 3, 5, 7, 9. Stage 1: forwards in 1, 3, 5, 7 and
  // backwards in 2, 4, 6, 8.
  EXPECT_EQ(train_lines(4, 2, 0),
            (Lines{"[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[SendActivation(buffer_id=0)]",
                   "[LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[RecvGrad(buffer_id=0), SendActivation(buffer_id=1), BackwardPass(buffer_id=0)]",
                   "[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[RecvGrad(buffer_id=1), SendActivation(buffer_id=0), BackwardPass(buffer_id=1)]",
                   "[LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[RecvGrad(buffer_id=0), SendActivation(buffer_id=1), BackwardPass(buffer_id=0)]",
                   "[]",
                   "[RecvGrad(buffer_id=1), BackwardPass(buffer_id=1), " + kEnd + "]"}));
  const std::string f0 = "[RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), "
                         "ForwardPass(buffer_id=0)]";
  EXPECT_EQ(train_lines(4, 2, 1),
            (Lines{"[]", f0, "[BackwardPass(buffer_id=0)]",
                   "[SendGrad(buffer_id=0), RecvActivation(buffer_id=1), "
                   "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[BackwardPass(buffer_id=1)]",
                   "[SendGrad(buffer_id=1), RecvActivation(buffer_id=0), "
                   "LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[BackwardPass(buffer_id=0)]",
                   "[SendGrad(buffer_id=0), RecvActivation(buffer_id=1), "
                   "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[BackwardPass(buffer_id=1)]",
                   "[SendGrad(buffer_id=1), " + kEnd + "]"}));
}

TEST(TrainSchedule, FewerMicroBatchesThanStagesByHand) {
  // p = 4, m = 2: 10 steps. Stage 1 (odd): forwards on odd steps, micro-batch (step-1)/2, and
  // backwards on even steps, micro-batch step/2 - 3; 2 buffers (min(3, 2)). Its sends trail its
  // passes by one step; steps with an out-of-range micro-batch only send.
  EXPECT_EQ(train_lines(2, 4, 1),
            (Lines{"[]",
                   "[RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[SendActivation(buffer_id=0)]",
                   "[RecvActivation(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[SendActivation(buffer_id=1)]",
                   "[]",
                   "[RecvGrad(buffer_id=0), BackwardPass(buffer_id=0)]",
                   "[SendGrad(buffer_id=0)]",
                   "[RecvGrad(buffer_id=1), BackwardPass(buffer_id=1)]",
                   "[SendGrad(buffer_id=1), " + kEnd + "]"}));
  // Stage 3 (last): forward micro-batch (step-1)/2 - 1, backward step/2 - 2; it loads labels.
  EXPECT_EQ(train_lines(2, 4, 3),
            (Lines{"[]", "[]", "[]",
                   "[RecvActivation(buffer_id=0), LoadMicroBatch(buffer_id=0), "
                   "ForwardPass(buffer_id=0)]",
                   "[BackwardPass(buffer_id=0)]",
                   "[SendGrad(buffer_id=0), RecvActivation(buffer_id=1), "
                   "LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[BackwardPass(buffer_id=1)]",
                   "[SendGrad(buffer_id=1)]",
                   "[]",
                   "[" + kEnd + "]"}));
}

TEST(TrainSchedule, OneStageIsGradientAccumulationByHand) {
  // p = 1, m = 3: forward on even steps, backward on odd ones, no communication.
  EXPECT_EQ(train_lines(3, 1, 0),
            (Lines{"[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[BackwardPass(buffer_id=0)]",
                   "[LoadMicroBatch(buffer_id=1), ForwardPass(buffer_id=1)]",
                   "[BackwardPass(buffer_id=1)]",
                   "[LoadMicroBatch(buffer_id=0), ForwardPass(buffer_id=0)]",
                   "[BackwardPass(buffer_id=0), " + kEnd + "]"}));
}

TEST(TrainSchedule, BufferCountsAreDeepSpeeds) {
  // max(2, min(p - stage, m))
  EXPECT_EQ(TrainSchedule(8, 4, 0).num_pipe_buffers(), 4);
  EXPECT_EQ(TrainSchedule(8, 4, 1).num_pipe_buffers(), 3);
  EXPECT_EQ(TrainSchedule(8, 4, 3).num_pipe_buffers(), 2);
  EXPECT_EQ(TrainSchedule(2, 4, 0).num_pipe_buffers(), 2);
  EXPECT_EQ(TrainSchedule(3, 4, 0).num_pipe_buffers(), 3);
  EXPECT_EQ(InferenceSchedule(8, 4, 0).num_pipe_buffers(), 2);
}

TEST(TrainSchedule, BadShapesAreInternalErrors) {
  EXPECT_THROW(TrainSchedule(0, 2, 0), InternalError);
  EXPECT_THROW(TrainSchedule(1, 0, 0), InternalError);
  EXPECT_THROW(TrainSchedule(1, 2, 2), InternalError);
  EXPECT_THROW(InferenceSchedule(1, 2, -1), InternalError);
}

// ---- Properties of every shape --------------------------------------------------------------
// Micro-batch identities are derived from order alone (DeepSpeed's engine loads micro-batches in
// order, so the k-th forward, the k-th send, ... of a stage concern micro-batch k), not from the
// schedule's own micro_batch field; the field is then checked against them.

using schedule_test::Shape;
using schedule_test::kShapes;

std::string name_of(const Shape& shape) {
  return "p=" + std::to_string(shape.stages) + " m=" + std::to_string(shape.micro_batches);
}

// Per stage: the step of each pass of each micro-batch, and the buffers used.
struct StageTrace {
  std::vector<int64_t> forward_step, backward_step, forward_buffer, backward_buffer;
  std::string passes;  // "F" / "B" per pass, in order
};

StageTrace trace(const std::vector<PipeStep>& steps, const std::string& where) {
  StageTrace t;
  std::map<Kind, int64_t> seen;  // per kind: how many so far = the micro-batch of the next one
  for (size_t step = 0; step < steps.size(); ++step) {
    for (const PipeInstruction& op : steps[step]) {
      if (!is_buffer_op(op.kind)) continue;
      const int64_t k = seen[op.kind]++;
      EXPECT_EQ(op.micro_batch, k) << where << " step " << step << " " << op.to_string();
      if (op.kind == Kind::kForwardPass) {
        t.forward_step.push_back(static_cast<int64_t>(step));
        t.forward_buffer.push_back(op.buffer_id);
        t.passes += "F";
      } else if (op.kind == Kind::kBackwardPass) {
        t.backward_step.push_back(static_cast<int64_t>(step));
        t.backward_buffer.push_back(op.buffer_id);
        t.passes += "B";
      }
    }
  }
  return t;
}

TEST(TrainSchedule, EachMicroBatchForwardedThenBackwardedOncePerStage) {
  for (const Shape& shape : kShapes) {
    for (int64_t s = 0; s < shape.stages; ++s) {
      const TrainSchedule schedule(shape.micro_batches, shape.stages, s);
      const std::vector<PipeStep> steps = schedule.steps();
      const std::string where = name_of(shape) + " stage " + std::to_string(s);
      ASSERT_EQ(static_cast<int64_t>(steps.size()), 2 * (shape.micro_batches + shape.stages - 1))
          << where;
      const StageTrace t = trace(steps, where);
      ASSERT_EQ(static_cast<int64_t>(t.forward_step.size()), shape.micro_batches) << where;
      ASSERT_EQ(static_cast<int64_t>(t.backward_step.size()), shape.micro_batches) << where;
      for (int64_t k = 0; k < shape.micro_batches; ++k) {
        EXPECT_LT(t.forward_step[k], t.backward_step[k]) << where << " mb " << k;
        // The backward reads the activations the forward left in its buffer.
        EXPECT_EQ(t.forward_buffer[k], t.backward_buffer[k]) << where << " mb " << k;
        EXPECT_EQ(t.forward_buffer[k], k % schedule.num_pipe_buffers()) << where;
        EXPECT_EQ(t.forward_step[k], schedule.forward_step(k)) << where;
        EXPECT_EQ(t.backward_step[k], schedule.backward_step(k)) << where;
      }
    }
  }
}

TEST(TrainSchedule, ActivationsFlowForwardAndGradientsBackward) {
  for (const Shape& shape : kShapes) {
    std::vector<StageTrace> traces;
    for (int64_t s = 0; s < shape.stages; ++s) {
      traces.push_back(trace(TrainSchedule(shape.micro_batches, shape.stages, s).steps(), ""));
    }
    for (int64_t s = 0; s + 1 < shape.stages; ++s) {
      for (int64_t k = 0; k < shape.micro_batches; ++k) {
        EXPECT_GT(traces[s + 1].forward_step[k], traces[s].forward_step[k])
            << name_of(shape) << " stage " << s << " mb " << k;
        EXPECT_GT(traces[s].backward_step[k], traces[s + 1].backward_step[k])
            << name_of(shape) << " stage " << s << " mb " << k;
      }
    }
    // The last stage turns each micro-batch around at once: backward right after forward.
    const StageTrace& last = traces.back();
    for (int64_t k = 0; k < shape.micro_batches; ++k) {
      EXPECT_EQ(last.backward_step[k], last.forward_step[k] + 1) << name_of(shape) << " mb " << k;
    }
  }
}

TEST(TrainSchedule, OneForwardOneBackwardInSteadyState) {
  // A stage runs min(p - s, m) warm-up forwards, then alternates backward and forward until the
  // forwards run out, then drains the remaining backwards.
  for (const Shape& shape : kShapes) {
    for (int64_t s = 0; s < shape.stages; ++s) {
      const int64_t warmup = std::min(shape.stages - s, shape.micro_batches);
      std::string expected(static_cast<size_t>(warmup), 'F');
      for (int64_t i = warmup; i < shape.micro_batches; ++i) expected += "BF";
      expected += std::string(static_cast<size_t>(warmup), 'B');
      EXPECT_EQ(trace(TrainSchedule(shape.micro_batches, shape.stages, s).steps(), "").passes,
                expected)
          << name_of(shape) << " stage " << s;
    }
  }
}

TEST(TrainSchedule, LiveActivationsFitTheBuffers) {
  for (const Shape& shape : kShapes) {
    for (int64_t s = 0; s < shape.stages; ++s) {
      const TrainSchedule schedule(shape.micro_batches, shape.stages, s);
      std::map<int64_t, int64_t> owner;  // buffer -> micro-batch whose activations it holds
      int64_t forwards = 0, backwards = 0;
      for (const PipeStep& step : schedule.steps()) {
        for (const PipeInstruction& op : step) {
          if (op.kind == Kind::kForwardPass) {
            // Never overwrite activations a backward still needs.
            EXPECT_EQ(owner.count(op.buffer_id), 0u) << name_of(shape) << " stage " << s;
            owner[op.buffer_id] = forwards++;
          } else if (op.kind == Kind::kBackwardPass) {
            ASSERT_EQ(owner.count(op.buffer_id), 1u) << name_of(shape) << " stage " << s;
            EXPECT_EQ(owner[op.buffer_id], backwards++);
            owner.erase(op.buffer_id);
          }
          if (is_buffer_op(op.kind)) {
            EXPECT_GE(op.buffer_id, 0);
            EXPECT_LT(op.buffer_id, schedule.num_pipe_buffers());
          }
          EXPECT_LE(static_cast<int64_t>(owner.size()), schedule.num_pipe_buffers());
        }
      }
    }
  }
}

TEST(TrainSchedule, SendsMatchReceivesWithoutDeadlock) {
  for (const Shape& shape : kShapes) {
    std::vector<std::vector<PipeStep>> streams;
    for (int64_t s = 0; s < shape.stages; ++s) {
      streams.push_back(TrainSchedule(shape.micro_batches, shape.stages, s).steps());
    }
    EXPECT_TRUE(runs_without_deadlock(streams, name_of(shape)));
  }
}

TEST(TrainSchedule, OptimizerStepEndsTheLastStepOnEveryStage) {
  for (const Shape& shape : kShapes) {
    for (int64_t s = 0; s < shape.stages; ++s) {
      const std::vector<PipeStep> steps = TrainSchedule(shape.micro_batches, shape.stages, s).steps();
      for (size_t i = 0; i + 1 < steps.size(); ++i) {
        for (const PipeInstruction& op : steps[i]) EXPECT_TRUE(is_buffer_op(op.kind));
      }
      const std::string last = step_to_string(steps.back());
      EXPECT_EQ(last.substr(last.size() - kEnd.size() - 1), kEnd + "]") << name_of(shape);
      // Loads: the first stage (inputs) and the last stage (labels), once per micro-batch.
      int64_t loads = 0;
      for (const PipeStep& step : steps) {
        for (const PipeInstruction& op : step) loads += op.kind == Kind::kLoadMicroBatch;
      }
      const bool loads_data = s == 0 || s == shape.stages - 1;
      EXPECT_EQ(loads, loads_data ? shape.micro_batches : 0) << name_of(shape) << " stage " << s;
    }
  }
}

}  // namespace
}  // namespace zero::pipeline
