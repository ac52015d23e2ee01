// Helpers for the NVMe swap tests: scratch folders, aligned buffers, error expectations,
// an allocator that always fails.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "offload/aio_file.h"

namespace zero::offload::testing {

// A fresh folder under `parent` (default: the test's working directory, which ctest sets to the
// build tree: a real disk, where O_DIRECT normally works), removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag,
                      const std::filesystem::path& parent = std::filesystem::current_path()) {
    static int counter = 0;
    path_ = parent / ("zero_aio_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// `bytes` of 4096-aligned host memory (rounded up), freed on destruction.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t bytes)
      : size(bytes), data(static_cast<unsigned char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + 4096)),
                          &std::free) {}
  size_t size;
  std::unique_ptr<unsigned char, decltype(&std::free)> data;
  unsigned char* get() const { return data.get(); }
};

// Runs `f`, expects an exception of type E whose message contains every one of `needles`.
template <typename E, typename F>
void expect_error(F f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected a " << typeid(E).name();
  } catch (const E& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "missing \"" << needle << "\" in: " << e.what();
    }
  }
}

// While alive, every directory counts as refusing O_DIRECT (the buffered fallback).
struct RefuseDirectIo {
  RefuseDirectIo() { set_refuse_direct_io_for_testing(true); }
  ~RefuseDirectIo() { set_refuse_direct_io_for_testing(false); }
  RefuseDirectIo(const RefuseDirectIo&) = delete;
  RefuseDirectIo& operator=(const RefuseDirectIo&) = delete;
};

// Overwrites `bytes` bytes at `offset` of `path` with 0x3c (another process editing a swap file).
inline void scribble(const std::filesystem::path& path, int64_t offset, int64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::vector<char> junk(static_cast<size_t>(bytes), 0x3c);
  ASSERT_EQ(::pwrite(fd, junk.data(), junk.size(), offset), bytes);
  ::fsync(fd);
  ::close(fd);
}

// A tmpfs of `size` mounted over a scratch folder for the life of the object (needs
// CAP_SYS_ADMIN: `mounted()` is false where the test may not mount).
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const char* size) : dir_("full", std::filesystem::temp_directory_path()) {
    mounted_ = ::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  const std::filesystem::path& path() const { return dir_.path(); }

 private:
  ScratchDir dir_;
  bool mounted_ = false;
  std::string error_;
};

// Pinned memory that runs out (for the stores' failed-construction tests).
class ExhaustedAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }

 protected:
  void* raw_allocate(size_t bytes) override {
    throw Error("out of pinned memory for " + std::to_string(bytes) + " bytes");
  }
  void raw_deallocate(void*, size_t) override {}
};

}  // namespace zero::offload::testing

