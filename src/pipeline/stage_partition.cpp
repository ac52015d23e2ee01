#include "pipeline/stage_partition.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <regex>

#include "core/check.h"
#include "core/error.h"

namespace zero::pipeline {
namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

const char* kMethods = "\"parameters\" (the default), \"uniform\" or \"type:REGEX\"";

// std::regex compiles recursively: the bound keeps a hostile pattern from exhausting the stack.
constexpr size_t kMaxTypeRegexChars = 200;

std::regex compile_type_regex(const std::string& pattern, const std::string& key) {
  if (pattern.size() > kMaxTypeRegexChars) {
    throw ConfigError("key '" + key + "': the type regex has " + std::to_string(pattern.size()) +
                      " characters, more than the " + std::to_string(kMaxTypeRegexChars) +
                      " allowed; shorten it");
  }
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    throw ConfigError("key '" + key + "' = \"type:" + pattern + "\": the regex does not compile (" +
                      e.what() + "); write a valid regular expression after \"type:\", e.g. "
                      "\"type:transformer\"");
  }
}

}  // namespace

PartitionMethod PartitionMethod::parse(const std::string& text, const std::string& key) {
  const std::string method = lower(text);
  PartitionMethod out;
  if (method == "parameters" || method == "best") return out;
  if (method == "uniform") {
    out.kind = PartitionKind::kUniform;
    return out;
  }
  if (method.rfind("type:", 0) == 0) {
    // DeepSpeed takes method.split(':')[1]: the text up to a second colon.
    const std::string rest = method.substr(5);
    out.kind = PartitionKind::kType;
    out.type_regex = rest.substr(0, rest.find(':'));
    if (out.type_regex.empty()) {
      throw ConfigError("key '" + key + "' = \"" + text +
                        "\": the type regex is empty; name the unit type to balance, e.g. "
                        "\"type:transformer\"");
    }
    compile_type_regex(out.type_regex, key);
    return out;
  }
  if (method == "profile") {
    throw ConfigError("key '" + key + "' = \"" + text +
                      "\": DeepSpeed does not implement the \"profile\" partition method either; "
                      "use " + kMethods);
  }
  throw ConfigError("key '" + key + "' = \"" + text + "\" is not a partition method; use " +
                    kMethods);
}

std::string PartitionMethod::to_string() const {
  switch (kind) {
    case PartitionKind::kParameters: return "parameters";
    case PartitionKind::kUniform: return "uniform";
    case PartitionKind::kType: return "type:" + type_regex;
  }
  return "?";
}

std::vector<int64_t> partition_uniform(int64_t num_items, int64_t num_parts) {
  ZERO_CHECK(num_parts >= 1, "partition_uniform needs at least one part, got " << num_parts);
  ZERO_CHECK(num_items >= 0, "partition_uniform got a negative item count " << num_items);
  std::vector<int64_t> parts(static_cast<size_t>(num_parts + 1));
  if (num_items <= num_parts) {
    for (int64_t p = 0; p <= num_parts; ++p) parts[static_cast<size_t>(p)] = std::min(p, num_items);
    return parts;
  }
  const int64_t chunk = num_items / num_parts;
  const int64_t residual = num_items - chunk * num_parts;  // the first `residual` parts get +1
  for (int64_t p = 0; p <= num_parts; ++p) {
    parts[static_cast<size_t>(p)] = p * chunk + std::min(p, residual);
  }
  return parts;
}

