// What `zero plot` draws on: a small set of primitives that both outputs implement — the SVG
// writer exactly, the raster canvas in pixels for PNG. The chart is laid out once, in logical
// units (the SVG's user units), and drawn through this interface onto either.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::tools::plot {

struct Color {
  uint8_t r = 0, g = 0, b = 0;
};

struct Point {
  double x = 0.0, y = 0.0;
};

struct Stroke {
  Color color;
  double width = 1.0;
  bool dashed = false;
};

enum class TextAnchor { kStart, kMiddle, kEnd };

// Text is monospaced: every character is kTextAdvance x scale wide and kTextHeight x scale
// tall (the raster font's cell, bitmap_font.h), so the layout can measure it without a font.
inline constexpr double kTextAdvance = 6.0;
inline constexpr double kTextHeight = 10.0;

inline double text_width(const std::string& text, double scale) {
  return static_cast<double>(text.size()) * kTextAdvance * scale;
}

class Canvas {
 public:
  virtual ~Canvas() = default;

  virtual void fill_rect(double x, double y, double width, double height, Color color) = 0;
  // `tag` names what is drawn (the SVG's class attribute, so tests and scripts can find a run's
  // curve); the raster canvas ignores it.
  virtual void polyline(const std::vector<Point>& points, const Stroke& stroke,
                        const std::string& tag) = 0;
  virtual void dot(Point center, double radius, Color color, const std::string& tag) = 0;
  // `top` is the top of the text cell; `x` is its start, middle or end as `anchor` says.
  // `text` holds printable ASCII only (the chart replaces anything else).
  virtual void text(double x, double top, const std::string& text, double scale, TextAnchor anchor,
                    Color color) = 0;
};

}  // namespace zero::tools::plot
