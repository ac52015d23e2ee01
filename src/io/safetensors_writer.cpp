#include "io/safetensors_writer.h"

#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/atomic_file.h"

namespace zero::io {

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann's ordered_json keeps our insertion order, so the header lists tensors in file order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second) {
      throw Error(path + ": tensor name '" + name + "' is duplicated or reserved");
    }
    if (!tensor.device().is_cpu() || !tensor.is_contiguous()) {
      throw ShapeError(path + ": tensor '" + name + "' must be a contiguous host tensor, got " +
                       tensor.describe());
    }
    const uint64_t bytes = tensor.nbytes();
    header[name] = {{"dtype", dtype_info(tensor.dtype()).safetensors_name},
                    {"shape", tensor.shape()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  write_file_atomically(path, [&](std::FILE* file) {
    uint8_t size_bytes[8];
    uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<uint8_t>(n >> (8 * i));
    bool ok = std::fwrite(size_bytes, 1, 8, file) == 8 &&
              std::fwrite(text.data(), 1, text.size(), file) == text.size();
    for (const auto& [name, tensor] : tensors) {
      if (!ok) break;
      if (tensor.nbytes() == 0) continue;
      ok = std::fwrite(tensor.raw_data(), 1, tensor.nbytes(), file) == tensor.nbytes();
    }
    if (!ok) throw FileError(path + ": write failed (disk full?)");
  });
}

}  // namespace zero::io
