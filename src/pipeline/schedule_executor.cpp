#include "pipeline/schedule_executor.h"

namespace zero::pipeline {

void execute_schedule(const std::vector<PipeStep>& steps, StageWorker& worker) {
  for (const PipeStep& step : steps) {
    for (const PipeInstruction& op : step) {
      const int64_t b = op.buffer_id;
      const int64_t mb = op.micro_batch;
      switch (op.kind) {
        case InstructionKind::kLoadMicroBatch: worker.load_micro_batch(b, mb); break;
        case InstructionKind::kForwardPass: worker.forward(b, mb); break;
        case InstructionKind::kBackwardPass: worker.backward(b, mb); break;
        case InstructionKind::kSendActivation: worker.send_activation(b, mb); break;
        case InstructionKind::kRecvActivation: worker.recv_activation(b, mb); break;
        case InstructionKind::kSendGrad: worker.send_grad(b, mb); break;
        case InstructionKind::kRecvGrad: worker.recv_grad(b, mb); break;
        case InstructionKind::kReduceTiedGrads: worker.reduce_tied_grads(); break;
        case InstructionKind::kReduceGrads: worker.reduce_grads(); break;
        case InstructionKind::kOptimizerStep: worker.optimizer_step(); break;
      }
    }
  }
}

}  // namespace zero::pipeline
