// The emission order inside a step follows DeepSpeed's schedule.py exactly, because stages pair
// their blocking sends and receives in that order:
//   train, forward step:  SendGrad(previous micro-batch), RecvActivation, LoadMicroBatch, ForwardPass
//   train, backward step: RecvGrad, SendActivation(previous micro-batch), BackwardPass
//   inference:            LoadMicroBatch, then Send before Recv on even stages and Recv before
//                         Send on odd ones, then ForwardPass
// "previous micro-batch" is the one the stage handled in the step before (a forward step is
// preceded by a backward step and vice versa).
// DeepSpeed before 2023 (issue #2800) received before sending in both step kinds and kept one
// more buffer (min(p - s + 1, m)); a receive could then overwrite a buffer whose gradient was
// not sent yet. The order and count here are those of DeepSpeed since that fix (0.19 included).
#include "pipeline/pipeline_schedule.h"

#include <algorithm>

#include "core/check.h"

namespace zero::pipeline {
namespace {

PipeInstruction buffer_op(InstructionKind kind, int64_t buffer, int64_t micro_batch) {
  return PipeInstruction{kind, buffer, micro_batch};
}

PipeInstruction plain_op(InstructionKind kind) { return PipeInstruction{kind, -1, -1}; }

}  // namespace

PipeSchedule::PipeSchedule(int64_t micro_batches, int64_t stages, int64_t stage_id)
    : micro_batches_(micro_batches), stages_(stages), stage_id_(stage_id) {
  ZERO_CHECK(micro_batches >= 1, "a pipeline schedule needs at least one micro-batch, got "
                                     << micro_batches);
  ZERO_CHECK(stages >= 1, "a pipeline schedule needs at least one stage, got " << stages);
  ZERO_CHECK(stage_id >= 0 && stage_id < stages,
             "pipeline stage id " << stage_id << " is outside 0.." << stages - 1);
}

int64_t TrainSchedule::num_pipe_buffers() const {
  return std::max<int64_t>(2, std::min(stages() - stage_id(), micro_batches()));
}

std::vector<PipeStep> TrainSchedule::steps() const {
  const int64_t s = stage_id();
  const int64_t p = stages();
  std::vector<PipeStep> out;
  out.reserve(static_cast<size_t>(total_steps()));
  int64_t previous = -1;  // the micro-batch of the step before (may be out of range)
  for (int64_t step = 0; step < total_steps(); ++step) {
    // Forward steps have the parity of the stage id (step 2k + s), backward steps the other one
    // (step 2k + 2p - 1 - s); both divisions are exact.
    const bool forward = (step - s) % 2 == 0;
    const int64_t current = forward ? (step - s) / 2 : (step - (2 * p - 1 - s)) / 2;
    const bool current_valid = valid_micro_batch(current);
    const bool previous_valid = valid_micro_batch(previous);
    PipeStep cmds;
    if (forward) {
      if (previous_valid && has_previous_stage()) {
        cmds.push_back(buffer_op(InstructionKind::kSendGrad, buffer_of(previous), previous));
      }
      if (current_valid && has_previous_stage()) {
        cmds.push_back(buffer_op(InstructionKind::kRecvActivation, buffer_of(current), current));
      }
    } else {
      if (current_valid && has_next_stage()) {
        cmds.push_back(buffer_op(InstructionKind::kRecvGrad, buffer_of(current), current));
      }
      if (previous_valid && has_next_stage()) {
        cmds.push_back(buffer_op(InstructionKind::kSendActivation, buffer_of(previous), previous));
      }
    }
    // The first stage loads inputs, the last stage labels.
    if ((is_first_stage() || is_last_stage()) && forward && current_valid) {
      cmds.push_back(buffer_op(InstructionKind::kLoadMicroBatch, buffer_of(current), current));
    }
    if (current_valid) {
      cmds.push_back(buffer_op(forward ? InstructionKind::kForwardPass
                                       : InstructionKind::kBackwardPass,
                               buffer_of(current), current));
    }
    if (step == total_steps() - 1) {
      cmds.push_back(plain_op(InstructionKind::kReduceTiedGrads));
      cmds.push_back(plain_op(InstructionKind::kReduceGrads));
      cmds.push_back(plain_op(InstructionKind::kOptimizerStep));
    }
    previous = current;
    out.push_back(std::move(cmds));
  }
  return out;
}

std::vector<PipeStep> InferenceSchedule::steps() const {
  const int64_t s = stage_id();
  std::vector<PipeStep> out;
  out.reserve(static_cast<size_t>(total_steps()));
  for (int64_t step = 0; step < total_steps(); ++step) {
    const int64_t current = step - s;
    // Receive into one buffer while the other still holds the output being sent on; adjacent
    // stages use opposite parities so each stage's send buffer is its neighbour's receive one.
    const int64_t recv_buffer = (step + s) % 2;
    const int64_t send_buffer = (step + s + 1) % 2;
    PipeStep cmds;
    if ((is_first_stage() || is_last_stage()) && valid_micro_batch(current)) {
      cmds.push_back(buffer_op(InstructionKind::kLoadMicroBatch, recv_buffer, current));
    }
    const bool send = has_next_stage() && valid_micro_batch(current - 1);
    const bool recv = has_previous_stage() && valid_micro_batch(current);
    const PipeInstruction send_op =
        buffer_op(InstructionKind::kSendActivation, send_buffer, current - 1);
    const PipeInstruction recv_op =
        buffer_op(InstructionKind::kRecvActivation, recv_buffer, current);
    if (s % 2 == 0) {
      if (send) cmds.push_back(send_op);
      if (recv) cmds.push_back(recv_op);
    } else {
      if (recv) cmds.push_back(recv_op);
      if (send) cmds.push_back(send_op);
    }
    if (valid_micro_batch(current)) {
      cmds.push_back(buffer_op(InstructionKind::kForwardPass, recv_buffer, current));
    }
    out.push_back(std::move(cmds));
  }
  return out;
}

double bubble_fraction(const std::vector<PipeStep>& steps) {
  if (steps.empty()) return 0.0;
  int64_t idle = 0;
  for (const PipeStep& step : steps) {
    const bool computes = std::any_of(step.begin(), step.end(), [](const PipeInstruction& i) {
      return i.kind == InstructionKind::kForwardPass || i.kind == InstructionKind::kBackwardPass;
    });
    if (!computes) ++idle;
  }
  return static_cast<double>(idle) / static_cast<double>(steps.size());
}

}  // namespace zero::pipeline
