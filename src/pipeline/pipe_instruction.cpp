#include "pipeline/pipe_instruction.h"

namespace zero::pipeline {

const char* instruction_name(InstructionKind kind) {
  switch (kind) {
    case InstructionKind::kLoadMicroBatch: return "LoadMicroBatch";
    case InstructionKind::kForwardPass: return "ForwardPass";
    case InstructionKind::kBackwardPass: return "BackwardPass";
    case InstructionKind::kSendActivation: return "SendActivation";
    case InstructionKind::kRecvActivation: return "RecvActivation";
    case InstructionKind::kSendGrad: return "SendGrad";
    case InstructionKind::kRecvGrad: return "RecvGrad";
    case InstructionKind::kReduceTiedGrads: return "ReduceTiedGrads";
    case InstructionKind::kReduceGrads: return "ReduceGrads";
    case InstructionKind::kOptimizerStep: return "OptimizerStep";
  }
  return "?";
}

bool is_buffer_op(InstructionKind kind) {
  switch (kind) {
    case InstructionKind::kReduceTiedGrads:
    case InstructionKind::kReduceGrads:
    case InstructionKind::kOptimizerStep: return false;
    default: return true;
  }
}

std::string PipeInstruction::to_string() const {
  std::string text = std::string(instruction_name(kind)) + "(";
  if (is_buffer_op(kind)) text += "buffer_id=" + std::to_string(buffer_id);
  return text + ")";
}

std::string step_to_string(const PipeStep& step) {
  std::string text = "[";
  for (size_t i = 0; i < step.size(); ++i) {
    if (i > 0) text += ", ";
    text += step[i].to_string();
  }
  return text + "]";
}

}  // namespace zero::pipeline
