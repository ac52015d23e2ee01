#include "tools/plot/raster_canvas.h"

#include <algorithm>
#include <cmath>

#include "tools/plot/bitmap_font.h"

namespace zero::tools::plot {
namespace {

double clamp01(double value) { return std::clamp(value, 0.0, 1.0); }

}  // namespace

RasterCanvas::RasterCanvas(double width, double height, double pixel_ratio, Color background)
    : width_(static_cast<int>(std::ceil(width * pixel_ratio))),
      height_(static_cast<int>(std::ceil(height * pixel_ratio))),
      ratio_(pixel_ratio),
      rgb_(static_cast<size_t>(width_) * static_cast<size_t>(height_) * 3),
      coverage_(static_cast<size_t>(width_) * static_cast<size_t>(height_), 0.0f) {
  fill_pixels(0, 0, width_, height_, background);
}

RasterCanvas::PixelBox RasterCanvas::clipped_box(double x0, double y0, double x1, double y1) const {
  auto clip = [](double value, int limit) {
    return static_cast<int>(std::clamp(value, 0.0, static_cast<double>(limit)));
  };
  return {clip(std::floor(x0), width_), clip(std::floor(y0), height_), clip(std::ceil(x1), width_),
          clip(std::ceil(y1), height_)};
}

void RasterCanvas::blend(int x, int y, Color color, double alpha) {
  uint8_t* pixel =
      &rgb_[(static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3];
  const uint8_t source[3] = {color.r, color.g, color.b};
  for (int c = 0; c < 3; ++c) {
    const double mixed = pixel[c] + (source[c] - pixel[c]) * alpha;
    pixel[c] = static_cast<uint8_t>(std::lround(std::clamp(mixed, 0.0, 255.0)));
  }
}

void RasterCanvas::fill_pixels(int x0, int y0, int x1, int y1, Color color) {
  for (int y = std::max(y0, 0); y < std::min(y1, height_); ++y) {
    for (int x = std::max(x0, 0); x < std::min(x1, width_); ++x) blend(x, y, color, 1.0);
  }
}

void RasterCanvas::fill_rect(double x, double y, double width, double height, Color color) {
  fill_pixels(static_cast<int>(std::lround(x * ratio_)), static_cast<int>(std::lround(y * ratio_)),
              static_cast<int>(std::lround((x + width) * ratio_)),
              static_cast<int>(std::lround((y + height) * ratio_)), color);
}

void RasterCanvas::cover_segment(Point a, Point b, double half_width, double start_length,
                                 bool dashed, double dash_on, double dash_period) {
  const double reach = half_width + 1.0;
  const PixelBox box = clipped_box(std::min(a.x, b.x) - reach, std::min(a.y, b.y) - reach,
                                   std::max(a.x, b.x) + reach, std::max(a.y, b.y) + reach);
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double length_squared = dx * dx + dy * dy;
  const double length = std::sqrt(length_squared);
  for (int y = box.y0; y < box.y1; ++y) {
    for (int x = box.x0; x < box.x1; ++x) {
      const double px = x + 0.5 - a.x, py = y + 0.5 - a.y;
      const double t = length_squared > 0 ? clamp01((px * dx + py * dy) / length_squared) : 0.0;
      if (dashed && std::fmod(start_length + t * length, dash_period) > dash_on) continue;
      const double distance = std::hypot(px - t * dx, py - t * dy);
      const float cover = static_cast<float>(clamp01(half_width + 0.5 - distance));
      float& slot =
          coverage_[static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)];
      slot = std::max(slot, cover);
    }
  }
  touched_.x0 = std::min(touched_.x0, box.x0);
  touched_.y0 = std::min(touched_.y0, box.y0);
  touched_.x1 = std::max(touched_.x1, box.x1);
  touched_.y1 = std::max(touched_.y1, box.y1);
}

void RasterCanvas::polyline(const std::vector<Point>& points, const Stroke& stroke,
                            const std::string& /*tag*/) {
  if (points.empty()) return;
  touched_ = {width_, height_, 0, 0};
  // Lines thinner than a pixel would vanish into antialiasing; draw them one pixel wide.
  const double half_width = std::max(stroke.width * ratio_, 1.0) / 2.0;
  const double dash_on = 4.0 * stroke.width * ratio_;
  const double dash_period = dash_on + 3.0 * stroke.width * ratio_;
  double length = 0.0;
  Point previous{points[0].x * ratio_, points[0].y * ratio_};
  if (points.size() == 1) cover_segment(previous, previous, half_width, 0.0, false, 0.0, 1.0);
  for (size_t i = 1; i < points.size(); ++i) {
    const Point next{points[i].x * ratio_, points[i].y * ratio_};
    cover_segment(previous, next, half_width, length, stroke.dashed, dash_on, dash_period);
    length += std::hypot(next.x - previous.x, next.y - previous.y);
    previous = next;
  }
  for (int y = touched_.y0; y < touched_.y1; ++y) {
    for (int x = touched_.x0; x < touched_.x1; ++x) {
      float& slot =
          coverage_[static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)];
      if (slot > 0.0f) blend(x, y, stroke.color, slot);
      slot = 0.0f;
    }
  }
}

void RasterCanvas::dot(Point center, double radius, Color color, const std::string& /*tag*/) {
  const double cx = center.x * ratio_, cy = center.y * ratio_, r = radius * ratio_;
  const PixelBox box = clipped_box(cx - r - 1, cy - r - 1, cx + r + 1, cy + r + 1);
  for (int y = box.y0; y < box.y1; ++y) {
    for (int x = box.x0; x < box.x1; ++x) {
      const double cover = clamp01(r + 0.5 - std::hypot(x + 0.5 - cx, y + 0.5 - cy));
      if (cover > 0.0) blend(x, y, color, cover);
    }
  }
}

void RasterCanvas::text(double x, double top, const std::string& text, double scale,
                        TextAnchor anchor, Color color) {
  // Whole pixels per font pixel keep the glyphs sharp.
  const int block = std::max(1, static_cast<int>(std::lround(scale * ratio_)));
  const int advance = static_cast<int>(kTextAdvance) * block;
  const int total = advance * static_cast<int>(text.size());
  int left = static_cast<int>(std::lround(x * ratio_));
  if (anchor == TextAnchor::kMiddle) left -= total / 2;
  if (anchor == TextAnchor::kEnd) left -= total;
  const int cell_top = static_cast<int>(std::lround(top * ratio_));
  for (size_t i = 0; i < text.size(); ++i) {
    const Glyph& glyph = glyph_for(text[i]);
    const int cell_left = left + static_cast<int>(i) * advance;
    for (int row = 0; row < kGlyphRows; ++row) {
      for (int column = 0; column < kGlyphColumns; ++column) {
        if (((glyph[static_cast<size_t>(row)] >> (kGlyphColumns - 1 - column)) & 1) == 0) continue;
        const int px = cell_left + column * block, py = cell_top + row * block;
        fill_pixels(px, py, px + block, py + block, color);
      }
    }
  }
}

}  // namespace zero::tools::plot
