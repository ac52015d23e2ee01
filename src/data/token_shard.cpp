// TokenShard: open (mmap + validation), window copies, and the atomic shard writer.
#include "data/token_shard.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/input_file.h"

namespace zero::data {
namespace {

// The format is little-endian and the mapping is read in place.
static_assert(std::endian::native == std::endian::little,
              "token shards assume a little-endian host");

constexpr int kHeaderInts = static_cast<int>(kShardHeaderBytes / 4);

// Owns one read-only mapping; unmapped when the last TokenShard copy goes away.
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

// 1234567 -> "1,234,567": positions in multi-gigabyte shards are unreadable without separators.
std::string with_commas(int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

std::string system_error(const std::string& path, const std::string& what) {
  const int saved = errno;
  return path + ": " + what + ": " + std::strerror(saved);
}

// What the header says about the layout after it.
struct Layout {
  bool wide = false;    // uint32 tokens (else uint16)
  bool masked = false;  // a mask byte per token follows the tokens
};

// Checks magic, version and (masked layout) the token width.
Layout check_header(const std::string& path, const int32_t* header) {
  const int32_t magic = header[0];
  const int32_t version = header[1];
  if (magic != kShardMagicU16 && magic != kShardMagicU32 && magic != kShardMagicMasked) {
    throw FileError(path + ": bad magic " + std::to_string(magic) +
                    " in the token shard header; known magics are 20240520 (uint16 tokens, "
                    "version 1) and 20240801 (uint32 tokens, version 7), as llm.c writes them, "
                    "and 20261125 (tokens with a loss mask, version 1), as `zero prepare` writes "
                    "them. Is this an llm.c .bin token file? `zero prepare` writes one from text.");
  }
  const int32_t expected = magic == kShardMagicU32      ? kShardVersionU32
                           : magic == kShardMagicMasked ? kShardVersionMasked
                                                        : kShardVersionU16;
  if (version != expected) {
    throw FileError(path + ": version " + std::to_string(version) + " with magic " +
                    std::to_string(magic) + "; that magic's version is " +
                    std::to_string(expected) +
                    ". The file was written by a different tool or "
                    "is corrupt; regenerate it.");
  }
  if (magic != kShardMagicMasked) return {magic == kShardMagicU32, false};
  const int32_t width = header[3];
  if (width != 2 && width != 4) {
    throw FileError(path + ": the masked token shard's header gives " + std::to_string(width) +
                    " bytes per token (header int 3); it must be 2 (uint16) or 4 (uint32). The "
                    "file is corrupt; regenerate it with `zero prepare`.");
  }
  return {width == 4, true};
}

template <typename T>
uint32_t max_of(const T* tokens, int64_t count) {
  T best = 0;
  for (int64_t i = 0; i < count; ++i) best = std::max(best, tokens[i]);
  return best;
}

template <typename T>
int64_t first_at_least(const T* tokens, int64_t count, int64_t limit) {
  for (int64_t i = 0; i < count; ++i) {
    if (static_cast<int64_t>(tokens[i]) >= limit) return i;
  }
  return -1;
}

}  // namespace

TokenShard TokenShard::open(const std::string& path, int64_t vocab_size) {
  if (vocab_size < 1) {
    throw ConfigError("opening token shard " + path + ": the vocabulary size must be >= 1, got " +
                      std::to_string(vocab_size));
  }
  // Only a regular file: open() of a FIFO (`--data some_pipe`) would block until a writer
  // appears, and a device has no size to check the header against.
  const io::InputFile input = io::open_regular_file(path, "the token shard");
  if (input.size() > static_cast<uint64_t>(INT64_MAX) || input.size() > SIZE_MAX) {
    throw FileError(path + ": the token shard is too large to map on this machine");
  }
  const auto file_size = static_cast<int64_t>(input.size());
  if (file_size < kShardHeaderBytes) {
    throw FileError(path + ": " + std::to_string(file_size) + " bytes is shorter than the " +
                    "1024-byte .bin header (truncated, or not a token shard)");
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->length = static_cast<size_t>(file_size);
  mapping->address = ::mmap(nullptr, mapping->length, PROT_READ, MAP_PRIVATE, input.fd(), 0);
  if (mapping->address == MAP_FAILED) {
    throw FileError(system_error(path, "cannot map token shard"));
  }
  // The mapping keeps the file's pages reachable after `input` closes the descriptor.

  const auto* header = static_cast<const int32_t*>(mapping->address);
  TokenShard shard;
  shard.path_ = path;
  const Layout layout = check_header(path, header);
  shard.wide_ = layout.wide;
  const int64_t count = header[2];
  // A masked shard stores one mask byte per token after the tokens.
  const int64_t token_bytes = (shard.wide_ ? 4 : 2) + (layout.masked ? 1 : 0);
  const int64_t payload = file_size - kShardHeaderBytes;
  if (count < 0) {
    throw FileError(path + ": the header's token count is negative (" + std::to_string(count) +
                    "); the file is corrupt");
  }
  // count < 2^31 (an int32 in the header) and token_bytes <= 5: neither product can overflow.
  if (count * token_bytes != payload) {
    const int64_t expected = kShardHeaderBytes + count * token_bytes;
    const bool truncated = expected > file_size;
    throw FileError(path + ": the header says " + with_commas(count) + " tokens" +
                    (layout.masked ? " with their loss mask" : "") + " (" +
                    with_commas(expected) + " bytes with the header) but the file has " +
                    with_commas(file_size) + " bytes" +
                    (truncated ? " (truncated: was the download or write interrupted?)"
                               : " (trailing data after the last token: the count or the file "
                                 "is wrong)"));
  }
  shard.count_ = count;
  shard.tokens_ = static_cast<const char*>(mapping->address) + kShardHeaderBytes;
  shard.mapping_ = std::shared_ptr<const void>(mapping, mapping->address);
  shard.target_count_ = count;
  if (layout.masked) {
    shard.mask_ = reinterpret_cast<const uint8_t*>(static_cast<const char*>(shard.tokens_) +
                                                   count * (shard.wide_ ? 4 : 2));
    // One pass sums the mask and finds its largest byte; the position of a bad byte is only
    // searched on failure.
    int64_t targets = 0;
    uint8_t largest = 0;
    for (int64_t i = 0; i < count; ++i) {
      targets += shard.mask_[i];
      largest = std::max(largest, shard.mask_[i]);
    }
    if (largest > 1) {
      int64_t at = 0;
      while (shard.mask_[at] <= 1) ++at;
      throw FileError(path + ": loss mask value " + std::to_string(shard.mask_[at]) +
                      " at position " + with_commas(at) +
                      "; the mask must hold 0 (not a target) or 1 (a target) per token. The "
                      "file is corrupt; regenerate it with `zero prepare`.");
    }
    shard.target_count_ = targets;
  }

  // One pass for the maximum; the position of the first bad id is only searched on failure.
  shard.max_token_ = shard.wide_ ? max_of(static_cast<const uint32_t*>(shard.tokens_), count)
                                 : max_of(static_cast<const uint16_t*>(shard.tokens_), count);
  if (count > 0 && static_cast<int64_t>(shard.max_token_) >= vocab_size) {
    const int64_t at =
        shard.wide_
            ? first_at_least(static_cast<const uint32_t*>(shard.tokens_), count, vocab_size)
            : first_at_least(static_cast<const uint16_t*>(shard.tokens_), count, vocab_size);
    throw FileError("token " + std::to_string(shard.token(at)) + " at position " + with_commas(at) +
                    " in " + path + " is >= the model's vocabulary size " +
                    std::to_string(vocab_size) + "; was this shard tokenized for another model?");
  }
  return shard;
}

template <typename Out>
void TokenShard::copy_window_to(int64_t start, int64_t count, Out* out) const {
  ZERO_CHECK(start >= 0 && count >= 0 && start + count <= count_,
             "window [" << start << ", " << start + count << ") outside " << path_ << " (" << count_
                        << " tokens)");
  if (wide_) {
    const auto* src = static_cast<const uint32_t*>(tokens_) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<Out>(src[i]);
  } else {
    const auto* src = static_cast<const uint16_t*>(tokens_) + start;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<Out>(src[i]);
  }
}

void TokenShard::copy_window(int64_t start, int64_t count, int32_t* out) const {
  copy_window_to(start, count, out);
}

void TokenShard::copy_window(int64_t start, int64_t count, int64_t* out) const {
  copy_window_to(start, count, out);
}

template <typename Out>
void TokenShard::copy_targets_to(int64_t start, int64_t count, int32_t ignore_index,
                                 Out* out) const {
  copy_window_to(start, count, out);
  if (mask_ == nullptr) return;
  for (int64_t i = 0; i < count; ++i) {
    if (mask_[start + i] == 0) out[i] = static_cast<Out>(ignore_index);
  }
}

void TokenShard::copy_targets(int64_t start, int64_t count, int32_t ignore_index,
                              int32_t* out) const {
  copy_targets_to(start, count, ignore_index, out);
}

void TokenShard::copy_targets(int64_t start, int64_t count, int32_t ignore_index,
                              int64_t* out) const {
  copy_targets_to(start, count, ignore_index, out);
}

namespace {

// Both layouts: the header, the tokens (narrowed when not wide), then the mask when there is one.
void write_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                 const std::vector<uint8_t>* mask, bool wide) {
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw ConfigError(path + ": " + with_commas(static_cast<int64_t>(tokens.size())) +
                      " tokens do not fit one .bin shard (its header counts at most "
                      "2,147,483,647); split them into several shards");
  }
  if (!wide)
    wide = std::any_of(tokens.begin(), tokens.end(), [](uint32_t t) { return t > 0xffff; });
  int32_t header[kHeaderInts] = {};
  if (mask != nullptr) {
    header[0] = kShardMagicMasked;
    header[1] = kShardVersionMasked;
    header[3] = wide ? 4 : 2;
  } else {
    header[0] = wide ? kShardMagicU32 : kShardMagicU16;
    header[1] = wide ? kShardVersionU32 : kShardVersionU16;
  }
  header[2] = static_cast<int32_t>(tokens.size());
  io::write_file_atomically(path, [&](std::FILE* file) {
    const auto fail = [&] {
      throw FileError(path + ": writing the token shard failed (disk full?)");
    };
    if (std::fwrite(header, sizeof(int32_t), kHeaderInts, file) != static_cast<size_t>(kHeaderInts))
      fail();
    // (Empty vectors may have a null data(), which fwrite must not be given.)
    if (wide) {
      if (!tokens.empty() &&
          std::fwrite(tokens.data(), sizeof(uint32_t), tokens.size(), file) != tokens.size())
        fail();
    } else {
      // Narrowed in chunks so a large shard does not need a second full-size copy.
      constexpr size_t kChunk = size_t{1} << 16;
      std::vector<uint16_t> narrow;
      for (size_t begin = 0; begin < tokens.size(); begin += kChunk) {
        const size_t end = std::min(tokens.size(), begin + kChunk);
        narrow.assign(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                      tokens.begin() + static_cast<std::ptrdiff_t>(end));
        if (std::fwrite(narrow.data(), sizeof(uint16_t), narrow.size(), file) != narrow.size())
          fail();
      }
    }
    if (mask != nullptr && !mask->empty() &&
        std::fwrite(mask->data(), 1, mask->size(), file) != mask->size())
      fail();
  });
}

}  // namespace

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, bool wide) {
  write_shard(path, tokens, nullptr, wide);
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                       const std::vector<uint8_t>& mask, bool wide) {
  if (mask.size() != tokens.size()) {
    throw ConfigError(path + ": the loss mask has " + with_commas(static_cast<int64_t>(mask.size())) +
                      " values for " + with_commas(static_cast<int64_t>(tokens.size())) +
                      " tokens; it needs one per token");
  }
  const auto bad = std::find_if(mask.begin(), mask.end(), [](uint8_t m) { return m > 1; });
  if (bad != mask.end()) {
    throw ConfigError(path + ": loss mask value " + std::to_string(*bad) + " at position " +
                      with_commas(bad - mask.begin()) + "; a mask value is 0 (not a target) or 1");
  }
  write_shard(path, tokens, &mask, wide);
}

}  // namespace zero::data
