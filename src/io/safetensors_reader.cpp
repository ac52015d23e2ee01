// Safetensors reader: mmap, header parsing and validation, zero-copy (or aligned-copy) tensors.
#include "io/safetensors_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"

namespace zero::io {
namespace {

using Json = nlohmann::json;

// Views hand out the file's bytes as they are; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

// Headers beyond this are certainly corrupt (real ones are kilobytes to a few megabytes), and
// refusing them keeps a garbage length from making us parse gigabytes of tensor data as JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
// More dimensions than any tensor format uses (PyTorch allows 64); keeps a header of a
// million-entry shape from being taken for a tensor.
constexpr size_t kMaxRank = 64;

// Owns the read-only mapping; tensors borrowed from the file share it through a shared_ptr.
struct Mapping {
  void* address = MAP_FAILED;
  size_t length = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, length);
  }
};

std::string known_dtypes() {
  std::string out;
  for (const auto& info : kDTypeTable) {
    if (!out.empty()) out += ", ";
    out += info.safetensors_name;
  }
  return out;
}

// Parses the header text: depth-limited (a deeply nested __metadata__ value is refused while
// parsing) and with duplicate keys refused (nlohmann silently keeps the last of two equal keys,
// which would hide a corrupt or hand-edited header).
Json parse_header(const std::string& path, const uint8_t* begin, const uint8_t* end) {
  const std::string_view text(reinterpret_cast<const char*>(begin),
                              static_cast<size_t>(end - begin));
  return parse_json_bounded(text, path, "the safetensors header", kMaxJsonDepth,
                            /*reject_duplicate_keys=*/true);
}

uint64_t read_offset(const Json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    return static_cast<uint64_t>(value.get<int64_t>());
  }
  throw FileError(where + ": data_offsets must be two non-negative integers, got " +
                  json_excerpt(value));
}

// Validates one header entry against the data buffer (`data_size` bytes).
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const Json& value,
                             uint64_t data_size) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!value.is_object()) {
    throw FileError(where + ": header entry must be an object with dtype, shape and "
                    "data_offsets, got " + json_excerpt(value));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) throw FileError(where + ": header entry has no \"" + key + "\"");
  }
  SafetensorsEntry entry;
  entry.name = name;

  const Json& dtype = value.at("dtype");
  if (!dtype.is_string() || !dtype_from_safetensors(dtype.get<std::string>(), &entry.dtype)) {
    throw FileError(where + ": unknown dtype " + json_excerpt(dtype) +
                    " (known: " + known_dtypes() +
                    "); convert the tensor to one of these");
  }

  const Json& shape = value.at("shape");
  if (!shape.is_array()) {
    throw FileError(where + ": shape must be a list of non-negative integers, got " +
                    json_excerpt(shape));
  }
  // The element count is computed with overflow checks, over the non-zero dimensions as
  // shape_numel does: a wrapped product could match a tiny byte range and hand out a view far
  // larger than the file, and a [2^62, 4, 0] shape would still overflow its strides.
  if (shape.size() > kMaxRank) {
    throw FileError(where + ": shape has " + std::to_string(shape.size()) +
                    " dimensions; at most " + std::to_string(kMaxRank) + " are supported");
  }
  int64_t extent = 1;
  bool has_zero = false;
  bool overflow = false;
  for (const Json& dim : shape) {
    const bool in_range = (dim.is_number_unsigned() &&
                           dim.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) ||
                          (dim.is_number_integer() && dim.get<int64_t>() >= 0);
    if (!in_range) {
      throw FileError(where + ": shape must be a list of non-negative integers, got " +
                      json_excerpt(shape));
    }
    const auto size = dim.get<int64_t>();
    entry.shape.push_back(size);
    if (size == 0) {
      has_zero = true;
      continue;
    }
    overflow = overflow || __builtin_mul_overflow(extent, size, &extent);
  }
  const uint64_t numel = has_zero ? 0 : static_cast<uint64_t>(extent);
  uint64_t expected = 0;
  overflow = overflow || __builtin_mul_overflow(numel, dtype_size(entry.dtype), &expected);

  const Json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    throw FileError(where + ": data_offsets must be [begin, end], got " + json_excerpt(offsets));
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
                    " bytes); the file is truncated or corrupt");
  }
  const uint64_t held = entry.data_end - entry.data_begin;
  if (overflow || held != expected) {
    throw FileError(where + ": holds " + std::to_string(held) + " bytes but " +
                    dtype.get<std::string>() + shape_to_string(entry.shape) + " needs " +
                    (overflow ? std::string("more than 2^63 elements or 2^64 bytes")
                              : std::to_string(expected)) +
                    "; the header contradicts itself");
  }
  return entry;
}

