#include "tools/plot/svg_canvas.h"

#include <cstdio>

namespace zero::tools::plot {
namespace {

// Two decimals are a hundredth of a pixel: finer than any screen, and short.
std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string hex(Color color) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", color.r, color.g, color.b);
  return buffer;
}

// Text and attribute values go through here: a log file's name may hold any of XML's
// special characters.
std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

SvgCanvas::SvgCanvas(double width, double height) : width_(width), height_(height) {}

void SvgCanvas::fill_rect(double x, double y, double width, double height, Color color) {
  body_ += "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(width) +
           "\" height=\"" + number(height) + "\" fill=\"" + hex(color) + "\"/>\n";
}

void SvgCanvas::polyline(const std::vector<Point>& points, const Stroke& stroke,
                         const std::string& tag) {
  body_ += "<polyline class=\"" + escaped(tag) + "\" fill=\"none\" stroke=\"" + hex(stroke.color) +
           "\" stroke-width=\"" + number(stroke.width) +
           "\" stroke-linejoin=\"round\" stroke-linecap=\"round\"";
  if (stroke.dashed) {
    body_ +=
        " stroke-dasharray=\"" + number(4 * stroke.width) + " " + number(3 * stroke.width) + "\"";
  }
  body_ += " points=\"";
  for (size_t i = 0; i < points.size(); ++i) {
    if (i > 0) body_ += ' ';
    body_ += number(points[i].x) + "," + number(points[i].y);
  }
  body_ += "\"/>\n";
}

void SvgCanvas::dot(Point center, double radius, Color color, const std::string& tag) {
  body_ += "<circle class=\"" + escaped(tag) + "\" cx=\"" + number(center.x) + "\" cy=\"" +
           number(center.y) + "\" r=\"" + number(radius) + "\" fill=\"" + hex(color) + "\"/>\n";
}

void SvgCanvas::text(double x, double top, const std::string& text, double scale, TextAnchor anchor,
                     Color color) {
  // The raster font's capitals are 7 of its 10 rows tall, sitting on row 7; a monospace font
  // at 10 x scale has about that cap height, so its baseline goes there too.
  const char* anchor_name = anchor == TextAnchor::kStart    ? "start"
                            : anchor == TextAnchor::kMiddle ? "middle"
                                                            : "end";
  body_ += "<text x=\"" + number(x) + "\" y=\"" + number(top + 7.0 * scale) +
           "\" font-family=\"DejaVu Sans Mono,Menlo,Consolas,monospace\" font-size=\"" +
           number(kTextHeight * scale) + "\" text-anchor=\"" + anchor_name + "\" fill=\"" +
           hex(color) + "\" xml:space=\"preserve\">" + escaped(text) + "</text>\n";
}

std::string SvgCanvas::document() const {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" +
         number(width_) + "\" height=\"" + number(height_) + "\" viewBox=\"0 0 " + number(width_) +
         " " + number(height_) + "\">\n" + body_ + "</svg>\n";
}

}  // namespace zero::tools::plot
