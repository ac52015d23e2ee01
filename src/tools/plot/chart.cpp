#include "tools/plot/chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace zero::tools::plot {
namespace {

// Logical units (SVG user units; the PNG doubles them).
constexpr double kWidth = 960;
constexpr double kMargin = 24;
constexpr double kTitleScale = 2;
constexpr double kLabelScale = 1;
constexpr double kLegendRow = 18;
constexpr double kPanelTitleSpace = 18;
constexpr double kPanelSpacing = 16;
constexpr double kBottomAxisSpace = 40;  // x tick labels and "step"
constexpr double kNoteRow = 14;
constexpr double kLossPanelHeight = 300;
constexpr double kSmallPanelHeight = 130;
constexpr double kCurveWidth = 1.6;
constexpr double kEvalDotRadius = 2.4;
constexpr double kLonePointRadius = 2.6;  // a stretch of one point between gaps
// The axes' ends sit this far inside the frame, so a curve at an end is not hidden by it.
constexpr double kInset = 6;
constexpr size_t kMaxNoteLines = 12;

constexpr Color kBackground{255, 255, 255};
constexpr Color kInk{26, 26, 26};
constexpr Color kSoftInk{90, 90, 90};
constexpr Color kGrid{232, 232, 232};
constexpr Color kFrame{160, 160, 160};
// Okabe and Ito's colour-blind-safe palette (yellow left out: too faint on white).
constexpr Color kRunColors[] = {{0, 114, 178}, {213, 94, 0},   {0, 158, 115}, {204, 121, 167},
                                {230, 159, 0}, {86, 180, 233}, {0, 0, 0}};

Color run_color(size_t run) { return kRunColors[run % std::size(kRunColors)]; }

// Bytes the bitmap font cannot draw (control characters, UTF-8) become '?', in both outputs.
std::string printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (c < ' ' || c > '~') c = '?';
  }
  return out;
}

// Long paths keep their end, where the file name is.
std::string shortened(const std::string& text, size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return "..." + text.substr(text.size() - (max_chars - 3));
}

size_t chars_that_fit(double width, double scale) {
  return static_cast<size_t>(width / (kTextAdvance * scale));
}

// Splits at spaces into lines of at most `max_chars` (a longer word is cut).
std::vector<std::string> wrapped(const std::string& text, size_t max_chars) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (rest.size() > max_chars) {
    size_t cut = rest.rfind(' ', max_chars);
    if (cut == std::string::npos || cut == 0) cut = max_chars;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(cut);
    if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
  }
  if (!rest.empty()) lines.push_back(rest);
  return lines;
}

std::string compact(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", value);
  return buffer;
}

// The last finite sample, as "2.851 (step 600)".
std::string last_value(const std::vector<Sample>& samples) {
  for (auto it = samples.rbegin(); it != samples.rend(); ++it) {
    if (std::isfinite(it->value))
      return compact(it->value) + " (step " + std::to_string(it->step) + ")";
  }
  return "(no finite value)";
}

struct Range {
  double low = std::numeric_limits<double>::infinity();
  double high = -std::numeric_limits<double>::infinity();
  bool empty() const { return low > high; }
  void add(double value) {
    low = std::min(low, value);
    high = std::max(high, value);
  }
};

}  // namespace

const char* quantity_key(Quantity quantity) {
  switch (quantity) {
    case Quantity::kLoss: return "loss";
    case Quantity::kEvalLoss: return "eval_loss";
    case Quantity::kLearningRate: return "lr";
    case Quantity::kLossScale: return "loss_scale";
  }
  return "?";
}

const std::vector<Sample>& samples_of(const RunLog& run, Quantity quantity) {
  switch (quantity) {
    case Quantity::kLoss: return run.loss;
    case Quantity::kEvalLoss: return run.eval_loss;
    case Quantity::kLearningRate: return run.lr;
    case Quantity::kLossScale: return run.loss_scale;
  }
  return run.loss;
}

