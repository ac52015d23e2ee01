#include "tools/plot/run_log.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"

namespace zero::tools::plot {
namespace {

using nlohmann::json;

// Larger magnitudes are no loss or learning rate, and would overflow the axis arithmetic.
constexpr double kLargestPlottable = 1e300;
// Steps are counted in doubles when drawn; beyond 2^53 they would no longer be exact.
constexpr int64_t kLargestStep = int64_t{1} << 53;
const char* const kWhatLine = "a --log-json line";
const char* const kIsThisALog =
    "is this a `zero train --log-json` file? Each line must be one JSON object with \"step\" and "
    "\"loss\" (or \"eval_loss\")";

// Python's json module writes NaN, Infinity and -Infinity bare, though JSON has no such words.
// Outside strings they become null, which is drawn as a gap like any non-finite value.
std::string with_nonfinite_as_null(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) {
        out += line[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const std::string_view word : {"-Infinity", "Infinity", "NaN"}) {
      if (line.substr(i, word.size()) == word) {
        out += "null";
        i += word.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

// The value under `key`: nullopt when absent, NaN when null or too large to draw.
std::optional<double> read_number(const json& line, const char* key, const std::string& where) {
  const auto found = line.find(key);
  if (found == line.end()) return std::nullopt;
  if (found->is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!found->is_number()) {
    throw FileError(where + ": \"" + key + "\" is " + io::json_excerpt(*found) +
                    ", not a number; " + kIsThisALog);
  }
  const double value = found->get<double>();
  if (!std::isfinite(value) || std::fabs(value) > kLargestPlottable) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return value;
}

int64_t read_step(const json& line, const std::string& where) {
  const auto found = line.find("step");
  if (found == line.end()) {
    throw FileError(where + ": the line has no \"step\"; " + kIsThisALog);
  }
  const bool whole =
      found->is_number_unsigned() || (found->is_number_integer() && found->get<int64_t>() >= 0);
  if (!whole || found->get<uint64_t>() > static_cast<uint64_t>(kLargestStep)) {
    throw FileError(where + ": \"step\" is " + io::json_excerpt(*found) +
                    ", not a whole number from 0 to 2^53; " + kIsThisALog);
  }
  return found->get<int64_t>();
}

// Appends a sample; a step at or before the series' last one starts over from that step (the
// later run is the one that counts). Returns whether it did.
bool append(std::vector<Sample>& series, int64_t step, double value) {
  bool went_back = false;
  if (!series.empty() && step <= series.back().step) {
    const auto first_replaced =
        std::lower_bound(series.begin(), series.end(), step,
                         [](const Sample& sample, int64_t wanted) { return sample.step < wanted; });
    series.erase(first_replaced, series.end());
    went_back = true;
  }
  series.push_back({step, value});
  return went_back;
}

int64_t count_gaps(const std::vector<Sample>& series) {
  return std::count_if(series.begin(), series.end(),
                       [](const Sample& sample) { return std::isnan(sample.value); });
}

}  // namespace

RunLog parse_run_log(std::string_view text, const std::string& path) {
  RunLog log;
  log.path = path;
  int64_t restarts = 0;
  std::string first_restart;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    const size_t newline = text.find('\n', start);
    const bool has_newline = newline != std::string_view::npos;
    std::string_view line =
        text.substr(start, has_newline ? newline - start : std::string_view::npos);
    start = has_newline ? newline + 1 : text.size();
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(line_number);
    json parsed;
    try {
      // A key twice in one line (nlohmann would keep the last quietly) is a corrupt line.
      parsed = io::parse_json_bounded(with_nonfinite_as_null(line), where, kWhatLine,
                                      io::kMaxJsonDepth, /*reject_duplicate_keys=*/true);
    } catch (const FileError&) {
      if (has_newline) throw;
      log.notes.push_back(where +
                          ": the last line is incomplete (the run was stopped while "
                          "writing it); skipped");
      break;
    }
    if (!parsed.is_object()) {
      throw FileError(where + ": the line is " + io::json_excerpt(parsed) +
                      ", not a JSON object; " + kIsThisALog);
    }
    const int64_t step = read_step(parsed, where);
    const std::optional<double> loss = read_number(parsed, "loss", where);
    const std::optional<double> eval_loss = read_number(parsed, "eval_loss", where);
    if (!loss && !eval_loss) {
      throw FileError(where + ": the line has neither \"loss\" nor \"eval_loss\"; " + kIsThisALog);
    }
    bool went_back = false;
    if (loss) went_back |= append(log.loss, step, *loss);
    if (eval_loss) went_back |= append(log.eval_loss, step, *eval_loss);
    if (const auto lr = read_number(parsed, "lr", where)) went_back |= append(log.lr, step, *lr);
    if (const auto scale = read_number(parsed, "loss_scale", where)) {
      // Zero or negative cannot go on the log axis: a gap, like a non-finite value.
      went_back |= append(log.loss_scale, step, *scale > 0 ? *scale : std::nan(""));
    }
    if (went_back && restarts++ == 0) {
      first_restart = "line " + std::to_string(line_number) + ", step " + std::to_string(step);
    }
  }
  if (log.loss.empty() && log.eval_loss.empty()) {
    throw FileError(path +
                    ": the log holds no steps; give the file `zero train --log-json` "
                    "wrote (it gets a line at every printed step, steps_per_print)");
  }
  if (restarts > 0) {
    log.notes.push_back(path + ": the steps go back " + std::to_string(restarts) +
                        (restarts == 1 ? " time" : " times") + " (first at " + first_restart +
                        "), as when a resumed or re-run training appends to the same log; "
                        "the later lines replace the earlier ones from there");
  }
  log.nonfinite_losses = count_gaps(log.loss) + count_gaps(log.eval_loss);
  if (log.nonfinite_losses > 0) {
    log.notes.push_back(path + ": " + std::to_string(log.nonfinite_losses) +
                        " non-finite loss value(s) (NaN, Infinity or null) drawn as gaps");
  }
  return log;
}

RunLog read_run_log(const std::string& path) {
  const std::string text = io::read_text_file(path, "the training log", kMaxTrainingLogBytes);
  return parse_run_log(text, path);
}

}  // namespace zero::tools::plot
