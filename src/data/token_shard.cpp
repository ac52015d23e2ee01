#include "data/token_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "io/atomic_file.h"

namespace zero::data {
namespace {

constexpr int64_t kHeaderInts = 256;
constexpr int64_t kHeaderBytes = kHeaderInts * 4;

struct Mapping {
  void* address = MAP_FAILED;
  size_t length = 0;
  ~Mapping() {
    if (address != MAP_FAILED) ::munmap(address, length);
  }
};

}  // namespace

TokenShard TokenShard::open(const std::string& path, int64_t vocab_size) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw FileError(path + ": cannot open token shard: " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const auto file_size = static_cast<int64_t>(st.st_size);
  if (file_size < kHeaderBytes) {
    ::close(fd);
    throw FileError(path + ": " + std::to_string(file_size) + " bytes is shorter than the 1024-byte "
                    ".bin header (truncated, or not a token shard)");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->length = static_cast<size_t>(file_size);
  mapping->address = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping->address == MAP_FAILED) throw FileError(path + ": mmap failed: " + std::strerror(errno));
  const auto* header = static_cast<const int32_t*>(mapping->address);
  TokenShard shard;
  shard.path_ = path;
  if (header[0] == kShardMagicU16) {
    if (header[1] != 1) throw FileError(path + ": version " + std::to_string(header[1]) + " with magic 20240520; expected 1");
    shard.wide_ = false;
  } else if (header[0] == kShardMagicU32) {
    if (header[1] != 2) throw FileError(path + ": version " + std::to_string(header[1]) + " with magic 20240801; expected 2");
    shard.wide_ = true;
  } else {
    throw FileError(path + ": bad magic " + std::to_string(header[0]) +
                    " (known: 20240520 for uint16 tokens, 20240801 for uint32 tokens)");
  }
  shard.count_ = header[2];
  const int64_t token_bytes = shard.wide_ ? 4 : 2;
  const int64_t expected = kHeaderBytes + shard.count_ * token_bytes;
  if (shard.count_ < 0 || expected != file_size) {
    throw FileError(path + ": header says " + std::to_string(shard.count_) + " tokens (" +
                    std::to_string(expected) + " bytes) but the file has " + std::to_string(file_size) +
                    " bytes (" + (expected > file_size ? "truncated" : "trailing data") + ")");
  }
  shard.tokens_ = static_cast<const char*>(mapping->address) + kHeaderBytes;
  shard.mapping_ = std::shared_ptr<const void>(mapping, mapping->address);
  for (int64_t i = 0; i < shard.count_; ++i) {
    if (static_cast<int64_t>(shard.token(i)) >= vocab_size) {
      throw FileError(path + ": token " + std::to_string(shard.token(i)) + " at position " +
                      std::to_string(i) + " is >= the model's vocabulary size " + std::to_string(vocab_size) +
                      "; was this shard tokenized for another model?");
    }
  }
  return shard;
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens) {
  const bool wide = std::any_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 0xffff; });
  int32_t header[kHeaderInts] = {};
  header[0] = wide ? kShardMagicU32 : kShardMagicU16;
  header[1] = wide ? 2 : 1;
  header[2] = static_cast<int32_t>(tokens.size());
  io::write_file_atomically(path, [&](std::FILE* f) {
    bool ok = std::fwrite(header, 4, kHeaderInts, f) == kHeaderInts;
    if (wide) {
      ok = ok && std::fwrite(tokens.data(), 4, tokens.size(), f) == tokens.size();
    } else {
      std::vector<uint16_t> narrow(tokens.begin(), tokens.end());
      ok = ok && std::fwrite(narrow.data(), 2, narrow.size(), f) == narrow.size();
    }
    if (!ok) throw FileError(path + ": write failed");
  });
}

}  // namespace zero::data