Chart::Chart(const std::vector<RunLog>& runs, const std::string& title) : runs_(runs) {
  const double inner_width = kWidth - 2 * kMargin;
  std::string names;
  // The title names the files alone; the legend gives their paths.
  for (const RunLog& run : runs) {
    names += (names.empty() ? "" : ", ") + run.path.substr(run.path.rfind('/') + 1);
  }
  title_ = shortened(printable(title.empty() ? "Training curves: " + names : title),
                     chars_that_fit(inner_width, kTitleScale));

  Range steps;
  for (const RunLog& run : runs) {
    has_eval_ = has_eval_ || !run.eval_loss.empty();
    for (const Quantity q :
         {Quantity::kLoss, Quantity::kEvalLoss, Quantity::kLearningRate, Quantity::kLossScale}) {
      for (const Sample& sample : samples_of(run, q)) steps.add(static_cast<double>(sample.step));
    }
    std::string label = run.loss.empty() ? "" : "last loss " + last_value(run.loss);
    if (!run.eval_loss.empty()) {
      label += (label.empty() ? "last eval loss " : ", eval ") + last_value(run.eval_loss);
    }
    // The legend's swatch takes 36 units before the text.
    const size_t room = chars_that_fit(inner_width - 36, kLabelScale);
    const size_t path_room = room > label.size() + 8 ? room - label.size() - 3 : 16;
    legend_labels_.push_back(shortened(printable(run.path), path_room) + " - " + label);
  }
  x_ = steps.empty() ? Axis::linear(0, 1, 9, true) : Axis::linear(steps.low, steps.high, 9, true);

  auto range_of = [&](std::initializer_list<Quantity> quantities) {
    Range range;
    for (const RunLog& run : runs) {
      for (const Quantity q : quantities) {
        for (const Sample& sample : samples_of(run, q)) {
          if (std::isfinite(sample.value)) range.add(sample.value);
        }
      }
    }
    return range;
  };
  const Range loss = range_of({Quantity::kLoss, Quantity::kEvalLoss});
  panels_.push_back({has_eval_ ? "loss (train solid, eval dashed)" : "loss",
                     {Quantity::kLoss, Quantity::kEvalLoss},
                     loss.empty() ? Axis::linear(0, 1, 7) : Axis::linear(loss.low, loss.high, 7),
                     0.0,
                     kLossPanelHeight});
  const Range lr = range_of({Quantity::kLearningRate});
  if (!lr.empty()) {
    panels_.push_back({"learning rate",
                       {Quantity::kLearningRate},
                       Axis::linear(std::min(lr.low, 0.0), lr.high, 4),
                       0.0,
                       kSmallPanelHeight});
  }
  const Range scale = range_of({Quantity::kLossScale});
  if (!scale.empty() && (scale.low != 1.0 || scale.high != 1.0)) {
    panels_.push_back({"loss scale (log2 axis)",
                       {Quantity::kLossScale},
                       Axis::log2(scale.low, scale.high, 5),
                       0.0,
                       kSmallPanelHeight});
  }

  double widest_tick = 0.0;
  for (const Panel& panel : panels_) {
    for (const Tick& tick : panel.y.ticks()) {
      widest_tick = std::max(widest_tick, text_width(tick.label, kLabelScale));
    }
  }
  plot_left_ = kMargin + widest_tick + 8;

  for (const RunLog& run : runs) {
    for (const std::string& note : run.notes) {
      for (std::string& line :
           wrapped("note: " + printable(note), chars_that_fit(inner_width, kLabelScale))) {
        note_lines_.push_back(std::move(line));
      }
    }
  }
  if (note_lines_.size() > kMaxNoteLines) {
    note_lines_.resize(kMaxNoteLines - 1);
    note_lines_.push_back("... more notes were printed when the chart was made");
  }

  double cursor = kMargin + kTextHeight * kTitleScale + 14;
  legend_top_ = cursor;
  cursor += kLegendRow * static_cast<double>(runs.size() + (has_eval_ ? 1 : 0)) + 6;
  for (size_t i = 0; i < panels_.size(); ++i) {
    cursor += kPanelTitleSpace;
    panels_[i].top = cursor;
    cursor += panels_[i].height + (i + 1 == panels_.size() ? kBottomAxisSpace : kPanelSpacing);
  }
  notes_top_ = cursor + 4;
  cursor += kNoteRow * static_cast<double>(note_lines_.size());
  height_ = std::ceil(cursor + kMargin);
}

double Chart::width() const { return kWidth; }

double Chart::x_of(double step) const {
  const double left = plot_left_ + kInset, right = kWidth - kMargin - kInset;
  return left + x_.fraction(step) * (right - left);
}

double Chart::y_of(const Panel& panel, double value) const {
  const double bottom = panel.top + panel.height - kInset;
  return bottom - panel.y.fraction(value) * (panel.height - 2 * kInset);
}

