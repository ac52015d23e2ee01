// A small PNG reader for `zero plot`'s tests, written from the PNG specification independently
// of the writer: checks the signature, every chunk's CRC-32 (computed here, bit by bit), the
// IHDR fields the writer promises (8-bit RGB, no interlace), inflates the IDAT stream with
// zlib (a build dependency, linked into the tests) and undoes the row filters. Returns nullopt with `why` set when the file is not a valid PNG of that kind.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace zero::testing {

struct DecodedPng {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // rows top to bottom, 3 bytes per pixel

  const uint8_t* at(int x, int y) const {
    return &rgb[(static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3];
  }
};

inline uint32_t png_crc32(const uint8_t* data, size_t size) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? 0xedb88320u : 0u);
  }
  return crc ^ 0xffffffffu;
}

inline uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

inline uint8_t paeth(int left, int up, int up_left) {
  const int estimate = left + up - up_left;
  const int to_left = std::abs(estimate - left), to_up = std::abs(estimate - up),
            to_up_left = std::abs(estimate - up_left);
  if (to_left <= to_up && to_left <= to_up_left) return static_cast<uint8_t>(left);
  return static_cast<uint8_t>(to_up <= to_up_left ? up : up_left);
}

inline std::optional<DecodedPng> decode_png(const std::string& file, std::string& why) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(file.data());
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (file.size() < 8 ||
      std::string(file, 0, 8) != std::string(reinterpret_cast<const char*>(kSignature), 8)) {
    why = "no PNG signature";
    return std::nullopt;
  }
  DecodedPng image;
  std::string compressed;
  bool ended = false;
  size_t pos = 8;
  while (pos + 12 <= file.size()) {
    const uint32_t length = big_endian_u32(bytes + pos);
    if (pos + 12 + length > file.size()) break;
    const std::string type(file, pos + 4, 4);
    if (png_crc32(bytes + pos + 4, 4 + length) != big_endian_u32(bytes + pos + 8 + length)) {
      why = "bad CRC in chunk " + type;
      return std::nullopt;
    }
    const uint8_t* data = bytes + pos + 8;
    if (type == "IHDR") {
      if (length != 13 || data[8] != 8 || data[9] != 2 || data[10] != 0 || data[11] != 0 ||
          data[12] != 0) {
        why = "IHDR is not 8-bit RGB, deflate, no interlace";
        return std::nullopt;
      }
      image.width = static_cast<int>(big_endian_u32(data));
      image.height = static_cast<int>(big_endian_u32(data + 4));
    } else if (type == "IDAT") {
      compressed.append(reinterpret_cast<const char*>(data), length);
    } else if (type == "IEND") {
      ended = true;
    }
    pos += 12 + length;
  }
  if (!ended || pos != file.size() || image.width <= 0 || image.height <= 0) {
    why = "chunks do not end with IEND at the end of the file, or no IHDR";
    return std::nullopt;
  }
  const size_t stride = static_cast<size_t>(image.width) * 3;
  std::vector<uint8_t> raw((stride + 1) * static_cast<size_t>(image.height));
  uLongf raw_size = raw.size();
  if (::uncompress(raw.data(), &raw_size, reinterpret_cast<const Bytef*>(compressed.data()),
                   compressed.size()) != Z_OK ||
      raw_size != raw.size()) {
    why = "IDAT does not inflate to height x (1 + 3 x width) bytes";
    return std::nullopt;
  }
  image.rgb.resize(stride * static_cast<size_t>(image.height));
  for (size_t y = 0; y < static_cast<size_t>(image.height); ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* out = &image.rgb[y * stride];
    const uint8_t* above = y > 0 ? out - stride : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      const int left = i >= 3 ? out[i - 3] : 0;
      const int up = above ? above[i] : 0;
      const int up_left = above && i >= 3 ? above[i - 3] : 0;
      int predicted = 0;
      switch (filter) {
        case 0: predicted = 0; break;
        case 1: predicted = left; break;
        case 2: predicted = up; break;
        case 3: predicted = (left + up) / 2; break;
        case 4: predicted = paeth(left, up, up_left); break;
        default: why = "unknown row filter " + std::to_string(filter); return std::nullopt;
      }
      out[i] = static_cast<uint8_t>(in[i] + predicted);
    }
  }
  return image;
}

}  // namespace zero::testing
