#include "core/dtype.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "core/error.h"

namespace zero {

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& info : kDTypeTable) {
    if (info.dtype == dtype) return info;
  }
  ZERO_CHECK(false, "unknown DType code " << static_cast<int>(dtype));
  return kDTypeTable[0];
}

bool dtype_from_safetensors(std::string_view text, DType* out) {
  for (const auto& info : kDTypeTable) {
    if (text == info.safetensors_name) {
      *out = info.dtype;
      return true;
    }
  }
  return false;
}

DType parse_dtype(std::string_view text, std::string_view what) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  struct Alias {
    const char* name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kF32}, {"fp32", DType::kF32},    {"float", DType::kF32},
      {"float64", DType::kF64}, {"fp64", DType::kF64},    {"double", DType::kF64},
      {"float16", DType::kF16}, {"fp16", DType::kF16},    {"half", DType::kF16},
      {"bfloat16", DType::kBF16}, {"int32", DType::kI32}, {"int64", DType::kI64},
      {"uint8", DType::kU8},    {"uint16", DType::kU16},  {"uint32", DType::kU32},
  };
  for (const auto& info : kDTypeTable) {
    if (lower == info.name) return info.dtype;
  }
  for (const auto& alias : kAliases) {
    if (lower == alias.name) return alias.dtype;
  }
  std::string known;
  for (const auto& info : kDTypeTable) known += std::string(known.empty() ? "" : ", ") + info.name;
  throw ConfigError(std::string(what) + ": unknown dtype \"" + std::string(text) +
                    "\"; expected one of " + known + " (or float32, float16, bfloat16, ...)");
}

DType dtype_from_code(uint32_t code) {
  for (const auto& info : kDTypeTable) {
    if (static_cast<uint32_t>(info.dtype) == code) return info.dtype;
  }
  throw FileError("unknown dtype code " + std::to_string(code) +
                  " (file written by a newer zero.cpp, or corrupted)");
}

}  // namespace zero
