// DeepSpeed's checks of the legacy curriculum section (see curriculum_config.h).
#include "config/curriculum_config.h"

#include "core/error.h"

namespace zero::config {
namespace {

[[noreturn]] void refuse_curriculum(const std::string& source, const std::string& what) {
  throw ConfigError(source + ": curriculum_learning: " + what);
}

std::string curriculum_key(const char* name) { return "'curriculum_learning." + std::string(name) + "'"; }

}  // namespace

void validate_curriculum_config(const CurriculumConfig& c, const std::string& source) {
  if (!c.enabled) return;
  if (!c.curriculum_type) {
    refuse_curriculum(source, "set " + curriculum_key("curriculum_type") + " to \"seqlen\" (DeepSpeed requires it)");
  }
  if (!c.min_difficulty || !c.max_difficulty) {
    refuse_curriculum(source, "set " + curriculum_key("min_difficulty") + " and " + curriculum_key("max_difficulty") +
                       " (the first and the last sequence length; DeepSpeed requires both)");
  }
  if (!c.schedule_type) {
    refuse_curriculum(source, "set " + curriculum_key("schedule_type") +
                       " to \"fixed_linear\", \"fixed_root\" or \"fixed_discrete\"");
  }
  const int64_t min = *c.min_difficulty, max = *c.max_difficulty;
  if (min > max) {
    refuse_curriculum(source, "min_difficulty " + std::to_string(min) + " is above max_difficulty " +
                       std::to_string(max) + "; swap them");
  }
  const CurriculumScheduleConfig& s = c.schedule_config;
  if (*c.schedule_type == CurriculumSchedule::kFixedDiscrete) {
    if (s.difficulty.empty() || s.difficulty.size() != s.max_step.size() + 1) {
      refuse_curriculum(source, "fixed_discrete needs " + curriculum_key("schedule_config.difficulty") +
                         " (lengths) with one entry more than " +
                         curriculum_key("schedule_config.max_step") + " (the last step of each length but " +
                         "the last), got " + std::to_string(s.difficulty.size()) + " and " +
                         std::to_string(s.max_step.size()));
    }
    for (size_t i = 0; i < s.difficulty.size(); ++i) {
      if (s.difficulty[i] > max) {
        refuse_curriculum(source, "schedule_config.difficulty[" + std::to_string(i) + "] = " +
                           std::to_string(s.difficulty[i]) + " is above max_difficulty " +
                           std::to_string(max) + "; raise max_difficulty or lower the entry");
      }
    }
    for (size_t i = 1; i < s.max_step.size(); ++i) {
      if (s.max_step[i] <= s.max_step[i - 1]) {
        refuse_curriculum(source, "schedule_config.max_step must increase (entry " + std::to_string(i) +
                           " is " + std::to_string(s.max_step[i]) + " after " +
                           std::to_string(s.max_step[i - 1]) + ")");
      }
    }
    return;
  }
  if (!s.total_curriculum_step || !s.difficulty_step) {
    refuse_curriculum(source, "fixed_linear and fixed_root need " +
                       curriculum_key("schedule_config.total_curriculum_step") + " and " +
                       curriculum_key("schedule_config.difficulty_step"));
  }
  if (*c.schedule_type == CurriculumSchedule::kFixedRoot && !s.root_degree) {
    refuse_curriculum(source, "fixed_root needs " + curriculum_key("schedule_config.root_degree") +
                       " (2 for a square root)");
  }
  if (min < *s.difficulty_step) {
    refuse_curriculum(source, "min_difficulty " + std::to_string(min) + " is below difficulty_step " +
                       std::to_string(*s.difficulty_step) +
                       ": the first lengths (rounded down to a multiple of the step) would be 0 "
                       "tokens; raise min_difficulty to at least difficulty_step");
  }
}

}  // namespace zero::config
