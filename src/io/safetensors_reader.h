// Safetensors reader: memory-maps a .safetensors file and validates everything up front — the
// header length, the JSON header, every dtype, shape and offset against the file — so a bad file
// is one clear FileError naming the file and tensor, never a crash later. Rejected: files under 8
// bytes, header lengths past the end, bad or non-object JSON, duplicate keys, unknown dtypes,
// bad shapes, bad/out-of-range offsets, byte counts that disagree with dtype x shape, tensors
// sharing bytes, non-string metadata.
//
// Format (public): u64 little-endian header size N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then
// the data buffer; offsets are relative to the start of the data buffer.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace zero::io {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t data_begin = 0;  // bytes, relative to the data buffer
  uint64_t data_end = 0;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws FileError naming the path (and tensor) on any problem.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  // Entries in order of their data offset.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  // Throws FileError "tensor 'X' not found in FILE", listing up to five similar names.
  const SafetensorsEntry& entry(const std::string& name) const;
  // A host tensor holding the named tensor's data: a zero-copy, read-only view into the mapping
  // when the data is aligned for its dtype (the mapping stays alive as long as any view or this
  // object does), otherwise an owned aligned copy from cpu_allocator() (category kOther):
  // safetensors does not promise alignment, and the header length shifts every offset.
  // Never write through a view: the mapping is PROT_READ.
  Tensor tensor(const std::string& name) const;
  // Elements [first, first + count) of the named tensor (row-major) as an owned host tensor of
  // shape [count] (cpu_allocator(), kOther): only those bytes of the mapping are touched, so a
  // rank that needs part of a tensor reads only that part from disk. Throws FileError naming
  // the file and tensor when the range is outside the tensor.
  Tensor elements(const std::string& name, int64_t first, int64_t count) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  std::shared_ptr<const void> mapping_;  // unmaps when the last user goes
  const uint8_t* data_ = nullptr;        // start of the data buffer
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace zero::io
