// SeqlenCurriculum: DeepSpeed's legacy sequence-length curriculum (config/curriculum_config.h)
// as the Engine applies it. Before each training forward DeepSpeed calls
// update_difficulty(global_steps + 1): while the current length is below max_difficulty it
// becomes the schedule's length for that step (so a fixed_discrete schedule stops changing once
// it reaches the maximum), and the model sees each sequence cut to its first `length` tokens
// (Megatron's curriculum_seqlen). Evaluation runs at the full length.
#pragma once
#include <cstdint>

#include "config/curriculum_config.h"
#include "model/step_context.h"

namespace zero::engine {

class SeqlenCurriculum {
 public:
  // `config` is enabled and validated (config::validate_curriculum_config).
  explicit SeqlenCurriculum(const config::CurriculumConfig& config);

  // The schedule's length at optimizer step `step` (1-based): DeepSpeed's get_difficulty.
  int64_t scheduled(int64_t step) const;
  // The length of the step numbered `step` (global_steps + 1), advancing the state as
  // DeepSpeed's update_difficulty does. Calls for the same step return the same length.
  int64_t length_for_step(int64_t step);
  // After a checkpoint load: the state after `completed_steps` steps (replayed from the start).
  void restore(int64_t completed_steps);
  int64_t current() const { return current_; }
  int64_t max_length() const { return max_; }

 private:
  config::CurriculumConfig config_;
  int64_t min_ = 1;
  int64_t max_ = 1;
  int64_t current_ = 1;
};

// Ulysses (sequence_parallel_size sp > 1) splits every sequence into sp equal parts, so every
// length the schedule can give must be a multiple of sp: ConfigError naming the key otherwise.
void check_curriculum_lengths(const config::CurriculumConfig& config, int64_t sequence_parallel);

// `batch` with every sequence cut to its first `length` tokens and targets (copies on the host);
// `batch` itself when it is not longer. The loss counts the kept targets.
model::Batch truncate_sequences(const model::Batch& batch, int64_t length);

}  // namespace zero::engine
