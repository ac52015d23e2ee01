// The one DType table. Numeric codes are pinned: checkpoints and wire formats store them, so a
// code never changes meaning. Size, name and parsing all come from the same table.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zero {

enum class DType : uint8_t {
  kF32 = 0,
  kF64 = 1,
  kF16 = 2,
  kBF16 = 3,
  kI32 = 4,
  kI64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
};

struct DTypeInfo {
  DType dtype;
  const char* name;              // zero's own name: "f32", "bf16", ...
  const char* safetensors_name;  // the safetensors header spelling: "F32", "BF16", ...
  size_t size_bytes;
  bool is_floating;
};

inline constexpr DTypeInfo kDTypeTable[] = {
    {DType::kF32, "f32", "F32", 4, true},   {DType::kF64, "f64", "F64", 8, true},
    {DType::kF16, "f16", "F16", 2, true},   {DType::kBF16, "bf16", "BF16", 2, true},
    {DType::kI32, "i32", "I32", 4, false},  {DType::kI64, "i64", "I64", 8, false},
    {DType::kU8, "u8", "U8", 1, false},     {DType::kU16, "u16", "U16", 2, false},
    {DType::kU32, "u32", "U32", 4, false},
};

const DTypeInfo& dtype_info(DType dtype);
inline size_t dtype_size(DType dtype) { return dtype_info(dtype).size_bytes; }
inline const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }
inline bool dtype_is_floating(DType dtype) { return dtype_info(dtype).is_floating; }

// Parses zero's names ("f32", "bf16"), common aliases ("float32", "bfloat16", "fp16") and
// safetensors spellings ("F32", "BF16"). Throws ConfigError naming `what` on failure.
DType parse_dtype(std::string_view text, std::string_view what = "dtype");
// Only the safetensors spellings; returns false if unknown.
bool dtype_from_safetensors(std::string_view text, DType* out);
// Pinned numeric code <-> DType; throws FileError for an unknown code.
inline uint8_t dtype_code(DType dtype) { return static_cast<uint8_t>(dtype); }
DType dtype_from_code(uint32_t code);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::kI32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::kI64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::kU8; };
template <> struct DTypeOf<uint16_t> { static constexpr DType value = DType::kU16; };
template <> struct DTypeOf<uint32_t> { static constexpr DType value = DType::kU32; };

}  // namespace zero
