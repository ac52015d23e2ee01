// Whether a file that a run writes many steps from now (a profile, a report) can be written
// there, asked before the run starts so a bad path stops it at once instead of after hours.
#pragma once
#include <optional>
#include <string>

namespace zero::io {

// Creates the file's directory when it is missing. Returns why `path` cannot be written through
// io::write_file_atomically (which puts a temporary file beside it and renames it): an empty
// path, a directory that cannot be created or is not a directory, the path itself being a
// directory, or no write permission in the directory; nullopt when it can.
std::optional<std::string> unwritable_file_reason(const std::string& path);

}  // namespace zero::io
