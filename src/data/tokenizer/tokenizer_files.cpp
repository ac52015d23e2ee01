// Reading tokenizer.json and tokenizer_config.json; see tokenizer_files.h.
#include "data/tokenizer/tokenizer_files.h"

#include <sys/stat.h>
#include <zlib.h>

#include "core/error.h"
#include "io/bounded_json.h"
#include "io/input_file.h"

namespace zero::data::tokenizer {
namespace {

bool exists(const std::string& path) {
  struct stat info{};
  return ::stat(path.c_str(), &info) == 0;
}

bool is_directory(const std::string& path) {
  struct stat info{};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// tokenizer_config.json's eos_token: a string, or {"content": ...} in older files.
std::optional<std::string> read_eos_token(const std::string& folder) {
  const std::string path = folder + "/tokenizer_config.json";
  if (!exists(path)) return std::nullopt;
  // Real ones are a few KB to ~1 MB (Gemma's lists its 6k added tokens).
  constexpr uint64_t kMaxConfigBytes = 64ull << 20;
  const nlohmann::json config = io::read_json_file(path, "the tokenizer config", kMaxConfigBytes);
  if (!config.is_object()) return std::nullopt;
  const auto it = config.find("eos_token");
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

std::string gunzip(const std::string& compressed, const std::string& path, uint64_t max_bytes) {
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    throw FileError(path + ": zlib could not start inflating");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  std::string out;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    rc = inflate(&stream, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&stream);
      throw FileError(path + ": not a valid gzip file (zlib: " +
                      (stream.msg ? stream.msg : "truncated data") +
                      "); give the plain tokenizer.json or recompress it with gzip");
    }
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&stream);
      throw FileError(path + ": inflates to more than " + std::to_string(max_bytes) +
                      " bytes; that is no tokenizer.json");
    }
    if (rc == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      throw FileError(path + ": the gzip data is truncated");
    }
  }
  inflateEnd(&stream);
  return out;
}

TokenizerFiles read_tokenizer_files(const std::string& dir_or_file) {
  TokenizerFiles files;
  if (is_directory(dir_or_file)) {
    const std::string plain = dir_or_file + "/tokenizer.json";
    files.json_path = exists(plain) || !exists(plain + ".gz") ? plain : plain + ".gz";
    if (!exists(files.json_path)) {
      throw FileError(dir_or_file + " has no tokenizer.json: give the folder of a Hugging Face "
                      "model that has one, or the path of the tokenizer.json itself");
    }
  } else {
    files.json_path = dir_or_file;
  }
  const std::string what = "the tokenizer (tokenizer.json)";
  std::string raw = io::read_text_file(files.json_path, what, kMaxTokenizerJsonBytes);
  const bool gzip = raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f &&
                    static_cast<unsigned char>(raw[1]) == 0x8b;
  if (gzip || ends_with(files.json_path, ".gz")) {
    files.json_text = gunzip(raw, files.json_path, kMaxTokenizerJsonBytes);
  } else {
    files.json_text = std::move(raw);
  }
  files.eos_token = read_eos_token(folder_of(files.json_path));
  return files;
}

}  // namespace zero::data::tokenizer
