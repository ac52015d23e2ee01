// A Canvas that writes SVG 1.1 text: coordinates in the chart's logical units, text in a
// monospace font sized to the layout's text cell, one element per primitive.
#pragma once
#include <string>
#include <vector>

#include "tools/plot/canvas.h"

namespace zero::tools::plot {

class SvgCanvas : public Canvas {
 public:
  SvgCanvas(double width, double height);

  void fill_rect(double x, double y, double width, double height, Color color) override;
  void polyline(const std::vector<Point>& points, const Stroke& stroke,
                const std::string& tag) override;
  void dot(Point center, double radius, Color color, const std::string& tag) override;
  void text(double x, double top, const std::string& text, double scale, TextAnchor anchor,
            Color color) override;

  // The finished document.
  std::string document() const;

 private:
  double width_, height_;
  std::string body_;
};

}  // namespace zero::tools::plot
