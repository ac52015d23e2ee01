// The raster canvas's font: printable ASCII drawn in a 5 x 9 pixel grid (7 rows above the
// baseline, 2 below for descenders) inside a 6 x 10 cell, scaled by whole pixels. Small and
// legible enough for tick labels, file names and titles, with nothing to install.
#pragma once
#include <array>
#include <cstdint>

namespace zero::tools::plot {

inline constexpr int kGlyphColumns = 5;
inline constexpr int kGlyphRows = 9;

// One row per byte, top row first; bit 4 is the leftmost column.
using Glyph = std::array<uint8_t, kGlyphRows>;

// The glyph for `c`; characters outside printable ASCII get '?'.
const Glyph& glyph_for(char c);

}  // namespace zero::tools::plot
