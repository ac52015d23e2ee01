// Checkpoint directory layout and atomic commits, DeepSpeed-like:
//   DIR/<tag>/...   one checkpoint (tag defaults to "global_step<N>")
//   DIR/latest      text file holding the newest complete tag
// A checkpoint is written into a hidden temporary folder, every file fsynced, then renamed to
// DIR/<tag>, the directory fsynced, and only then `latest` is replaced (atomically). A crash or
// kill at any point leaves the previous checkpoint and `latest` intact.
#pragma once
#include <functional>
#include <string>

namespace zero::engine {

// Test hook: called with a stage name ("files_written", "renamed") during commit; a test can
// throw from it to simulate a crash at that point. Null in normal runs.
using CheckpointCrashHook = std::function<void(const std::string& stage)>;
void set_checkpoint_crash_hook(CheckpointCrashHook hook);

class CheckpointWriter {
 public:
  // Prepares DIR/.tmp-<tag>-<id>/ (removing a stale one); `id` defaults to this process's pid.
  // Ranks of one job pass the same id (rank 0's pid) so they all write into one folder that
  // rank 0 alone creates and commits (staging_path). Throws FileError when DIR cannot be
  // created.
  CheckpointWriter(std::string dir, std::string tag, long id = -1);
  // The staging folder a writer with these arguments uses (for ranks that write into it).
  static std::string staging_path(const std::string& dir, const std::string& tag, long id);
  ~CheckpointWriter();  // removes the temporary folder if commit() did not happen
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Where to write this checkpoint's files before commit().
  const std::string& staging_dir() const { return staging_; }
  // fsyncs the staged files, moves them to DIR/<tag> (replacing an older checkpoint of the same
  // tag), fsyncs DIR, then points DIR/latest at the tag.
  void commit();

 private:
  std::string dir_;
  std::string tag_;
  std::string staging_;
  bool committed_ = false;
};

// The tag to load: `tag` if non-empty, else the one DIR/latest names (read_latest_tag); either
// must be a folder directly inside DIR. Resume, `zero convert` and `zero inspect` all resolve
// through this. Throws FileError naming the path when DIR, DIR/latest or DIR/<tag> is missing,
// and ConfigError for an explicit tag that is not a plain folder name.
std::string resolve_checkpoint_tag(const std::string& dir, const std::string& tag);

// The tag DIR/latest names: a small regular file holding a plain folder name (a trailing newline
// is allowed). A `latest` that names a path ("../other/global_step2", "/abs") or nothing is a
// FileError naming the file, as is a missing, oversized or non-regular `latest`.
std::string read_latest_tag(const std::string& dir);

// A tag must be a plain folder name: not empty, no '/' or backslash, not starting with '.' (so not "."
// or ".."), no control characters, at most 255 bytes. Throws ConfigError.
void validate_tag(const std::string& tag);

}  // namespace zero::engine
