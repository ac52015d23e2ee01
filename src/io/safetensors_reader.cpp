#include "io/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zero::io {
namespace {

// Headers beyond this are certainly corrupt (real ones are kilobytes to a few megabytes).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct Mapping {
  void* address = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (address != nullptr && address != MAP_FAILED) ::munmap(address, length);
  }
};

std::string known_dtypes() {
  std::string out;
  for (const auto& info : kDTypeTable) out += std::string(out.empty() ? "" : ", ") + info.safetensors_name;
  return out;
}

uint64_t read_offset(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
    throw FileError(where + ": data_offsets must be non-negative integers, got " + value.dump());
  }
  return value.get<uint64_t>();
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw FileError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw FileError(path + ": cannot stat: " + std::strerror(errno));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    throw FileError(path + ": file is " + std::to_string(file_size) +
                    " bytes, too short for a safetensors header (truncated?)");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->length = static_cast<size_t>(file_size);
  mapping->address = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping->address == MAP_FAILED) throw FileError(path + ": mmap failed: " + std::strerror(errno));
  const auto* bytes = static_cast<const uint8_t*>(mapping->address);

  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > kMaxHeaderBytes || header_size > file_size - 8) {
    throw FileError(path + ": header length " + std::to_string(header_size) +
                    " runs past the end of the " + std::to_string(file_size) +
                    "-byte file (truncated or not a safetensors file)");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_size);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(path + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw FileError(path + ": header must be a JSON object");

  SafetensorsFile file;
  file.path_ = path;
  file.data_ = bytes + 8 + header_size;
  const uint64_t data_size = file_size - 8 - header_size;
  for (const auto& [name, value] : header.items()) {
    const std::string where = path + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (!value.is_object()) throw FileError(path + ": __metadata__ must be an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          throw FileError(path + ": __metadata__[\"" + key + "\"] must be a string, got " + text.dump());
        }
        file.metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      throw FileError(where + ": entry must be an object with dtype, shape and data_offsets");
    }
    SafetensorsEntry entry;
    entry.name = name;
    if (!value["dtype"].is_string() ||
        !dtype_from_safetensors(value["dtype"].get<std::string>(), &entry.dtype)) {
      throw FileError(where + ": unknown dtype " + value["dtype"].dump() + " (known: " +
                      known_dtypes() + ")");
    }
    if (!value["shape"].is_array()) throw FileError(where + ": shape must be a list");
    uint64_t numel = 1;
    for (const auto& dim : value["shape"]) {
      if (!dim.is_number_integer() || dim.get<int64_t>() < 0) {
        throw FileError(where + ": shape must hold non-negative integers, got " + value["shape"].dump());
      }
      entry.shape.push_back(dim.get<int64_t>());
      numel *= dim.get<uint64_t>();
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw FileError(where + ": data_offsets must be [begin, end], got " + offsets.dump());
    }
    entry.data_begin = read_offset(offsets[0], where);
    entry.data_end = read_offset(offsets[1], where);
    if (entry.data_begin > entry.data_end) {
      throw FileError(where + ": data_offsets begin " + std::to_string(entry.data_begin) +
                      " is after end " + std::to_string(entry.data_end));
    }
    if (entry.data_end > data_size) {
      throw FileError(where + ": data_offsets end " + std::to_string(entry.data_end) +
                      " is past the data buffer (" + std::to_string(data_size) +
                      " bytes; the file is truncated or corrupt)");
    }
    const uint64_t expected = numel * dtype_size(entry.dtype);
    if (entry.data_end - entry.data_begin != expected) {
      throw FileError(where + ": holds " + std::to_string(entry.data_end - entry.data_begin) +
                      " bytes but " + value["dtype"].get<std::string>() +
                      shape_to_string(entry.shape) + " needs " + std::to_string(expected));
    }
    file.entries_.push_back(std::move(entry));
  }
  std::sort(file.entries_.begin(), file.entries_.end(), [](const auto& a, const auto& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  for (size_t i = 0; i < file.entries_.size(); ++i) {
    if (i > 0 && file.entries_[i].data_begin < file.entries_[i - 1].data_end) {
      throw FileError(path + ": tensors '" + file.entries_[i - 1].name + "' and '" +
                      file.entries_[i].name + "' overlap in the data buffer");
    }
    file.index_[file.entries_[i].name] = i;
  }
  file.mapping_ = std::shared_ptr<const void>(mapping, mapping->address);
  return file;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::string near;
    for (const auto& e : entries_) {
      if (near.size() < 200 && (e.name.find(name) != std::string::npos || name.find(e.name) != std::string::npos)) {
        near += (near.empty() ? "" : ", ") + e.name;
      }
    }
    throw FileError(path_ + ": tensor '" + name + "' not found" +
                    (near.empty() ? "" : " (similar names: " + near + ")"));
  }
  return entries_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const uint8_t* src = data_ + e.data_begin;
  const size_t bytes = e.data_end - e.data_begin;
  if (reinterpret_cast<uintptr_t>(src) % dtype_size(e.dtype) == 0) {
    return Tensor::borrow(const_cast<uint8_t*>(src), e.shape, e.dtype, Device::cpu(), mapping_);
  }
  Tensor copy = Tensor::empty(cpu_allocator(), e.shape, e.dtype, MemoryCategory::kOther);
  std::memcpy(copy.raw_data(), src, bytes);
  return copy;
}

}  // namespace zero::io
