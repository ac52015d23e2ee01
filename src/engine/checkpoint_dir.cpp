#include "engine/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/error.h"
#include "io/input_file.h"

namespace zero::engine {
namespace fs = std::filesystem;
namespace {

std::mutex& hook_mutex() {
  static std::mutex m;
  return m;
}
CheckpointCrashHook& hook() {
  static CheckpointCrashHook h;
  return h;
}
void run_hook(const std::string& stage) {
  CheckpointCrashHook h;
  {
    std::lock_guard<std::mutex> lock(hook_mutex());
    h = hook();
  }
  if (h) h(stage);
}

// fsync a file or directory by path; durability of renames needs the directory synced too.
void fsync_path(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) throw FileError(path.string() + ": cannot open for fsync: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw FileError(path.string() + ": fsync failed: " + std::strerror(err));
}

// std::filesystem's throwing calls report errors as filesystem_error; checkpoints report a
// FileError naming the path and what was being done.
void rename_or_throw(const fs::path& from, const fs::path& to, const char* why) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) {
    throw FileError(from.string() + ": cannot rename to " + to.string() + " (" + why + "): " +
                    ec.message());
  }
}

void write_latest(const fs::path& dir, const std::string& tag) {
  const fs::path tmp = dir / (".latest.tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << tag;
    if (!out) throw FileError(tmp.string() + ": cannot write");
  }
  fsync_path(tmp, false);
  rename_or_throw(tmp, dir / "latest", "pointing latest at the new checkpoint");
  fsync_path(dir, true);
}

// A tag is a folder directly inside DIR: no separators, no "." or "..", nothing hidden (the
// staging folders start with '.'), no control characters.
bool is_plain_tag(const std::string& tag) {
  if (tag.empty() || tag.size() > 255 || tag.front() == '.') return false;
  return std::none_of(tag.begin(), tag.end(), [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

std::string shown_tag(const std::string& tag) {
  std::string out;
  for (const char c : tag.substr(0, 80)) {
    out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  return tag.size() > 80 ? out + "..." : out;
}

}  // namespace

void set_checkpoint_crash_hook(CheckpointCrashHook h) {
  std::lock_guard<std::mutex> lock(hook_mutex());
  hook() = std::move(h);
}

void validate_tag(const std::string& tag) {
  if (!is_plain_tag(tag)) {
    throw ConfigError("checkpoint tag \"" + shown_tag(tag) +
                      "\" is not a plain folder name (no '/', not starting with '.', at most 255 "
                      "characters, no control characters)");
  }
}

std::string CheckpointWriter::staging_path(const std::string& dir, const std::string& tag,
                                           long id) {
  return (fs::path(dir) / (".tmp-" + tag + "-" + std::to_string(id))).string();
}

CheckpointWriter::CheckpointWriter(std::string dir, std::string tag, long id)
    : dir_(std::move(dir)), tag_(std::move(tag)) {
  validate_tag(tag_);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw FileError(dir_ + ": cannot create the checkpoint directory: " + ec.message());
  staging_ = staging_path(dir_, tag_, id >= 0 ? id : static_cast<long>(::getpid()));
  fs::remove_all(staging_, ec);
  if (ec) throw FileError(staging_ + ": cannot remove a stale staging folder: " + ec.message());
  fs::create_directories(staging_, ec);
  if (ec) throw FileError(staging_ + ": cannot create: " + ec.message());
}

CheckpointWriter::~CheckpointWriter() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(staging_, ec);  // best effort: never throw from a destructor
  }
}

void CheckpointWriter::commit() {
  std::error_code ec;
  for (fs::directory_iterator it(staging_, ec), end; !ec && it != end; it.increment(ec)) {
    fsync_path(it->path(), false);
  }
  if (ec) throw FileError(staging_ + ": cannot list the staged checkpoint: " + ec.message());
  fsync_path(staging_, true);
  run_hook("files_written");
  const fs::path target = fs::path(dir_) / tag_;
  const fs::path old = fs::path(dir_) / (".old-" + tag_ + "-" + std::to_string(::getpid()));
  if (fs::exists(target, ec)) rename_or_throw(target, old, "moving the older checkpoint of this tag aside");
  rename_or_throw(staging_, target, "committing the checkpoint");
  fsync_path(dir_, true);
  committed_ = true;
  run_hook("renamed");
  write_latest(dir_, tag_);
  fs::remove_all(old, ec);
}

std::string read_latest_tag(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::error_code ec;
  if (!fs::exists(latest, ec) && !ec) {
    throw FileError(latest.string() + " not found: no complete checkpoint in " + dir +
                    " (pass a tag explicitly, or point at the folder you saved to)");
  }
  std::string tag = io::read_text_file(latest.string(), "the checkpoint's latest file",
                                       io::kMaxSmallTextBytes);
  // The writer stores the bare tag; DeepSpeed's and hand-written files may end in a newline.
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == '\r' || tag.back() == ' ')) tag.pop_back();
  if (tag.empty()) {
    throw FileError(latest.string() + " is empty; write the tag of a checkpoint in " + dir +
                    " into it (e.g. global_step100), or pass the tag explicitly");
  }
  if (!is_plain_tag(tag)) {
    throw FileError(latest.string() + " names \"" + shown_tag(tag) +
                    "\", which is not a checkpoint folder inside " + dir +
                    " (a tag is a plain folder name: no '/', no '..', not starting with '.'); "
                    "write the tag of a checkpoint in " + dir + " into it");
  }
  return tag;
}

std::string resolve_checkpoint_tag(const std::string& dir, const std::string& tag) {
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (!fs::is_directory(status)) {
    if (fs::exists(status)) {
      throw FileError(dir + ": is not a directory; give the checkpoint directory a run saved to "
                            "(the one holding `latest`)");
    }
    throw FileError(dir + ": checkpoint directory does not exist" +
                    (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")"
                                                                     : std::string()));
  }
  const std::string resolved = tag.empty() ? read_latest_tag(dir) : tag;
  if (!tag.empty() && !is_plain_tag(tag)) {
    throw ConfigError("checkpoint tag \"" + shown_tag(tag) +
                      "\" is not a folder name inside " + dir +
                      " (no '/', no '..', not starting with '.')");
  }
  if (!fs::is_directory(fs::path(dir) / resolved, ec)) {
    throw FileError(dir + ": checkpoint \"" + resolved + "\" does not exist" +
                    (tag.empty() ? " (named by " + (fs::path(dir) / "latest").string() +
                                       "); the folder was removed or renamed: write the tag of an "
                                       "existing checkpoint into latest"
                                 : std::string()));
  }
  return resolved;
}

}  // namespace zero::engine
