// Encoding an RGB image as PNG (ISO/IEC 15948): signature, IHDR, one zlib-compressed IDAT,
// IEND. 8-bit truecolour, no interlace; each row is filtered with "Sub", which turns the long
// runs of background and the flat colours of a chart into zeros that deflate packs tightly.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace zero::tools::plot {

// `rgb` holds height rows of width x 3 bytes. Returns the file's bytes.
std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace zero::tools::plot
