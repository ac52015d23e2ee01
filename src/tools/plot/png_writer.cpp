#include "tools/plot/png_writer.h"

#include <zlib.h>

#include "core/check.h"
#include "core/error.h"

namespace zero::tools::plot {
namespace {

void put_u32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((value >> shift) & 0xff);
}

// A chunk: length, type, data, and the CRC-32 of type and data (zlib's crc32 is the one the
// PNG specification gives).
void put_chunk(std::string& out, const char type[4], const std::string& data) {
  put_u32(out, static_cast<uint32_t>(data.size()));
  const size_t type_at = out.size();
  out.append(type, 4);
  out += data;
  const auto* typed = reinterpret_cast<const Bytef*>(out.data() + type_at);
  put_u32(out, static_cast<uint32_t>(crc32(0L, typed, static_cast<uInt>(4 + data.size()))));
}

// Each row prefixed by its filter byte (1: Sub, each byte minus the byte one pixel left).
std::string filtered_rows(int width, int height, const std::vector<uint8_t>& rgb) {
  const size_t stride = static_cast<size_t>(width) * 3;
  std::string out;
  out.reserve((stride + 1) * static_cast<size_t>(height));
  for (size_t y = 0; y < static_cast<size_t>(height); ++y) {
    const uint8_t* row = rgb.data() + y * stride;
    out += static_cast<char>(1);
    for (size_t i = 0; i < stride; ++i) {
      const uint8_t left = i >= 3 ? row[i - 3] : 0;
      out += static_cast<char>(static_cast<uint8_t>(row[i] - left));
    }
  }
  return out;
}

}  // namespace

std::string encode_png(int width, int height, const std::vector<uint8_t>& rgb) {
  ZERO_CHECK(width > 0 && height > 0 &&
             rgb.size() == static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  std::string header;
  put_u32(header, static_cast<uint32_t>(width));
  put_u32(header, static_cast<uint32_t>(height));
  header += static_cast<char>(8);  // bits per channel
  header += static_cast<char>(2);  // colour type: truecolour (RGB)
  header += static_cast<char>(0);  // compression: deflate
  header += static_cast<char>(0);  // filtering: adaptive, per-row filter byte
  header += static_cast<char>(0);  // no interlace

  const std::string raw = filtered_rows(width, height, rgb);
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::string packed(packed_size, '\0');
  const int status = compress2(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
                               reinterpret_cast<const Bytef*>(raw.data()),
                               static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  if (status != Z_OK) {
    throw Error("compressing the PNG image failed (zlib status " + std::to_string(status) +
                "); write an SVG instead (-o FILE.svg)");
  }
  packed.resize(packed_size);

  std::string png = "\x89PNG\r\n\x1a\n";
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", packed);
  put_chunk(png, "IEND", "");
  return png;
}

}  // namespace zero::tools::plot
