// DeepSpeed's legacy curriculum learning, the top-level "curriculum_learning" section (the
// sequence-length curriculum of the Megatron-DeepSpeed GPT recipes; DeepSpeed's
// runtime/data_pipeline/curriculum_scheduler.py). Every training step runs at a sequence length
// (the "difficulty") that grows from min_difficulty to max_difficulty on a fixed schedule:
//   fixed_linear   d(s) = floor((s / total_curriculum_step) * (max - min) + min), rounded down
//                  to a multiple of difficulty_step, at most max;
//   fixed_root     the same with (s / total_curriculum_step)^(1 / root_degree);
//   fixed_discrete difficulty[i] for steps up to max_step[i], the last difficulty after them.
// The engine applies it (engine/seqlen_curriculum.h). The newer data-efficiency library's
// curriculum (data_efficiency.data_sampling.curriculum_learning) is another section.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/field_spec.h"

namespace zero::config {

enum class CurriculumType { kSeqlen };
enum class CurriculumSchedule { kFixedLinear, kFixedRoot, kFixedDiscrete };

inline const ChoiceList<CurriculumType>& curriculum_type_names() {
  static const ChoiceList<CurriculumType> names = {{"seqlen", CurriculumType::kSeqlen}};
  return names;
}

inline const ChoiceList<CurriculumSchedule>& curriculum_schedule_names() {
  static const ChoiceList<CurriculumSchedule> names = {
      {"fixed_linear", CurriculumSchedule::kFixedLinear},
      {"fixed_root", CurriculumSchedule::kFixedRoot},
      {"fixed_discrete", CurriculumSchedule::kFixedDiscrete}};
  return names;
}

struct CurriculumScheduleConfig {
  std::optional<int64_t> total_curriculum_step;  // steps from min to max (fixed_linear/_root)
  std::optional<int64_t> difficulty_step;        // lengths are multiples of it
  std::optional<double> root_degree;             // fixed_root: 2 = square root
  std::vector<int64_t> difficulty;               // fixed_discrete: lengths
  std::vector<int64_t> max_step;                 // fixed_discrete: last step of each but the last

  template <class V>
  void visit(V& v) {
    v.field("total_curriculum_step", total_curriculum_step, Limits::positive());
    v.field("difficulty_step", difficulty_step, Limits::positive());
    v.field("root_degree", root_degree, Limits::positive());
    v.field("difficulty", difficulty, Limits::positive());
    v.field("max_step", max_step, Limits::positive());
  }
  bool operator==(const CurriculumScheduleConfig&) const = default;
};

struct CurriculumConfig {
  bool enabled = false;
  std::optional<CurriculumType> curriculum_type;
  std::optional<int64_t> min_difficulty;
  std::optional<int64_t> max_difficulty;
  std::optional<CurriculumSchedule> schedule_type;
  CurriculumScheduleConfig schedule_config;

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.choice("curriculum_type", curriculum_type, curriculum_type_names());
    v.field("min_difficulty", min_difficulty, Limits::positive());
    v.field("max_difficulty", max_difficulty, Limits::positive());
    v.choice("schedule_type", schedule_type, curriculum_schedule_names());
    v.section("schedule_config", schedule_config);
  }
  bool operator==(const CurriculumConfig&) const = default;
};

// DeepSpeed's checks of an enabled section (its asserts), as ConfigErrors naming the key and
// the fix; also refuses schedules whose lengths could reach 0 (min_difficulty below
// difficulty_step) or fall outside [1, max_difficulty]. `source` names the file.
void validate_curriculum_config(const CurriculumConfig& curriculum, const std::string& source);

}  // namespace zero::config
