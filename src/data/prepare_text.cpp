// prepare_text_files: read, tokenize, split, write.
#include "data/prepare_text.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/checked_math.h"
#include "core/error.h"
#include "io/input_file.h"
#include "data/token_shard.h"

namespace zero::data {
namespace {

namespace fs = std::filesystem;

// A shard's header counts tokens in an int32.
constexpr int64_t kMaxShardTokens = INT32_MAX;

// Only regular files: fopen() of a FIFO blocks until a writer appears, and /dev/zero would be
// read until memory runs out. Returns the file's size (one byte token per byte).
int64_t check_readable(const std::string& path) {
  const uint64_t size = io::regular_file_size(path, "the text file to tokenize");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    throw FileError(path + ": cannot open the text file: " + std::strerror(errno) +
                    " (check the path)");
  }
  std::fclose(file);
  return size > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(size);
}

// Appends the byte tokens of `path` to `tokens`; returns how many were added.
int64_t append_file(const std::string& path, const ByteTokenizer& tokenizer,
                    std::vector<uint32_t>& tokens) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) {
    throw FileError(path + ": cannot open the text file: " + std::strerror(errno) +
                    " (check the path)");
  }
  const size_t before = tokens.size();
  std::string chunk(size_t{1} << 20, '\0');
  for (;;) {
    const size_t got = std::fread(chunk.data(), 1, chunk.size(), file.get());
    const auto encoded = tokenizer.encode(std::string_view(chunk.data(), got));
    tokens.insert(tokens.end(), encoded.begin(), encoded.end());
    if (got < chunk.size()) break;
  }
  if (std::ferror(file.get()) != 0) {
    throw FileError(path + ": reading the text file failed: " + std::strerror(errno));
  }
  return static_cast<int64_t>(tokens.size() - before);
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec_a, ec_b;
  const fs::path ca = fs::weakly_canonical(a, ec_a), cb = fs::weakly_canonical(b, ec_b);
  return a == b || (!ec_a && !ec_b && ca == cb);
}

}  // namespace

PrepareResult prepare_text_files(const std::vector<std::string>& inputs,
                                 const std::string& train_out, const std::string& val_out,
                                 double val_fraction) {
  if (inputs.empty()) throw ConfigError("zero prepare: give at least one text file to tokenize");
  if (train_out.empty()) throw ConfigError("zero prepare: --out FILE.bin is required");
  const bool split = !val_out.empty();
  if (split) {
    if (!(val_fraction > 0.0 && val_fraction < 1.0)) {
      throw ConfigError("zero prepare: --val-fraction must be in (0, 1) with --val-out, got " +
                        std::to_string(val_fraction));
    }
    if (same_file(train_out, val_out)) {
      throw ConfigError("zero prepare: --out and --val-out are the same file (" + train_out +
                        "); give the validation shard its own name");
    }
  }
  // Every input is checked before any is read, so a typo in the last name fails at once; and
  // inputs that cannot fit one shard are refused before gigabytes are tokenized.
  int64_t total_bytes = 0;
  for (const auto& path : inputs) {
    const int64_t bytes = check_readable(path);
    total_bytes = add_if_fits(total_bytes, bytes).value_or(INT64_MAX);
  }
  // The larger of the two shards must fit one .bin header's count.
  const double largest_fraction = split ? std::max(val_fraction, 1.0 - val_fraction) : 1.0;
  if (static_cast<double>(total_bytes) * largest_fraction > kMaxShardTokens) {
    throw ConfigError("zero prepare: the inputs hold " + std::to_string(total_bytes) +
                      " bytes (one token each), more than one .bin shard can count (" +
                      std::to_string(kMaxShardTokens) +
                      "); prepare the files in several groups, one shard each");
  }

  const ByteTokenizer tokenizer;
  PrepareResult result;
  std::vector<uint32_t> tokens;
  for (const auto& path : inputs)
    result.file_tokens.push_back(append_file(path, tokenizer, tokens));
  const auto total = static_cast<int64_t>(tokens.size());
  if (total == 0)
    throw ConfigError("zero prepare: the input files are empty; there is nothing to tokenize");

  const int64_t val =
      split ? static_cast<int64_t>(std::floor(static_cast<double>(total) * val_fraction)) : 0;
  const int64_t train = total - val;
  // A shard needs two tokens for one (input, target) pair; fewer is certainly a mistake.
  if (split && (val < 2 || train < 2)) {
    throw ConfigError("zero prepare: --val-fraction " + std::to_string(val_fraction) + " of " +
                      std::to_string(total) + " tokens gives " + std::to_string(train) +
                      " training and " + std::to_string(val) +
                      " validation tokens; each shard "
                      "needs at least 2. Use more text or a different fraction.");
  }
  const auto cut = tokens.begin() + static_cast<std::ptrdiff_t>(train);
  if (split) write_token_shard(val_out, std::vector<uint32_t>(cut, tokens.end()));
  tokens.resize(static_cast<size_t>(train));
  write_token_shard(train_out, tokens);
  result.train_tokens = train;
  result.val_tokens = val;
  return result;
}

}  // namespace zero::data
