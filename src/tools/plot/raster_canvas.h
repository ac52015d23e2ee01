// A Canvas that draws into an RGB pixel buffer (for PNG). Logical units are multiplied by
// `pixel_ratio`, so a chart laid out for 960 units wide becomes a sharper 1920-pixel image at
// ratio 2. Lines and dots are antialiased (coverage from the distance to the exact shape); text
// uses the built-in bitmap font at whole-pixel scales, so it stays crisp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/plot/canvas.h"

namespace zero::tools::plot {

class RasterCanvas : public Canvas {
 public:
  RasterCanvas(double width, double height, double pixel_ratio, Color background);

  void fill_rect(double x, double y, double width, double height, Color color) override;
  void polyline(const std::vector<Point>& points, const Stroke& stroke,
                const std::string& tag) override;
  void dot(Point center, double radius, Color color, const std::string& tag) override;
  void text(double x, double top, const std::string& text, double scale, TextAnchor anchor,
            Color color) override;

  int pixel_width() const { return width_; }
  int pixel_height() const { return height_; }
  // Rows top to bottom, 3 bytes (R, G, B) per pixel.
  const std::vector<uint8_t>& rgb() const { return rgb_; }

 private:
  struct PixelBox {
    int x0, y0, x1, y1;  // half-open
  };
  PixelBox clipped_box(double x0, double y0, double x1, double y1) const;
  void blend(int x, int y, Color color, double alpha);
  void fill_pixels(int x0, int y0, int x1, int y1, Color color);
  // Spreads one segment's coverage into coverage_ (taking the maximum, so the joints of a
  // polyline are not painted twice). `start_length` is the polyline's length before this
  // segment, which places the dashes.
  void cover_segment(Point a, Point b, double half_width, double start_length, bool dashed,
                     double dash_on, double dash_period);

  int width_, height_;
  double ratio_;
  std::vector<uint8_t> rgb_;
  std::vector<float> coverage_;  // scratch for one polyline, all zero between calls
  PixelBox touched_{0, 0, 0, 0};
};

}  // namespace zero::tools::plot
