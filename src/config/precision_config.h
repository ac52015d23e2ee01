// Numeric precision settings: the fp16 and bf16 sections, data_types, and the names DeepSpeed
// accepts for a floating-point type. Defaults are DeepSpeed 0.19's (precision_config.py).
#pragma once
#include <cstdint>
#include <optional>

#include "config/field_spec.h"

namespace zero::config {

enum class PrecisionType { kFp32, kFp16, kBf16 };

// communication_data_type (and seq_parallel_comm_data_type): DeepSpeed lower-cases the value
// and accepts exactly these three.
inline const ChoiceList<PrecisionType>& communication_type_names() {
  static const ChoiceList<PrecisionType> names = {{"fp32", PrecisionType::kFp32},
                                                  {"fp16", PrecisionType::kFp16},
                                                  {"bf16", PrecisionType::kBf16}};
  return names;
}

// data_types.*: DeepSpeed converts these through its DtypeEnum, which takes every spelling below
// (case-sensitive).
inline const ChoiceList<PrecisionType>& dtype_names() {
  static const ChoiceList<PrecisionType> names = {
      {"fp32", PrecisionType::kFp32},          {"fp16", PrecisionType::kFp16},
      {"bf16", PrecisionType::kBf16},          {"float32", PrecisionType::kFp32},
      {"float", PrecisionType::kFp32},         {"torch.float32", PrecisionType::kFp32},
      {"float16", PrecisionType::kFp16},       {"half", PrecisionType::kFp16},
      {"torch.float16", PrecisionType::kFp16}, {"bfloat16", PrecisionType::kBf16},
      {"torch.bfloat16", PrecisionType::kBf16}};
  return names;
}

struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0.0;           // 0 selects dynamic loss scaling
  int64_t initial_scale_power = 16;  // dynamic scaling starts at 2^initial_scale_power
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;     // dynamic scaling never goes below it
  bool fp16_master_weights_and_grads = false;

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("auto_cast", auto_cast);
    v.field("loss_scale", loss_scale, Limits::at_least(0.0));
    v.field("initial_scale_power", initial_scale_power);
    v.field("loss_scale_window", loss_scale_window, Limits::at_least(1));
    v.field("hysteresis", hysteresis, Limits::at_least(1));
    v.field("consecutive_hysteresis", consecutive_hysteresis);
    v.field("min_loss_scale", min_loss_scale, Limits::positive());
    v.field("fp16_master_weights_and_grads", fp16_master_weights_and_grads);
  }
  bool operator==(const Fp16Config&) const = default;
};

struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;
  bool check_grad_overflow = false;
  bool bf16_master_weights_and_grads = false;
  bool bf16_optimizer_states = false;
  // zero.cpp extension (not a DeepSpeed key): commit updates into bf16 master weights by
  // stochastic rounding, so updates below half a bf16 spacing survive on average. Needs
  // bf16_master_weights_and_grads.
  bool stochastic_rounding = false;

  template <class V>
  void visit(V& v) {
    v.field("enabled", enabled);
    v.field("immediate_grad_update", immediate_grad_update);
    v.field("check_grad_overflow", check_grad_overflow);
    v.field("bf16_master_weights_and_grads", bf16_master_weights_and_grads);
    v.field("bf16_optimizer_states", bf16_optimizer_states);
    v.field("stochastic_rounding", stochastic_rounding);
  }
  bool operator==(const Bf16Config&) const = default;
};

// Unset (null) means "match the model's type", DeepSpeed's default.
struct DataTypesConfig {
  std::optional<PrecisionType> grad_accum_dtype;
  std::optional<PrecisionType> param_dtype;
  std::optional<PrecisionType> buffer_dtype;

  template <class V>
  void visit(V& v) {
    v.choice("grad_accum_dtype", grad_accum_dtype, dtype_names());
    v.choice("param_dtype", param_dtype, dtype_names());
    v.choice("buffer_dtype", buffer_dtype, dtype_names());
  }
  bool operator==(const DataTypesConfig&) const = default;
};

}  // namespace zero::config
