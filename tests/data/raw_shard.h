// write_raw(), which two token shard tests used alike; one copy here since the folder's tests are
// built as one unit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace zero::data::testing {

// A raw .bin: the given header words (rest zero), then `payload` zero bytes.
inline void write_raw(const std::string& path, std::vector<int32_t> header, size_t payload) {
  header.resize(256, 0);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  out << std::string(payload, '\0');
}

}  // namespace zero::data::testing
