#include "engine/flops_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <functional>

namespace zero::engine {
namespace {

constexpr int kLabelWidth = 62;  // DeepSpeed aligns the summary values in one column

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return buffer;
}

// "value / total" as a percentage, 0 when the total is 0 (a model without any measured time).
double percent(double value, double total) { return total > 0.0 ? 100.0 * value / total : 0.0; }

double rate(double flops, double seconds) { return seconds > 0.0 ? flops / seconds : 0.0; }

// A unit that does no counted work (the embedding's lookups) has no meaningful FLOP/s.
std::string rate_text(double flops, double seconds) {
  return flops > 0.0 ? format_flop_rate(rate(flops, seconds)) : "-";
}

std::string banner(const std::string& title) {
  const size_t width = 96;
  const size_t dashes = title.size() + 2 < width ? (width - title.size() - 2) / 2 : 2;
  return std::string(dashes, '-') + " " + title + " " + std::string(dashes, '-') + "\n";
}

std::string summary_line(const std::string& label, const std::string& value) {
  return printf_string("%-*s %s\n", kLabelWidth, (label + ":").c_str(), value.c_str());
}

// The factor DeepSpeed multiplies forward FLOPs by for the backward pass: 2, plus the fraction
// of the forward that activation checkpointing recomputes.
std::string factor_text(double factor) { return printf_string("%g", factor); }

std::string summary(const FlopsProfile& p, const config::FlopsProfilerConfig& config) {
  const double fwd = p.forward_seconds();
  const double bwd = p.backward_seconds();
  const double fwd_flops = p.forward_flops();
  const double bwd_factor = 2.0 + config.recompute_fwd_factor;
  const auto samples = static_cast<double>(p.micro_batch_size * p.gradient_accumulation_steps);
  const int data_parallel = p.world_size / std::max(1, p.sequence_parallel_size);
  const double global_samples = samples * static_cast<double>(data_parallel);
  std::string out;
  out += printf_string("Profile Summary at step %lld:\n", static_cast<long long>(p.profile_step));
  out += "Notations:\n"
         "number of parameters (params), number of multiply-accumulate operations (MACs),\n"
         "number of floating-point operations (FLOPs, 2 per MAC), FLOPs per second (FLOP/s),\n"
         "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
         "iter latency (the whole step: micro-batches, gradient reduction, optimizer step).\n"
         "FLOPs count matrix products only, the convention of the MFU figure (one formula table,\n"
         "model/model_flops.h): bwd FLOPs = 2 x fwd FLOPs. Latencies are wall clock with the\n"
         "backend synchronised, summed over the step's micro-batches on this rank (rank 0).\n\n";
  out += summary_line("world size", std::to_string(p.world_size));
  out += summary_line("data parallel size", std::to_string(data_parallel));
  if (p.sequence_parallel_size > 1) {
    out += summary_line("sequence parallel size", std::to_string(p.sequence_parallel_size));
  }
  out += summary_line("micro-batch size per rank", std::to_string(p.micro_batch_size));
  out += summary_line("gradient accumulation steps", std::to_string(p.gradient_accumulation_steps));
  out += summary_line("sequence length", std::to_string(p.seq_len));
  out += summary_line("params of model", format_count(p.params()));
  out += summary_line("fwd MACs per rank", format_count(p.forward_macs()));
  out += summary_line("fwd FLOPs per rank = 2 * fwd MACs", format_count(fwd_flops));
  out += summary_line("fwd+bwd FLOPs per rank = 3 * fwd FLOPs", format_count(p.training_flops()));
  out += summary_line("fwd latency", format_seconds(fwd));
  out += summary_line("bwd latency", format_seconds(bwd));
  out += summary_line("fwd FLOP/s per rank = fwd FLOPs / fwd latency",
                      format_flop_rate(rate(fwd_flops, fwd)));
  out += summary_line("bwd FLOP/s per rank = " + factor_text(bwd_factor) + " * fwd FLOPs / bwd latency",
                      format_flop_rate(rate(bwd_factor * fwd_flops, bwd)));
  out += summary_line("fwd+bwd FLOP/s per rank = " + factor_text(1.0 + bwd_factor) +
                          " * fwd FLOPs / (fwd+bwd latency)",
                      format_flop_rate(rate((1.0 + bwd_factor) * fwd_flops, fwd + bwd)));
  out += summary_line("iter latency", format_seconds(p.iter_seconds));
  out += summary_line("outside the units (reduction, optimizer, data)",
                      format_seconds(std::max(0.0, p.iter_seconds - fwd - bwd)));
  out += summary_line("achieved FLOP/s per rank = fwd+bwd FLOPs / iter latency",
                      format_flop_rate(rate(p.training_flops(), p.iter_seconds)));
  out += summary_line("samples/second (all ranks)",
                      printf_string("%.2f", rate(global_samples, p.iter_seconds)));
  out += summary_line("tokens/second (all ranks)",
                      printf_string("%.0f", rate(global_samples * static_cast<double>(p.seq_len),
                                                 p.iter_seconds)));
  return out;
}

std::string unit_table(const FlopsProfile& p) {
  const double total_flops = p.training_flops();
  const double total_seconds = p.forward_seconds() + p.backward_seconds();
  std::string out = banner("Per-unit Profile per rank");
  const char* row_format = "%-14s %10s %10s %12s %11s %11s %8s %9s %16s\n";
  out += printf_string(row_format, "unit", "params", "MACs", "FLOPs", "fwd latency",
                       "bwd latency", "% FLOPs", "% latency", "FLOP/s (fwd+bwd)");
  auto row = [&](const std::string& name, double params, double macs, double flops, double fwd,
                 double bwd) {
    out += printf_string(row_format, name.c_str(), format_count(params).c_str(),
                         format_count(macs).c_str(), format_count(flops).c_str(),
                         format_seconds(fwd).c_str(), format_seconds(bwd).c_str(),
                         printf_string("%.2f%%", percent(flops, total_flops)).c_str(),
                         printf_string("%.2f%%", percent(fwd + bwd, total_seconds)).c_str(),
                         rate_text(flops, fwd + bwd).c_str());
  };
  for (const UnitProfile& u : p.units) {
    row(u.flops.name, u.flops.params(), u.flops.forward_macs(), u.flops.training_flops(),
        u.forward_seconds, u.backward_seconds);
  }
  row("total", p.params(), p.forward_macs(), total_flops, p.forward_seconds(),
      p.backward_seconds());
  out += "MACs are per forward pass; FLOPs are forward + backward (3 x 2 x MACs).\n";
  return out;
}

// One entry of a top-modules list: a kind of module at some depth and its aggregate.
struct Aggregate {
  std::string name;
  double params = 0.0;
  double macs = 0.0;
  double seconds = 0.0;
};

// Modules of the same kind summed, in first-seen order (DeepSpeed aggregates by class name).
std::vector<Aggregate> aggregate_depth(const FlopsProfile& p, int depth) {
  std::vector<Aggregate> list;
  auto add = [&](const std::string& name, double params, double macs, double seconds) {
    auto it = std::find_if(list.begin(), list.end(), [&](const Aggregate& a) { return a.name == name; });
    if (it == list.end()) {
      list.push_back({name, 0.0, 0.0, 0.0});
      it = list.end() - 1;
    }
    it->params += params;
    it->macs += macs;
    it->seconds += seconds;
  };
  if (depth == 0) {
    add(p.model_name, p.params(), p.forward_macs(), p.forward_seconds());
  } else if (depth == 1) {
    for (const UnitProfile& u : p.units) {
      add(u.kind, u.flops.params(), u.flops.forward_macs(), u.forward_seconds);
    }
  } else {
    for (const UnitProfile& u : p.units) {
      for (const model::OpFlops& op : u.flops.ops) add(op.name, op.params, op.forward_macs, 0.0);
    }
  }
  return list;
}

std::string top_list(std::vector<Aggregate> list, int64_t k, double Aggregate::*field,
                     const std::function<std::string(double)>& format) {
  std::stable_sort(list.begin(), list.end(),
                   [&](const Aggregate& a, const Aggregate& b) { return a.*field > b.*field; });
  std::string out = "{";
  for (size_t i = 0; i < list.size() && static_cast<int64_t>(i) < k; ++i) {
    out += (i == 0 ? "'" : ", '") + list[i].name + "': '" + format(list[i].*field) + "'";
  }
  return out + "}";
}

int deepest(const config::FlopsProfilerConfig& config) {
  constexpr int kDeepest = 2;  // model, units, operations
  return config.module_depth < 0 ? kDeepest
                                 : static_cast<int>(std::min<int64_t>(config.module_depth, kDeepest));
}

std::string aggregated(const FlopsProfile& p, const config::FlopsProfilerConfig& config) {
  std::string out = banner("Aggregated Profile per rank");
  out += printf_string("Top %lld modules in terms of params, MACs or fwd latency at different model "
                       "depths:\n",
                       static_cast<long long>(config.top_modules));
  for (int depth = 0; depth <= deepest(config); ++depth) {
    const std::vector<Aggregate> list = aggregate_depth(p, depth);
    out += printf_string("depth %d:\n", depth);
    out += "    params      - " + top_list(list, config.top_modules, &Aggregate::params, format_count) + "\n";
    out += "    MACs        - " + top_list(list, config.top_modules, &Aggregate::macs, format_count) + "\n";
    if (depth < 2) {
      out += "    fwd latency - " +
             top_list(list, config.top_modules, &Aggregate::seconds, format_seconds) + "\n";
    } else {
      out += "    fwd latency - (not measured inside a unit: latency is timed per unit)\n";
    }
  }
  return out;
}

std::string detailed(const FlopsProfile& p, const config::FlopsProfilerConfig& config) {
  const double total_params = p.params();
  const double total_macs = p.forward_macs();
  const double total_fwd = p.forward_seconds();
  std::string out = banner("Detailed Profile per rank");
  out += "Each module profile is listed after its name in the following order:\n"
         "params, percentage of total params, MACs, percentage of total MACs, fwd latency,\n"
         "percentage of total fwd latency, fwd FLOP/s, bwd latency, bwd FLOP/s (2 x fwd FLOPs).\n"
         "Note: 1. The operations inside a unit (depth 2) come from the FLOP formula table; only\n"
         "units are timed, so operations show no latency.\n"
         "2. Element-wise work (norms, activations, softmax, loss, embedding lookups) counts no\n"
         "FLOPs, as in the MFU figure.\n\n";
  auto timed = [&](const std::string& indent, const std::string& name, double params, double macs,
                   double fwd, double bwd) {
    out += printf_string("%s%s: %s = %.2f%% Params, %s MACs = %.2f%% MACs, %s = %.2f%% latency, %s, "
                         "bwd %s, %s\n",
                         indent.c_str(), name.c_str(), format_count(params).c_str(),
                         percent(params, total_params), format_count(macs).c_str(),
                         percent(macs, total_macs), format_seconds(fwd).c_str(),
                         percent(fwd, total_fwd), rate_text(2.0 * macs, fwd).c_str(),
                         format_seconds(bwd).c_str(), rate_text(4.0 * macs, bwd).c_str());
  };
  const int depth = deepest(config);
  timed("", p.model_name, total_params, total_macs, total_fwd, p.backward_seconds());
  if (depth < 1) return out;
  for (const UnitProfile& u : p.units) {
    timed("  ", u.flops.name, u.flops.params(), u.flops.forward_macs(), u.forward_seconds,
          u.backward_seconds);
    if (depth < 2) continue;
    for (const model::OpFlops& op : u.flops.ops) {
      out += printf_string("    %s: %s = %.2f%% Params, %s MACs = %.2f%% MACs\n", op.name.c_str(),
                           format_count(op.params).c_str(), percent(op.params, total_params),
                           format_count(op.forward_macs).c_str(), percent(op.forward_macs, total_macs));
    }
  }
  return out;
}

}  // namespace

