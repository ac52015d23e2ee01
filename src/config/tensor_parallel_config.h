// The tensor_parallel section: DeepSpeed's AutoTP training settings (runtime/tensor_parallel/
// config.py, TPTrainingConfig and its nested TPConfig). Keys, spellings and defaults are
// DeepSpeed's:
//   autotp_size                 the tensor-parallel degree; 0 (the default) = AutoTP off, and 1
//                               splits nothing either
//   tp_overlap_comm             overlap the all-reduce with computation
//   tensor_parallel (alias tp)  {tp_size: 1, tp_grain_size: 1, mpu, tp_group}
//   partition_config            custom layer partitioning rules (an object)
//   preset_model                a built-in rule set by architecture name ("llama", ...)
//   keep_module_on_host, replace_with_kernel_inject (alias kernel_inject)
//   dtype, injection_policy_tuple, and tp's mpu and tp_group hold Python objects in DeepSpeed
//   (torch.dtype, classes, process groups); they are recognised and kept as written.
// As in DeepSpeed (its config models forbid extra keys) an unknown key is never silently kept:
// zero.cpp warns about it, and a near miss of a key is an error.
// zero.cpp acts on autotp_size (the tensor-parallel size, model/tensor_parallel.h; `zero train
// --tensor-parallel-size` overrides it); feature_support rejects the other settings in use.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "config/field_spec.h"

namespace zero::config {

// DeepSpeed's TPConfig, nested under tensor_parallel.tensor_parallel (or .tp).
struct TpInnerConfig {
  int64_t tp_size = 1;
  int64_t tp_grain_size = 1;
  std::optional<nlohmann::json> mpu;
  std::optional<nlohmann::json> tp_group;

  template <class V>
  void visit(V& v) {
    v.field("tp_size", tp_size, Limits::at_least(1));
    v.field("tp_grain_size", tp_grain_size, Limits::at_least(1));
    v.field("mpu", mpu);
    v.field("tp_group", tp_group);
  }
  bool operator==(const TpInnerConfig&) const = default;
};

struct TensorParallelConfig {
  int64_t autotp_size = 0;
  bool tp_overlap_comm = false;
  TpInnerConfig tensor_parallel;
  std::optional<nlohmann::json> partition_config;
  std::optional<std::string> preset_model;
  bool keep_module_on_host = false;
  bool replace_with_kernel_inject = false;
  std::optional<nlohmann::json> dtype;
  std::optional<nlohmann::json> injection_policy_tuple;

  template <class V>
  void visit(V& v) {
    v.field("autotp_size", autotp_size, Limits::at_least(0));
    v.field("tp_overlap_comm", tp_overlap_comm);
    v.section(Key("tensor_parallel", "tp"), tensor_parallel);
    v.field("partition_config", partition_config);
    v.field("preset_model", preset_model);
    v.field("keep_module_on_host", keep_module_on_host);
    v.field(Key("replace_with_kernel_inject", "kernel_inject"), replace_with_kernel_inject);
    v.field("dtype", dtype);
    v.field("injection_policy_tuple", injection_policy_tuple);
  }
  bool operator==(const TensorParallelConfig&) const = default;

  // partition_config must be an object. Throws ConfigError naming the key (`source` prefixes).
  void validate(const std::string& source) const;
  // The keys set away from their defaults, as JSON, when the section asks for tensor
  // parallelism: a degree above 1, or any other setting changed. Nothing for an absent or
  // all-default section, or one that only sets autotp_size (or tp_size) to 0 or 1.
  std::optional<nlohmann::json> settings_in_use() const;
};

}  // namespace zero::config
