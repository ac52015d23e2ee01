// zero::Error hierarchy: user-facing problems (bad config, bad files, bad shapes, unsupported
// combinations). Messages must name the offending file/key/value and say how to fix it.
// Internal invariants use ZERO_CHECK (check.h) instead.
#pragma once
#include <stdexcept>
#include <string>

namespace zero {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A configuration value (DeepSpeed JSON, HF config.json, command-line flag) is missing or invalid.
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A file is missing, truncated, or its contents contradict its own header.
class FileError : public Error {
 public:
  using Error::Error;
};

// Tensor shapes or dtypes do not fit together.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A request the code understands but does not support (yet): says what is unsupported.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

// Training diverged numerically (for example fp16 gradients overflow at the minimum loss scale):
// the message names the step, what was observed and what to change.
class NumericError : public Error {
 public:
  using Error::Error;
};

// An internal invariant failed: a bug in zero.cpp, not in the user's input.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace zero
