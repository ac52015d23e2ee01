// Helpers for the NVMe swap tests: scratch folders, aligned buffers, error expectations.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <typeinfo>

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

}  // namespace zero::offload::testing

