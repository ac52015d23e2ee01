// One instruction of a pipeline schedule: what a stage does next (load a micro-batch, run a
// forward or backward pass, exchange activations or their gradients with a neighbouring stage,
// reduce gradients, step the optimizer). The vocabulary is DeepSpeed's (runtime/pipe/schedule.py)
// and to_string() prints DeepSpeed's repr ("ForwardPass(buffer_id=0)", "OptimizerStep()"), so a
// schedule can be compared with DeepSpeed's output line by line.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::pipeline {

enum class InstructionKind {
  kLoadMicroBatch,   // read the next micro-batch into a pipeline buffer (first and last stage)
  kForwardPass,      // run this stage's units forward on a buffer
  kBackwardPass,     // run them backward, accumulating parameter gradients
  kSendActivation,   // send a buffer's output activation to the next stage
  kRecvActivation,   // receive the previous stage's activation into a buffer
  kSendGrad,         // send the gradient of a buffer's input to the previous stage
  kRecvGrad,         // receive the gradient of a buffer's output from the next stage
  kReduceTiedGrads,  // all-reduce tied parameters' gradients between the stages that hold them
  kReduceGrads,      // reduce gradients across this stage's data-parallel replicas
  kOptimizerStep,    // step the optimizer and zero the gradients
};

// DeepSpeed's class name of the instruction ("RecvActivation").
const char* instruction_name(InstructionKind kind);
// Whether the instruction works on a pipeline buffer (has a buffer_id).
bool is_buffer_op(InstructionKind kind);

struct PipeInstruction {
  InstructionKind kind;
  // The pipeline buffer the instruction reads or writes (buffer ops only; -1 otherwise).
  int64_t buffer_id = -1;
  // The micro-batch (0-based, in load order) whose data the buffer holds (buffer ops only; -1
  // otherwise). Not part of DeepSpeed's repr: DeepSpeed's engine knows it implicitly because it
  // loads micro-batches in order; an engine here may use it to check that order.
  int64_t micro_batch = -1;

  // DeepSpeed's repr: "LoadMicroBatch(buffer_id=1)", "ReduceGrads()".
  std::string to_string() const;
  bool operator==(const PipeInstruction&) const = default;
};

// One step of a schedule: instructions run in order. A step is atomic in DeepSpeed's sense: a
// barrier between two steps cannot deadlock, because every send in a step is matched by a
// receive on the neighbouring stage in the same step.
using PipeStep = std::vector<PipeInstruction>;

// A step as DeepSpeed prints the list: "[RecvGrad(buffer_id=0), BackwardPass(buffer_id=0)]".
std::string step_to_string(const PipeStep& step);

}  // namespace zero::pipeline
