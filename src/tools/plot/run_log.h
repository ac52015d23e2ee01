// Reading the training logs `zero plot` draws: `zero train --log-json` files, one JSON object
// per line. These are outside input (a log may come from another machine, another tool, or a
// run killed mid-write), so each line is parsed strictly and every problem names the file, the
// line and the fix.
//
// A line needs "step" (a whole number >= 0) and at least one of "loss" and "eval_loss"; "lr"
// and "loss_scale" are read when present, other keys are ignored. A value of null, NaN or
// Infinity (Python's json writes the last two) is drawn as a gap and counted. When a series'
// step goes back (a resumed or re-run training appended to the same file), the later lines
// replace the earlier ones from that step on, and a note says so. A last line with no newline
// that does not parse is a run stopped while writing it: skipped with a note. Any other bad
// line is an error.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zero::tools::plot {

// A `--log-json` line is about 300 bytes: this is some three million logged steps.
inline constexpr uint64_t kMaxTrainingLogBytes = 1ull << 30;

struct Sample {
  int64_t step;
  double value;  // NaN: a gap in the curve
};

struct RunLog {
  std::string path;
  std::vector<Sample> loss, eval_loss, lr, loss_scale;
  int64_t nonfinite_losses = 0;    // train and eval losses drawn as gaps
  std::vector<std::string> notes;  // what the reader skipped or replaced, for the user
};

// Reads and checks `path`. Throws FileError.
RunLog read_run_log(const std::string& path);

// The same for a log already in memory; `path` names it in messages.
RunLog parse_run_log(std::string_view text, const std::string& path);

}  // namespace zero::tools::plot
