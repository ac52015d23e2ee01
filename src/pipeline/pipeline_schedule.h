// DeepSpeed's pipeline schedules (runtime/pipe/schedule.py), instruction for instruction:
//   TrainSchedule      synchronous 1F1B over `micro_batches` micro-batches (one optimizer step:
//                      the micro-batches are the gradient-accumulation steps), 2 * (m + p - 1)
//                      steps; each step is either a forward or a backward step for the stage.
//   InferenceSchedule  forward only, m + p - 1 steps, two buffers alternating.
// A schedule is pure data: the list of steps one stage executes. It knows nothing of tensors or
// communication; the pipeline engine interprets the instructions (pipe_instruction.h).
//
// Timing of TrainSchedule (p stages, stage s, micro-batch k, steps counted from 0):
//   stage s forwards k in step 2k + s and backwards it in step 2k + 2p - 1 - s,
// so activations flow one stage per step and gradients flow back one stage per step, and the
// last stage backwards k right after forwarding it. DeepSpeed writes the same mapping as four
// even/odd cases (_step_to_micro_batch); the closed form above gives the same steps.
#pragma once
#include <cstdint>
#include <vector>

#include "pipeline/pipe_instruction.h"

namespace zero::pipeline {

// The schedule of one stage. Every step list has the same length on all stages of a pipeline,
// and a step's sends and receives pair up with the neighbouring stages' in that step.
class PipeSchedule {
 public:
  // micro_batches >= 1, stages >= 1, 0 <= stage_id < stages (else InternalError: the caller
  // validates the config first).
  PipeSchedule(int64_t micro_batches, int64_t stages, int64_t stage_id);
  virtual ~PipeSchedule() = default;

  // The stage's instruction lists, one per step, in execution order.
  virtual std::vector<PipeStep> steps() const = 0;
  // How many pipeline buffers (input/output activation slots) the stage allocates; buffer ids
  // are 0 .. num_pipe_buffers() - 1.
  virtual int64_t num_pipe_buffers() const = 0;

  int64_t micro_batches() const { return micro_batches_; }
  int64_t stages() const { return stages_; }
  int64_t stage_id() const { return stage_id_; }
  bool is_first_stage() const { return stage_id_ == 0; }
  bool is_last_stage() const { return stage_id_ == stages_ - 1; }

 protected:
  bool valid_micro_batch(int64_t micro_batch) const {
    return micro_batch >= 0 && micro_batch < micro_batches_;
  }
  bool has_previous_stage() const { return stage_id_ > 0; }
  bool has_next_stage() const { return stage_id_ + 1 < stages_; }
  // DeepSpeed's cyclic buffer assignment: micro-batch k uses buffer k mod num_pipe_buffers().
  int64_t buffer_of(int64_t micro_batch) const { return micro_batch % num_pipe_buffers(); }

 private:
  int64_t micro_batches_;
  int64_t stages_;
  int64_t stage_id_;
};

// 1F1B training: warm-up forwards, then one forward and one backward alternately, then the
// remaining backwards; ReduceTiedGrads, ReduceGrads and OptimizerStep end the last step.
class TrainSchedule : public PipeSchedule {
 public:
  using PipeSchedule::PipeSchedule;
  std::vector<PipeStep> steps() const override;
  // The most activations the stage keeps for backward at once: max(2, min(p - s, m)).
  int64_t num_pipe_buffers() const override;

  // The step in which the stage forwards / backwards `micro_batch` (formulas above).
  int64_t forward_step(int64_t micro_batch) const { return 2 * micro_batch + stage_id(); }
  int64_t backward_step(int64_t micro_batch) const {
    return 2 * micro_batch + 2 * stages() - 1 - stage_id();
  }
  int64_t total_steps() const { return 2 * (micro_batches() + stages() - 1); }
};

// Forward-only (evaluation): stage s forwards micro-batch k in step k + s; receive and send
// buffers alternate between 0 and 1.
class InferenceSchedule : public PipeSchedule {
 public:
  using PipeSchedule::PipeSchedule;
  std::vector<PipeStep> steps() const override;
  int64_t num_pipe_buffers() const override { return 2; }
  int64_t total_steps() const { return micro_batches() + stages() - 1; }
};

// The pipeline bubble of one stage's schedule: the fraction of its steps without a ForwardPass
// or BackwardPass. For TrainSchedule (and InferenceSchedule) this is exactly (p - 1) / (m + p - 1)
// for every stage: each stage computes in 2m of the 2(m + p - 1) steps. That counts steps; in
// time it is an approximation, since a backward takes about twice a forward and DeepSpeed's
// steps are not barriers (a stage waits only for its neighbours' data).
double bubble_fraction(const std::vector<PipeStep>& steps);

}  // namespace zero::pipeline
