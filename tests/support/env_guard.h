// Sets (or, for std::nullopt, unsets) an environment variable for the guard's lifetime and puts
// back whatever was there before, however the test ends. Tests of settings read from the
// environment use it; the process's environment is global, so such tests must not run on
// several threads at once (GoogleTest runs a binary's tests one at a time).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace zero::test_support {

class EnvGuard {
 public:
  EnvGuard(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvGuard() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace zero::test_support
