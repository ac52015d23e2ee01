// The layout of `zero plot`'s picture, drawn onto any Canvas: a title, a legend naming each
// log file in its colour (with its last loss), then panels sharing one step axis — loss (train
// solid, eval dashed with dots), learning rate when logged, loss scale on a log2 axis when it
// ever differs from 1 (fp16's dynamic scaler; bf16 and fp32 runs log a constant 1) — and the
// reader's notes at the bottom.
#pragma once
#include <string>
#include <vector>

#include "tools/plot/axis.h"
#include "tools/plot/canvas.h"
#include "tools/plot/run_log.h"

namespace zero::tools::plot {

enum class Quantity { kLoss, kEvalLoss, kLearningRate, kLossScale };

// The name a quantity goes by in the logs and in the SVG's class attributes.
const char* quantity_key(Quantity quantity);
const std::vector<Sample>& samples_of(const RunLog& run, Quantity quantity);

class Chart {
 public:
  // `runs` must outlive the chart. An empty `title` gets one naming the files.
  Chart(const std::vector<RunLog>& runs, const std::string& title);

  double width() const;
  double height() const { return height_; }
  void draw(Canvas& canvas) const;

 private:
  struct Panel {
    std::string title;
    std::vector<Quantity> quantities;
    Axis y;
    double top = 0.0;
    double height = 0.0;
  };

  // Where a step and a panel's value are drawn.
  double x_of(double step) const;
  double y_of(const Panel& panel, double value) const;
  void draw_legend(Canvas& canvas) const;
  void draw_panel(Canvas& canvas, const Panel& panel, bool is_bottom) const;
  void draw_series(Canvas& canvas, const Panel& panel, size_t run, Quantity quantity) const;

  const std::vector<RunLog>& runs_;
  std::string title_;
  std::vector<std::string> legend_labels_;
  bool has_eval_ = false;
  std::vector<std::string> note_lines_;
  Axis x_;
  std::vector<Panel> panels_;
  double plot_left_ = 0.0;
  double legend_top_ = 0.0;
  double notes_top_ = 0.0;
  double height_ = 0.0;
};

}  // namespace zero::tools::plot