double FlopsProfile::params() const {
  double sum = 0.0;
  for (const UnitProfile& u : units) sum += u.flops.params();
  return sum;
}

double FlopsProfile::forward_macs() const {
  double sum = 0.0;
  for (const UnitProfile& u : units) sum += u.flops.forward_macs();
  return sum;
}

double FlopsProfile::forward_seconds() const {
  double sum = 0.0;
  for (const UnitProfile& u : units) sum += u.forward_seconds;
  return sum;
}

double FlopsProfile::backward_seconds() const {
  double sum = 0.0;
  for (const UnitProfile& u : units) sum += u.backward_seconds;
  return sum;
}

std::string format_count(double value) {
  const struct {
    double scale;
    const char* suffix;
  } units[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& u : units) {
    if (value >= u.scale) return printf_string("%.2f %s", value / u.scale, u.suffix);
  }
  return printf_string("%.4g", value);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return printf_string("%.2f s", seconds);
  if (seconds >= 1e-3) return printf_string("%.2f ms", seconds * 1e3);
  return printf_string("%.2f us", seconds * 1e6);
}

std::string format_flop_rate(double flops_per_second) {
  const struct {
    double scale;
    const char* prefix;
  } units[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& u : units) {
    if (flops_per_second >= u.scale) {
      return printf_string("%.2f %sFLOP/s", flops_per_second / u.scale, u.prefix);
    }
  }
  return printf_string("%.2f FLOP/s", flops_per_second);
}

std::string format_flops_report(const FlopsProfile& profile,
                                 const config::FlopsProfilerConfig& config) {
  std::string out = banner("DeepSpeed Flops Profiler (zero.cpp)");
  out += summary(profile, config);
  out += unit_table(profile);
  out += aggregated(profile, config);
  if (config.detailed) out += detailed(profile, config);
  out += std::string(96, '-') + "\n";
  return out;
}

}  // namespace zero::engine
