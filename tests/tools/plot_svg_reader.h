// Reading back what `zero plot` wrote into an SVG, for its tests: the polylines of one class
// (how many, and how many points each) and the panels' frames.
#pragma once
#include <sstream>
#include <string>
#include <vector>

namespace zero::testing {

// The value of attribute `name` in the element starting at `at`, or "".
inline std::string svg_attribute(const std::string& svg, size_t at, const std::string& name) {
  const size_t end = svg.find('>', at);
  const size_t key = svg.find(" " + name + "=\"", at);
  if (key == std::string::npos || key > end) return "";
  const size_t start = key + name.size() + 3;
  return svg.substr(start, svg.find('"', start) - start);
}

// The point lists of every <polyline class="`cls`">, in document order.
inline std::vector<std::vector<std::pair<double, double>>> svg_polylines(const std::string& svg,
                                                                         const std::string& cls) {
  std::vector<std::vector<std::pair<double, double>>> found;
  const std::string opening = "<polyline class=\"" + cls + "\"";
  for (size_t at = svg.find(opening); at != std::string::npos; at = svg.find(opening, at + 1)) {
    std::vector<std::pair<double, double>> points;
    std::istringstream in(svg_attribute(svg, at, "points"));
    double x = 0, y = 0;
    char comma = 0;
    while (in >> x >> comma >> y) points.emplace_back(x, y);
    found.push_back(points);
  }
  return found;
}

inline size_t svg_count(const std::string& svg, const std::string& text) {
  size_t count = 0;
  for (size_t at = svg.find(text); at != std::string::npos; at = svg.find(text, at + 1)) ++count;
  return count;
}

struct SvgBox {
  double left, top, right, bottom;
};

// Each panel's frame (a closed polyline drawn clockwise from its top-left corner).
inline std::vector<SvgBox> svg_frames(const std::string& svg) {
  std::vector<SvgBox> boxes;
  for (const auto& points : svg_polylines(svg, "frame")) {
    if (points.size() == 5)
      boxes.push_back({points[0].first, points[0].second, points[2].first, points[2].second});
  }
  return boxes;
}

}  // namespace zero::testing
