// "auto" resolution on the raw JSON, before the typed readers run, so the readers see only
// concrete values and one place knows which keys may be "auto" and where each value came from.
#include "config/auto_values.h"

#include <cmath>
#include <sstream>

#include "config/config_errors.h"
#include "config/read_context.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace zero::config {
namespace {

bool is_auto(const nlohmann::json& value) {
  return value.is_string() && value.get_ref<const std::string&>() == "auto";
}

// The child object `name` of `parent`, or nullptr when absent or not an object (the readers
// report a wrong type later, with the full message).
nlohmann::json* child_object(nlohmann::json* parent, const char* name) {
  if (parent == nullptr || !parent->is_object()) return nullptr;
  const auto it = parent->find(name);
  if (it == parent->end() || !it->is_object()) return nullptr;
  return &*it;
}

std::optional<int64_t> as_integer(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 9e18) {
      return static_cast<int64_t>(number);
    }
  }
  return std::nullopt;
}

std::string shown(const nlohmann::json& value) {
  if (value.is_number_float()) {
    std::ostringstream text;
    text << value.get<double>();
    return text.str();
  }
  return value.dump();
}

// Where a value for an "auto" key comes from: a flag the user gave, a default, or the run.
struct Source {
  std::optional<nlohmann::json> value;
  bool given = false;    // an explicit flag: a different concrete config value is a mismatch
  std::string origin;    // "--lr", "the Trainer's default (set it with --lr)", ...
  std::string flag;      // the flag that sets it, for mismatch messages
};

template <class T>
Source flag_or_default(const std::optional<T>& given, T fallback, const std::string& flag) {
  if (given) return {nlohmann::json(*given), true, "from " + flag, flag};
  return {nlohmann::json(fallback), false,
          "the Hugging Face Trainer's default (" + flag + " sets it)", flag};
}

class Resolver {
 public:
  Resolver(const AutoValues& autos, const ReadContext& context)
      : autos_(autos), context_(context) {}

  void resolve(nlohmann::json& config) const {
    resolve_batch(config);
    fill(&config, "", "gradient_clipping",
         flag_or_default(autos_.max_grad_norm, TrainerDefaults::kMaxGradNorm, "--max-grad-norm"));
    if (autos_.add_trainer_optimizer && !config.contains("optimizer")) add_optimizer(config);
    resolve_optimizer(child_object(child_object(&config, "optimizer"), "params"));
    resolve_scheduler(child_object(child_object(&config, "scheduler"), "params"));
    resolve_precision(config, "fp16", autos_.fp16, "--fp16");
    resolve_precision(config, config.contains("bfloat16") ? "bfloat16" : "bf16", autos_.bf16,
                      "--bf16");
    resolve_zero(child_object(&config, "zero_optimization"));
  }

 private:
  // If `object[key]` is "auto", replaces it by the source's value (recording where it came
  // from); if it is a concrete value that an explicit flag contradicts, fails naming both.
  void fill(nlohmann::json* object, const std::string& section, const char* key,
            const Source& source, const std::string& meaning = "") const {
    if (object == nullptr) return;
    const auto it = object->find(key);
    if (it == object->end()) return;
    const std::string path = join_key(section, key);
    if (!is_auto(*it)) {
      if (source.given && source.value && !same_value(*it, *source.value)) {
        throw ConfigError(context_.where(path) + ": key '" + path + "' = " + shown(*it) +
                          " but " + source.flag + " " + shown(*source.value) +
                          " was given; they must agree (the Hugging Face Trainer rejects this "
                          "too): write \"auto\" in the config to take the flag's value, or drop "
                          "the flag");
      }
      return;
    }
    if (!source.value) {
      throw ConfigError(context_.where(path) + ": key '" + path + "' is \"auto\" (" + meaning +
                        ") but " + source.origin + "; write a value in the config");
    }
    (*object)[key] = *source.value;
    context_.record_auto(path, path + ": \"auto\" -> " + shown(*source.value) + ", " +
                                   source.origin);
  }

