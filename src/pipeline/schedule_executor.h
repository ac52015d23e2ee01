// Runs one stage's pipeline schedule: each instruction becomes a call on a StageWorker, which
// owns the stage's units, its pipeline buffers and its links to the neighbouring stages. The
// executor adds no ordering of its own: the schedule's order is what pairs blocking sends with
// receives across stages (pipeline_schedule.h), so a worker must do each call's work before it
// returns (or at least never reorder sends and receives).
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/pipe_instruction.h"

namespace zero::pipeline {

// One stage's side of the pipeline. `buffer` is in 0 .. num_pipe_buffers() - 1 of the schedule;
// `micro_batch` counts micro-batches in load order.
class StageWorker {
 public:
  virtual ~StageWorker() = default;
  // First stage: the inputs; last stage: the labels (both, on a one-stage pipeline).
  virtual void load_micro_batch(int64_t buffer, int64_t micro_batch) = 0;
  virtual void forward(int64_t buffer, int64_t micro_batch) = 0;
  virtual void backward(int64_t buffer, int64_t micro_batch) = 0;
  virtual void send_activation(int64_t buffer, int64_t micro_batch) = 0;
  virtual void recv_activation(int64_t buffer, int64_t micro_batch) = 0;
  virtual void send_grad(int64_t buffer, int64_t micro_batch) = 0;
  virtual void recv_grad(int64_t buffer, int64_t micro_batch) = 0;
  virtual void reduce_tied_grads() = 0;
  virtual void reduce_grads() = 0;
  virtual void optimizer_step() = 0;
};

// Calls `worker` for every instruction of `steps`, in order.
void execute_schedule(const std::vector<PipeStep>& steps, StageWorker& worker);

}  // namespace zero::pipeline
