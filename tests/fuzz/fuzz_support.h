// Shared by the fuzz harnesses: what counts as a finding, and a scratch folder per process for
// readers that only take a path (the harness writes the input there and calls the same path
// function the program calls).
#pragma once
#include <cxxabi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

#include "core/error.h"

namespace zero::fuzz {

// A finding the sanitizers cannot see: print it and abort, so libFuzzer reports a crash and
// saves the input.
[[noreturn]] inline void report_finding(const std::string& what, const char* message) {
  std::fprintf(stderr, "\n==FINDING== %s escaped the reader: %s\n", what.c_str(), message);
  std::abort();
}

inline std::string readable_type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

// Runs one reader call on fuzz input. A zero::Error is the reader rejecting bad input with a
// message: expected. An InternalError (ZERO_CHECK) means the input reached a state the code
// assumes impossible, and any other exception (nlohmann::json, std::out_of_range, ...) slipped
// past the reader's validation: both are findings. Sanitizer reports, hangs and running out of
// memory are caught by libFuzzer itself.
template <class Fn>
void expect_only_user_errors(Fn&& read) {
  try {
    read();
  } catch (const InternalError& e) {
    report_finding("zero::InternalError", e.what());
  } catch (const Error& e) {
    // Rejected with a message: the reader did its job. ZERO_FUZZ_VERBOSE=1 prints the message,
    // to check that seeds get past the checks they are meant to pass.
    static const bool verbose = std::getenv("ZERO_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
  } catch (const std::exception& e) {
    report_finding(readable_type_name(typeid(e)), e.what());
  }
}

inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Where scratch folders go: /dev/shm (memory) when the machine has it, since writing each input
// to a disk-backed /tmp made the path-taking harnesses about 20x slower; else the temp folder.
inline std::filesystem::path scratch_root() {
  std::error_code error;
  if (std::filesystem::is_directory("/dev/shm", error) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return std::filesystem::temp_directory_path();
}

// A temporary folder for this process (pid in the name, so parallel fuzzers never share one),
// removed when the process exits normally (a crash leaves it for inspection).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& reader)
      : dir_(scratch_root() / ("zero_fuzz_" + reader + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Replaces DIR/name with the bytes; returns its path.
  std::string write(const std::string& name, std::string_view bytes) const {
    const std::string file = path(name);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::fprintf(stderr, "fuzz harness: cannot write %s\n", file.c_str());
      std::abort();
    }
    return file;
  }

 private:
  std::filesystem::path dir_;
};

// Readers that describe what they read (`zero inspect`, --help) print to stdout; libFuzzer
// reports on stderr, so stdout goes to /dev/null to keep the logs readable and the runs fast.
inline void silence_stdout() {
  if (std::freopen("/dev/null", "w", stdout) == nullptr) std::perror("freopen /dev/null");
}

}  // namespace zero::fuzz