  static bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
    if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
    return a == b;
  }

  Source micro_source() const {
    return flag_or_default(autos_.micro_batch_size, TrainerDefaults::kMicroBatchSize,
                           "--micro-batch");
  }
  Source gas_source() const {
    return flag_or_default(autos_.gradient_accumulation_steps,
                           TrainerDefaults::kGradientAccumulationSteps, "--grad-accum");
  }

  void resolve_batch(nlohmann::json& config) const {
    const char* kMicro = "train_micro_batch_size_per_gpu";
    const char* kGas = "gradient_accumulation_steps";
    const char* kTrain = "train_batch_size";
    const bool train_fixed = config.contains(kTrain) && !is_auto(config.at(kTrain));
    // Absent batch keys are filled as Accelerate fills them from the Trainer's arguments;
    // where train_batch_size is fixed, DeepSpeed infers the missing one unless a flag says.
    if (!config.contains(kMicro) && (!train_fixed || autos_.micro_batch_size)) {
      add_absent(config, kMicro, micro_source());
    }
    if (!config.contains(kGas) && autos_.gradient_accumulation_steps) {
      add_absent(config, kGas, gas_source());
    }
    fill(&config, "", kMicro, micro_source());
    fill(&config, "", kGas, gas_source());
    const auto train = config.find(kTrain);
    if (train == config.end() || !is_auto(*train)) return;
    const std::optional<int64_t> micro = as_integer(config.at(kMicro));
    if (!micro) {
      throw_type_error(context_.source(), kMicro, "an integer", config.at(kMicro),
                       TrainerDefaults::kMicroBatchSize);
    }
    int64_t gas = TrainerDefaults::kGradientAccumulationSteps;
    if (const auto it = config.find(kGas); it != config.end()) gas = as_integer(*it).value_or(gas);
    const std::optional<int64_t> product = mul_if_fits(*micro, gas);
    const std::optional<int64_t> total =
        product ? mul_if_fits(*product, autos_.world_size) : std::nullopt;
    if (!total) {
      throw ConfigError(context_.where(kTrain) +
                        ": key 'train_batch_size' is \"auto\" but micro-batch size * gradient "
                        "accumulation steps * world size overflows a 64-bit integer; use "
                        "smaller batch sizes");
    }
    config[kTrain] = *total;
    context_.record_auto(kTrain, std::string(kTrain) + ": \"auto\" -> " + std::to_string(*total) +
                                     ", micro-batch " + std::to_string(*micro) + " * accumulation " +
                                     std::to_string(gas) + " * world size " +
                                     std::to_string(autos_.world_size));
  }

  void add_absent(nlohmann::json& config, const char* key, const Source& source) const {
    config[key] = *source.value;
    context_.record_auto(key, std::string(key) + ": absent -> " + shown(*source.value) + ", " +
                                  source.origin);
  }

  Source lr_source() const {
    return flag_or_default(autos_.learning_rate, TrainerDefaults::kLearningRate, "--lr");
  }
  Source betas_source() const {
    const double beta1 = autos_.adam_beta1.value_or(TrainerDefaults::kAdamBeta1);
    const double beta2 = autos_.adam_beta2.value_or(TrainerDefaults::kAdamBeta2);
    const bool given = autos_.adam_beta1 || autos_.adam_beta2;
    return {nlohmann::json::array({beta1, beta2}), given,
            given ? "from --adam-beta1/--adam-beta2"
                  : "the Hugging Face Trainer's default (--adam-beta1/--adam-beta2 set it)",
            "--adam-beta1/--adam-beta2"};
  }
  Source eps_source() const {
    return flag_or_default(autos_.adam_epsilon, TrainerDefaults::kAdamEpsilon, "--adam-epsilon");
  }
  Source weight_decay_source() const {
    return flag_or_default(autos_.weight_decay, TrainerDefaults::kWeightDecay, "--weight-decay");
  }

  void add_optimizer(nlohmann::json& config) const {
    const nlohmann::json params = {{"lr", *lr_source().value},
                                   {"betas", *betas_source().value},
                                   {"eps", *eps_source().value},
                                   {"weight_decay", *weight_decay_source().value}};
    config["optimizer"] = {{"type", "AdamW"}, {"params", params}};
    context_.record_auto("optimizer", "optimizer: absent -> AdamW " + params.dump() +
                                          ", the optimizer the Hugging Face Trainer creates");
  }

  void resolve_optimizer(nlohmann::json* params) const {
    const std::string section = "optimizer.params";
    fill(params, section, "lr", lr_source());
    fill(params, section, "betas", betas_source());
    fill(params, section, "eps", eps_source());
    fill(params, section, "weight_decay", weight_decay_source());
    reject_leftovers(params, section);
  }

  void resolve_scheduler(nlohmann::json* params) const {
    const std::string section = "scheduler.params";
    fill(params, section, "warmup_min_lr",
         Source{nlohmann::json(0.0), false, "as the Hugging Face Trainer sets it", ""});
    fill(params, section, "warmup_max_lr", lr_source());
    fill(params, section, "warmup_num_steps",
         flag_or_default(autos_.warmup_steps, TrainerDefaults::kWarmupSteps, "--warmup-steps"));
    Source total;
    if (autos_.total_steps) {
      total = {nlohmann::json(*autos_.total_steps), false, "from --steps", "--steps"};
    } else {
      total.origin = "the number of training steps is not known here";
    }
    fill(params, section, "total_num_steps", total, "the run's total optimizer steps");
    reject_leftovers(params, section);
  }

  // "fp16"/"bf16": "auto" follows the flag (off by default); a flag given for an absent section
  // turns that precision on.
  void resolve_precision(nlohmann::json& config, const char* key, const std::optional<bool>& flag,
                         const std::string& flag_name) const {
    if (!config.contains(key)) {
      if (flag && *flag) {
        config[key] = {{"enabled", true}};
        context_.record_auto(std::string(key) + ".enabled", std::string(key) +
                                                                ".enabled: absent -> true, from " +
                                                                flag_name);
      }
      return;
    }
    const Source source = flag ? Source{nlohmann::json(*flag), true, "from " + flag_name, flag_name}
                               : Source{nlohmann::json(false), false,
                                        "off unless " + flag_name + " is given", flag_name};
    fill(child_object(&config, key), key, "enabled", source);
  }

  void resolve_zero(nlohmann::json* zero) const {
    const std::string section = "zero_optimization";
    Source bucket, prefetch, persistence;
    if (autos_.hidden_size) {
      const int64_t h = *autos_.hidden_size;
      const std::string hidden = std::to_string(h);
      bucket = {nlohmann::json(h * h), false, "the model's hidden size " + hidden + " squared", ""};
      // As the HF Trainer computes it: (0.9 * h) * h in double precision, truncated.
      prefetch = {nlohmann::json(static_cast<int64_t>(0.9 * static_cast<double>(h) *
                                                      static_cast<double>(h))),
                  false, "0.9 * the model's hidden size " + hidden + " squared", ""};
      persistence = {nlohmann::json(10 * h), false, "10 * the model's hidden size " + hidden, ""};
    } else {
      bucket.origin = prefetch.origin = persistence.origin =
          "no model is known when the config is read";
    }
    fill(zero, section, "reduce_bucket_size", bucket, "the model's hidden size squared");
    for (const char* key : {"stage3_prefetch_bucket_size", "prefetch_bucket_size"}) {
      fill(zero, section, key, prefetch, "0.9 * the model's hidden size squared");
    }
    for (const char* key : {"stage3_param_persistence_threshold", "param_persistence_threshold"}) {
      fill(zero, section, key, persistence, "10 * the model's hidden size");
    }
  }

  void reject_leftovers(const nlohmann::json* params, const std::string& section) const {
    if (params == nullptr) return;
    for (const auto& [key, value] : params->items()) {
      if (is_auto(value)) throw_unresolved_auto(context_.where(join_key(section, key)),
                                                join_key(section, key));
    }
  }

  const AutoValues& autos_;
  const ReadContext& context_;
};

}  // namespace

void resolve_auto_values(nlohmann::json& config, const AutoValues& autos,
                         const ReadContext& context) {
  if (!config.is_object()) return;  // the top-level reader reports the wrong type
  if (autos.hidden_size && (*autos.hidden_size < 1 || *autos.hidden_size > (1 << 24))) {
    throw ConfigError("the model's hidden size " + std::to_string(*autos.hidden_size) +
                      " is out of range for the \"auto\" bucket sizes");
  }
  Resolver(autos, context).resolve(config);
}

}  // namespace zero::config