std::vector<int64_t> partition_balanced(const std::vector<double>& weights, int64_t num_parts) {
  ZERO_CHECK(num_parts >= 1, "partition_balanced needs at least one part, got " << num_parts);
  const int64_t n = static_cast<int64_t>(weights.size());
  const int64_t m = num_parts;
  if (n <= m) return partition_uniform(n, m);

  // best_*[i][j]: the chosen split of the first i items into j runs: its heaviest and lightest
  // run, their difference (the cost), and where its last run starts. Unreachable states stay
  // infinite, as in DeepSpeed's numpy arrays.
  const double inf = std::numeric_limits<double>::infinity();
  const size_t rows = static_cast<size_t>(n + 1);
  const size_t cols = static_cast<size_t>(m + 1);
  std::vector<double> best_max(rows * cols, inf), best_min(rows * cols, inf),
      best_cost(rows * cols, inf);
  std::vector<int64_t> last_start(rows * cols, 0);
  auto at = [cols](int64_t i, int64_t j) { return static_cast<size_t>(i) * cols + static_cast<size_t>(j); };
  std::vector<double> prefix(rows, 0.0);  // summed left to right, as numpy.cumsum
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[static_cast<size_t>(i)];

  best_max[at(0, 0)] = 0.0;
  best_cost[at(0, 0)] = 0.0;
  for (int64_t i = 1; i <= n; ++i) {
    for (int64_t j = 1; j <= std::min(i, m); ++j) {
      for (int64_t k = 0; k < i; ++k) {
        const double run = prefix[i] - prefix[k];
        const double heaviest = std::max(best_max[at(k, j - 1)], run);
        const double lightest = std::min(best_min[at(k, j - 1)], run);
        const double cost = heaviest - lightest;
        // ">=": a later cut with the same cost wins (DeepSpeed's tie rule).
        if (best_cost[at(i, j)] >= cost) {
          best_cost[at(i, j)] = cost;
          best_max[at(i, j)] = heaviest;
          best_min[at(i, j)] = lightest;
          last_start[at(i, j)] = k;
        }
      }
    }
  }
  std::vector<int64_t> parts(cols);
  parts[static_cast<size_t>(m)] = n;
  for (int64_t j = m; j >= 1; --j) {
    parts[static_cast<size_t>(j - 1)] = last_start[at(parts[static_cast<size_t>(j)], j)];
  }
  return parts;
}

std::vector<int64_t> partition_layers(const std::vector<LayerInfo>& layers, int64_t stages,
                                      const PartitionMethod& method, const std::string& key) {
  const int64_t count = static_cast<int64_t>(layers.size());
  if (stages < 1) {
    throw ConfigError("key 'pipeline.stages' = " + std::to_string(stages) +
                      ": a pipeline needs at least one stage; set it to 1 or more");
  }
  if (stages > count) {
    throw ConfigError("key 'pipeline.stages' (or --pipeline-parallel-size) = " +
                      std::to_string(stages) + " but the model has only " + std::to_string(count) +
                      " units to split (" + key + " \"" + method.to_string() +
                      "\"); every stage needs at least one unit, so use at most " +
                      std::to_string(count) + " stages or a deeper model");
  }
  switch (method.kind) {
    case PartitionKind::kUniform: return partition_uniform(count, stages);
    case PartitionKind::kParameters: {
      std::vector<double> weights;
      for (const LayerInfo& layer : layers) weights.push_back(static_cast<double>(layer.parameters));
      return partition_balanced(weights, stages);
    }
    case PartitionKind::kType: {
      const std::regex pattern = compile_type_regex(method.type_regex, key);
      std::vector<double> weights;
      std::vector<std::string> types;
      bool any = false;
      for (const LayerInfo& layer : layers) {
        const bool match = std::regex_search(layer.type, pattern);
        weights.push_back(match ? 1.0 : 0.0);
        any = any || match;
        if (std::find(types.begin(), types.end(), layer.type) == types.end()) {
          types.push_back(layer.type);
        }
      }
      if (!any) {
        std::string listed;
        for (const std::string& type : types) listed += (listed.empty() ? "" : ", ") + type;
        throw ConfigError("key '" + key + "' = \"" + method.to_string() +
                          "\" matches no unit of the model (its unit types: " + listed +
                          "); use a regex that matches one of them, e.g. \"type:transformer\"");
      }
      return partition_balanced(weights, stages);
    }
  }
  ZERO_CHECK(false, "unknown partition kind");
  return {};
}

int64_t stage_owner(const std::vector<int64_t>& parts, int64_t layer) {
  for (size_t s = 0; s + 1 < parts.size(); ++s) {
    if (parts[s] <= layer && layer < parts[s + 1]) return static_cast<int64_t>(s);
  }
  ZERO_CHECK(false, "unit " << layer << " is owned by no pipeline stage");
  return -1;
}

std::vector<int64_t> stages_holding(const std::vector<int64_t>& parts,
                                    const std::vector<int64_t>& layers) {
  std::vector<int64_t> stages;
  for (const int64_t layer : layers) stages.push_back(stage_owner(parts, layer));
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

}  // namespace zero::pipeline
