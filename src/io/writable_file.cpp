#include "io/writable_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace zero::io {

std::optional<std::string> unwritable_file_reason(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "the path is empty";
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return std::string("cannot create its directory '").append(dir.string()).append("': ").append(error.message());
  }
  if (!fs::is_directory(dir, error)) return std::string("'").append(dir.string()).append("' is not a directory");
  if (fs::is_directory(file, error)) return "it is a directory";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return std::string("directory '").append(dir.string()).append("': ").append(std::strerror(errno));
  }
  return std::nullopt;
}

}  // namespace zero::io