// Sorts by offset and rejects tensors sharing bytes. Empty tensors hold no bytes, so they may
// sit anywhere; the running maximum end catches a tensor overlapping any earlier one.
void sort_and_check_overlaps(const std::string& path, std::vector<SafetensorsEntry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
  });
  const SafetensorsEntry* furthest = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.data_begin == e.data_end) continue;
    if (furthest != nullptr && e.data_begin < furthest->data_end) {
      throw FileError(path + ": tensors '" + furthest->name + "' (bytes " +
                      std::to_string(furthest->data_begin) + ".." +
                      std::to_string(furthest->data_end) + ") and '" + e.name + "' (bytes " +
                      std::to_string(e.data_begin) + ".." + std::to_string(e.data_end) +
                      ") overlap in the data buffer; the file is corrupt");
    }
    if (furthest == nullptr || e.data_end > furthest->data_end) furthest = &e;
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Up to five names that look like `wanted`: containing it, contained in it, or a few edits
// away (a prefix like "model." missing, a layer index off by one).
std::vector<std::string> close_names(const std::vector<SafetensorsEntry>& entries,
                                     const std::string& wanted) {
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(3, wanted.size() / 4);
  for (const auto& e : entries) {
    const bool nested = e.name.find(wanted) != std::string::npos ||
                        wanted.find(e.name) != std::string::npos;
    const size_t distance = nested ? 0 : edit_distance(e.name, wanted);
    if (distance <= limit) scored.emplace_back(distance, e.name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && i < 5; ++i) out.push_back(scored[i].second);
  return out;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  // Only a regular file: open() of a FIFO would block, a device has no size to map.
  const InputFile input = open_regular_file(path, "the safetensors file");
  const uint64_t file_size = input.size();
  if (file_size < 8) {
    throw FileError(path + ": file is " + std::to_string(file_size) +
                    " bytes, too short for a safetensors header (truncated or empty file)");
  }
  if (file_size > static_cast<uint64_t>(SIZE_MAX)) {
    throw FileError(path + ": file is too large to map on this machine");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->length = static_cast<size_t>(file_size);
  // MAP_PRIVATE + PROT_READ: views are read-only; nothing we do can reach the file.
  mapping->address = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, input.fd(), 0);
  if (mapping->address == MAP_FAILED) {
    throw FileError(path + ": mmap failed: " + std::strerror(errno));
  }
  const auto* bytes = static_cast<const uint8_t*>(mapping->address);

  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | bytes[i];
  if (header_size > file_size - 8) {
    throw FileError(path + ": header length " + std::to_string(header_size) +
                    " runs past the end of the " + std::to_string(file_size) +
                    "-byte file (truncated or not a safetensors file)");
  }
  if (header_size > kMaxHeaderBytes) {
    throw FileError(path + ": header length " + std::to_string(header_size) +
                    " is absurdly large (limit " + std::to_string(kMaxHeaderBytes) +
                    " bytes); not a safetensors file");
  }
  const Json header = parse_header(path, bytes + 8, bytes + 8 + header_size);
  if (!header.is_object()) {
    throw FileError(path + ": header must be a JSON object, got a " + header.type_name());
  }

  SafetensorsFile file;
  file.path_ = path;
  file.data_ = bytes + 8 + header_size;
  const uint64_t data_size = file_size - 8 - header_size;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") {
      file.entries_.push_back(parse_entry(path, name, value, data_size));
      continue;
    }
    if (!value.is_object()) {
      throw FileError(path + ": __metadata__ must be an object of strings, got " +
                      json_excerpt(value));
    }
    for (const auto& [key, text] : value.items()) {
      if (!text.is_string()) {
        throw FileError(path + ": __metadata__[\"" + key + "\"] must be a string, got " +
                        json_excerpt(text));
      }
      file.metadata_[key] = text.get<std::string>();
    }
  }
  sort_and_check_overlaps(path, file.entries_);
  for (size_t i = 0; i < file.entries_.size(); ++i) file.index_[file.entries_[i].name] = i;
  file.mapping_ = std::shared_ptr<const void>(mapping, mapping->address);
  return file;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return entries_[it->second];
  std::string hint;
  for (const std::string& near : close_names(entries_, name)) {
    hint += (hint.empty() ? "; similar names: " : ", ") + near;
  }
  throw FileError("tensor '" + name + "' not found in " + path_ + " (" +
                  std::to_string(entries_.size()) + " tensors" + hint +
                  "); check the name or the checkpoint");
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  const uint8_t* src = data_ + e.data_begin;
  // The mapping is page-aligned but the header length is arbitrary, so the data may sit at an
  // address that is misaligned for the dtype; typed access to that is undefined behaviour.
  if (reinterpret_cast<uintptr_t>(src) % dtype_size(e.dtype) == 0) {
    return Tensor::borrow(const_cast<uint8_t*>(src), e.shape, e.dtype, Device::cpu(), mapping_);
  }
  Tensor copy = Tensor::empty(cpu_allocator(), e.shape, e.dtype, MemoryCategory::kOther);
  std::memcpy(copy.raw_data(), src, e.data_end - e.data_begin);
  return copy;
}

Tensor SafetensorsFile::elements(const std::string& name, int64_t first, int64_t count) const {
  const SafetensorsEntry& e = entry(name);
  const auto size = static_cast<int64_t>(dtype_size(e.dtype));
  const auto total = static_cast<int64_t>((e.data_end - e.data_begin)) / size;
  if (first < 0 || count < 0 || first > total || count > total - first) {
    throw FileError(path_ + ": tensor '" + name + "' has " + std::to_string(total) +
                    " elements; elements [" + std::to_string(first) + ", " +
                    std::to_string(first + count) + ") are outside it");
  }
  Tensor copy = Tensor::empty(cpu_allocator(), {count}, e.dtype, MemoryCategory::kOther);
  std::memcpy(copy.raw_data(), data_ + e.data_begin + static_cast<uint64_t>(first * size),
              static_cast<size_t>(count * size));
  return copy;
}

}  // namespace zero::io
