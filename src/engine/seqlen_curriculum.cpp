#include "engine/seqlen_curriculum.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/error.h"

namespace zero::engine {

SeqlenCurriculum::SeqlenCurriculum(const config::CurriculumConfig& config)
    : config_(config),
      min_(config.min_difficulty.value_or(1)),
      max_(config.max_difficulty.value_or(1)),
      current_(min_) {
  ZERO_CHECK(config.enabled && config.schedule_type && config.min_difficulty &&
                 config.max_difficulty,
             "SeqlenCurriculum needs an enabled, validated curriculum_learning section");
}

int64_t SeqlenCurriculum::scheduled(int64_t step) const {
  const config::CurriculumScheduleConfig& s = config_.schedule_config;
  if (*config_.schedule_type == config::CurriculumSchedule::kFixedDiscrete) {
    for (size_t i = 0; i < s.max_step.size(); ++i) {
      if (step <= s.max_step[i]) return s.difficulty[i];
    }
    return s.difficulty.back();
  }
  const double degree = *config_.schedule_type == config::CurriculumSchedule::kFixedRoot
                            ? s.root_degree.value_or(1.0)
                            : 1.0;
  // DeepSpeed's arithmetic in double: floor(progress^(1/degree) * (max - min) + min), then down
  // to a multiple of difficulty_step, then at most max. Past total_curriculum_step the progress
  // exceeds 1 and the cap applies. Capping the raw value at max + difficulty_step first (so the
  // conversion cannot overflow) changes nothing: from there on both give max.
  const double progress = std::pow(static_cast<double>(step) /
                                       static_cast<double>(*s.total_curriculum_step),
                                   1.0 / degree);
  const double raw = std::floor(progress * static_cast<double>(max_ - min_) +
                                static_cast<double>(min_));
  const double capped = std::min(raw, static_cast<double>(max_ + *s.difficulty_step));
  auto length = static_cast<int64_t>(capped);
  length -= length % *s.difficulty_step;
  return std::min(length, max_);
}

int64_t SeqlenCurriculum::length_for_step(int64_t step) {
  if (current_ < max_) current_ = scheduled(step);
  return current_;
}

void SeqlenCurriculum::restore(int64_t completed_steps) {
  current_ = min_;
  for (int64_t step = 1; step <= completed_steps && current_ < max_; ++step) {
    length_for_step(step);
  }
}

void check_curriculum_lengths(const config::CurriculumConfig& config, int64_t sequence_parallel) {
  if (sequence_parallel <= 1) return;
  const config::CurriculumScheduleConfig& s = config.schedule_config;
  std::vector<std::pair<std::string, int64_t>> lengths = {
      {"max_difficulty", config.max_difficulty.value_or(0)}};
  if (*config.schedule_type == config::CurriculumSchedule::kFixedDiscrete) {
    for (size_t i = 0; i < s.difficulty.size(); ++i) {
      lengths.emplace_back("schedule_config.difficulty[" + std::to_string(i) + "]",
                           s.difficulty[i]);
    }
  } else {
    lengths.emplace_back("schedule_config.difficulty_step", s.difficulty_step.value_or(0));
  }
  for (const auto& [name, length] : lengths) {
    if (length % sequence_parallel != 0) {
      throw ConfigError("curriculum_learning." + name + " = " + std::to_string(length) +
                        " is not a multiple of sequence_parallel_size " +
                        std::to_string(sequence_parallel) +
                        " (Ulysses splits every sequence into that many equal parts); make it one");
    }
  }
}

model::Batch truncate_sequences(const model::Batch& batch, int64_t length) {
  const int64_t full = batch.seq_len();
  if (length >= full) return batch;
  ZERO_CHECK(length >= 1, "a curriculum length of " << length);
  ZERO_CHECK(batch.tokens.device().is_cpu() && batch.targets.device().is_cpu() &&
                 batch.tokens.is_contiguous() && batch.targets.is_contiguous(),
             "the curriculum cuts host batches");
  const int64_t rows = batch.batch_size();
  model::Batch cut;
  cut.tokens = Tensor::zeros_host({rows, length}, batch.tokens.dtype());
  cut.targets = Tensor::zeros_host({rows, length}, batch.targets.dtype());
  const size_t token_bytes = dtype_size(batch.tokens.dtype());
  const size_t target_bytes = dtype_size(batch.targets.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<char*>(cut.tokens.raw_data()) + r * length * token_bytes,
                static_cast<const char*>(batch.tokens.raw_data()) + r * full * token_bytes,
                static_cast<size_t>(length) * token_bytes);
    std::memcpy(static_cast<char*>(cut.targets.raw_data()) + r * length * target_bytes,
                static_cast<const char*>(batch.targets.raw_data()) + r * full * target_bytes,
                static_cast<size_t>(length) * target_bytes);
  }
  return cut;
}

}  // namespace zero::engine
