// JsonParams: typed reads of an optimizer's or scheduler's "params" object with DeepSpeed's
// defaults, remembering which keys were read so an unknown (misspelled) key is an error that
// lists the known ones. A missing or null params object means "all defaults".
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace zero::optim {

class JsonParams {
 public:
  // `where` prefixes messages, e.g. "optimizer.params".
  JsonParams(const nlohmann::json& params, std::string where);

  double number(const char* key, double fallback, bool positive = false);
  int64_t integer(const char* key, int64_t fallback);
  int64_t required_integer(const char* key);
  bool boolean(const char* key, bool fallback);
  std::pair<double, double> betas(double beta1, double beta2);
  // One of `choices` (the first is the default).
  std::string choice(const char* key, const std::vector<std::string>& choices);
  // Marks a key as known without reading it.
  void accept(const char* key) { used_.insert(key); }
  // ConfigError for any key that was not read or accepted.
  void reject_unknown() const;
  // Whether the key is present (for defaults that depend on other keys).
  bool has(const char* key) const { return params_.is_object() && params_.contains(key); }

 private:

  const nlohmann::json& params_;
  std::string where_;
  std::set<std::string> used_;
};

}  // namespace zero::optim