void Chart::draw(Canvas& canvas) const {
  canvas.fill_rect(0, 0, kWidth, height_, kBackground);
  canvas.text(kMargin, kMargin, title_, kTitleScale, TextAnchor::kStart, kInk);
  draw_legend(canvas);
  for (size_t i = 0; i < panels_.size(); ++i)
    draw_panel(canvas, panels_[i], i + 1 == panels_.size());
  for (size_t i = 0; i < note_lines_.size(); ++i) {
    canvas.text(kMargin, notes_top_ + kNoteRow * static_cast<double>(i), note_lines_[i],
                kLabelScale, TextAnchor::kStart, kSoftInk);
  }
}

void Chart::draw_legend(Canvas& canvas) const {
  auto swatch = [&](double row_top, Color color, bool dashed, const std::string& tag) {
    const double y = row_top + 3.5 * kLabelScale;
    canvas.polyline({{kMargin, y}, {kMargin + 28, y}}, {color, kCurveWidth * 1.5, dashed}, tag);
    if (dashed) canvas.dot({kMargin + 14, y}, kEvalDotRadius, color, tag);
  };
  for (size_t run = 0; run < legend_labels_.size(); ++run) {
    const double top = legend_top_ + kLegendRow * static_cast<double>(run);
    swatch(top, run_color(run), false, "legend run" + std::to_string(run));
    canvas.text(kMargin + 36, top, legend_labels_[run], kLabelScale, TextAnchor::kStart, kInk);
  }
  if (has_eval_) {
    const double top = legend_top_ + kLegendRow * static_cast<double>(runs_.size());
    swatch(top, kSoftInk, true, "legend eval");
    canvas.text(kMargin + 36, top, "eval loss (same colour as its run)", kLabelScale,
                TextAnchor::kStart, kSoftInk);
  }
}

void Chart::draw_panel(Canvas& canvas, const Panel& panel, bool is_bottom) const {
  const double left = plot_left_, right = kWidth - kMargin;
  const double top = panel.top, bottom = panel.top + panel.height;
  canvas.text(left, top - kPanelTitleSpace + 2, panel.title, kLabelScale, TextAnchor::kStart, kInk);
  // Grid lines on whole units, so they land on pixel edges in the PNG and stay sharp.
  for (const Tick& tick : panel.y.ticks()) {
    const double y = std::round(y_of(panel, tick.value));
    canvas.polyline({{left, y}, {right, y}}, {kGrid, 1.0, false}, "grid");
    canvas.text(left - 6, y - 3.5 * kLabelScale, tick.label, kLabelScale, TextAnchor::kEnd,
                kSoftInk);
  }
  for (const Tick& tick : x_.ticks()) {
    const double x = std::round(x_of(tick.value));
    canvas.polyline({{x, top}, {x, bottom}}, {kGrid, 1.0, false}, "grid");
    if (is_bottom)
      canvas.text(x, bottom + 6, tick.label, kLabelScale, TextAnchor::kMiddle, kSoftInk);
  }
  canvas.polyline({{left, top}, {right, top}, {right, bottom}, {left, bottom}, {left, top}},
                  {kFrame, 1.0, false}, "frame");
  if (is_bottom)
    canvas.text((left + right) / 2, bottom + 22, "step", kLabelScale, TextAnchor::kMiddle, kInk);
  for (size_t run = 0; run < runs_.size(); ++run) {
    for (const Quantity quantity : panel.quantities) draw_series(canvas, panel, run, quantity);
  }
}

void Chart::draw_series(Canvas& canvas, const Panel& panel, size_t run, Quantity quantity) const {
  const bool eval = quantity == Quantity::kEvalLoss;
  const Color color = run_color(run);
  const std::string tag =
      std::string("series ") + quantity_key(quantity) + " run" + std::to_string(run);
  // A non-finite value ends one stretch of line and the next finite one starts another.
  std::vector<Point> stretch;
  auto flush = [&] {
    if (stretch.size() == 1) canvas.dot(stretch[0], kLonePointRadius, color, tag);
    if (stretch.size() >= 2) canvas.polyline(stretch, {color, kCurveWidth, eval}, tag);
    stretch.clear();
  };
  for (const Sample& sample : samples_of(runs_[run], quantity)) {
    if (!std::isfinite(sample.value)) {
      flush();
      continue;
    }
    const Point point{x_of(static_cast<double>(sample.step)), y_of(panel, sample.value)};
    stretch.push_back(point);
    if (eval)
      canvas.dot(point, kEvalDotRadius, color, "marker eval_loss run" + std::to_string(run));
  }
  flush();
}

}  // namespace zero::tools::plot
