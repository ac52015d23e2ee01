// SwapFolder: the per-rank folder an NVMe swap keeps its files in, `nvme_path/<area>/rank<r>/`
// (area "zero_swap" for optimizer state, "zero_param_swap" for stage-3 parameters).
//
// Construction checks the folder the user named (it must exist, be a folder and be writable:
// ConfigError naming `key`, the config key that set it, and the fix), creates the rank folder and
// takes an exclusive flock on a ".lock" file in it: two swaps in one folder (two jobs sharing
// nvme_path with the same ranks) would truncate each other's files, so the second is a
// ConfigError. The destructor (or release()) drops the lock and removes the lock file, the rank
// folder and the area folder where they are empty; the files inside belong to the caller, who
// removes them first.
//
// Thread rules: owned by one swap; not shared.
#pragma once
#include <filesystem>
#include <string>

namespace zero::offload {

class SwapFolder {
 public:
  SwapFolder(const std::filesystem::path& nvme_path, const std::string& area, int rank,
             const std::string& key);
  ~SwapFolder() { release(); }
  SwapFolder(const SwapFolder&) = delete;
  SwapFolder& operator=(const SwapFolder&) = delete;

  const std::filesystem::path& directory() const { return directory_; }
  // Unlocks and removes the empty folders (idempotent).
  void release() noexcept;

 private:
  std::filesystem::path directory_;
  int lock_fd_ = -1;
};

}  // namespace zero::offload
