// Tests for core/dtype.h: the table, the pinned numeric codes (stored in checkpoints, so a
// renumbering must fail here), name parsing with its aliases and error messages, and the
// safetensors and code lookups.
#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/error_message.h"

namespace zero {
namespace {

TEST(DType, PinnedCodes) {
  // These numbers are written to checkpoints and wire formats: never change them.
  EXPECT_EQ(dtype_code(DType::kF32), 0);
  EXPECT_EQ(dtype_code(DType::kF64), 1);
  EXPECT_EQ(dtype_code(DType::kF16), 2);
  EXPECT_EQ(dtype_code(DType::kBF16), 3);
  EXPECT_EQ(dtype_code(DType::kI32), 4);
  EXPECT_EQ(dtype_code(DType::kI64), 5);
  EXPECT_EQ(dtype_code(DType::kU8), 6);
  EXPECT_EQ(dtype_code(DType::kU16), 7);
  EXPECT_EQ(dtype_code(DType::kU32), 8);
  static_assert(sizeof(DType) == 1);
}

TEST(DType, TableSizesNamesAndKinds) {
  struct Expected {
    DType dtype;
    const char* name;
    const char* safetensors;
    size_t size;
    bool floating;
  };
  const Expected expected[] = {
      {DType::kF32, "f32", "F32", 4, true},   {DType::kF64, "f64", "F64", 8, true},
      {DType::kF16, "f16", "F16", 2, true},   {DType::kBF16, "bf16", "BF16", 2, true},
      {DType::kI32, "i32", "I32", 4, false},  {DType::kI64, "i64", "I64", 8, false},
      {DType::kU8, "u8", "U8", 1, false},     {DType::kU16, "u16", "U16", 2, false},
      {DType::kU32, "u32", "U32", 4, false},
  };
  ASSERT_EQ(std::size(kDTypeTable), std::size(expected));
  for (const auto& e : expected) {
    SCOPED_TRACE(e.name);
    EXPECT_EQ(dtype_size(e.dtype), e.size);
    EXPECT_STREQ(dtype_name(e.dtype), e.name);
    EXPECT_EQ(dtype_is_floating(e.dtype), e.floating);
    EXPECT_EQ(dtype_info(e.dtype).dtype, e.dtype);
    EXPECT_STREQ(dtype_info(e.dtype).safetensors_name, e.safetensors);
  }
}

TEST(DType, TableEntriesAreDistinct) {
  std::set<int> codes;
  std::set<std::string> names;
  std::set<std::string> safetensors_names;
  for (const auto& info : kDTypeTable) {
    codes.insert(dtype_code(info.dtype));
    names.insert(info.name);
    safetensors_names.insert(info.safetensors_name);
  }
  EXPECT_EQ(codes.size(), std::size(kDTypeTable));
  EXPECT_EQ(names.size(), std::size(kDTypeTable));
  EXPECT_EQ(safetensors_names.size(), std::size(kDTypeTable));
}

TEST(DType, DTypeOfMatchesTheCppTypes) {
  static_assert(DTypeOf<float>::value == DType::kF32);
  static_assert(DTypeOf<double>::value == DType::kF64);
  static_assert(DTypeOf<int32_t>::value == DType::kI32);
  static_assert(DTypeOf<int64_t>::value == DType::kI64);
  static_assert(DTypeOf<uint8_t>::value == DType::kU8);
  static_assert(DTypeOf<uint16_t>::value == DType::kU16);
  static_assert(DTypeOf<uint32_t>::value == DType::kU32);
  EXPECT_EQ(dtype_size(DType::kF32), sizeof(float));
  EXPECT_EQ(dtype_size(DType::kF64), sizeof(double));
  EXPECT_EQ(dtype_size(DType::kI64), sizeof(int64_t));
}

TEST(DType, UnknownEnumValueIsAnInternalError) {
  EXPECT_THROW(dtype_info(static_cast<DType>(200)), InternalError);
}

TEST(DTypeParse, OwnNamesSafetensorsSpellingsAndAliases) {
  for (const auto& info : kDTypeTable) {
    EXPECT_EQ(parse_dtype(info.name), info.dtype) << info.name;
    EXPECT_EQ(parse_dtype(info.safetensors_name), info.dtype) << info.safetensors_name;
  }
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float"), DType::kF32);
  EXPECT_EQ(parse_dtype("float64"), DType::kF64);
  EXPECT_EQ(parse_dtype("fp64"), DType::kF64);
  EXPECT_EQ(parse_dtype("double"), DType::kF64);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("int32"), DType::kI32);
  EXPECT_EQ(parse_dtype("int64"), DType::kI64);
  EXPECT_EQ(parse_dtype("uint8"), DType::kU8);
  EXPECT_EQ(parse_dtype("uint16"), DType::kU16);
  EXPECT_EQ(parse_dtype("uint32"), DType::kU32);
  // Case-insensitive (HF configs write "bfloat16", users write "BF16" or "Float16").
  EXPECT_EQ(parse_dtype("BFloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("FP16"), DType::kF16);
  EXPECT_EQ(parse_dtype("Float"), DType::kF32);
}

TEST(DTypeParse, UnknownNameIsAConfigErrorNamingValueAndChoices) {
  EXPECT_THROW(parse_dtype("f8"), ConfigError);
  EXPECT_THROW(parse_dtype(""), ConfigError);
  EXPECT_THROW(parse_dtype(" f32"), ConfigError);  // no silent trimming
  EXPECT_THROW(parse_dtype("bf"), ConfigError);
  const std::string message =
      error_message([] { parse_dtype("float8_e4m3", "optimizer.master_dtype"); });
  EXPECT_NE(message.find("optimizer.master_dtype"), std::string::npos) << message;
  EXPECT_NE(message.find("\"float8_e4m3\""), std::string::npos) << message;
  for (const auto& info : kDTypeTable) {
    EXPECT_NE(message.find(info.name), std::string::npos) << info.name << " in " << message;
  }
  EXPECT_NE(message.find("f32, f64, f16, bf16"), std::string::npos) << message;
  // The default `what`.
  const std::string default_message = error_message([] { parse_dtype("Quad"); });
  EXPECT_EQ(default_message.rfind("dtype: ", 0), 0u) << default_message;
  EXPECT_NE(default_message.find("\"Quad\""), std::string::npos) << default_message;  // as given
}

TEST(DTypeSafetensors, ExactSpellingsOnly) {
  for (const auto& info : kDTypeTable) {
    DType out = DType::kU8;
    if (info.dtype == DType::kU8) out = DType::kF32;
    EXPECT_TRUE(dtype_from_safetensors(info.safetensors_name, &out)) << info.safetensors_name;
    EXPECT_EQ(out, info.dtype);
  }
  // Unknown or other spellings: false, and the output is left alone.
  for (const char* text : {"f32", "bf16", "float32", "BOOL", "I8", "F8_E4M3", ""}) {
    DType out = DType::kU16;
    EXPECT_FALSE(dtype_from_safetensors(text, &out)) << text;
    EXPECT_EQ(out, DType::kU16) << text;
  }
}

TEST(DTypeCode, RoundTripsAndRejectsUnknownCodes) {
  for (const auto& info : kDTypeTable) {
    EXPECT_EQ(dtype_from_code(dtype_code(info.dtype)), info.dtype);
  }
  EXPECT_EQ(dtype_from_code(3), DType::kBF16);
  EXPECT_THROW(dtype_from_code(9), FileError);
  EXPECT_THROW(dtype_from_code(255), FileError);
  EXPECT_THROW(dtype_from_code(256), FileError);  // not truncated to a uint8_t (256 -> 0)
  EXPECT_THROW(dtype_from_code(0xffffffffu), FileError);
  const std::string message = error_message([] { dtype_from_code(42); });
  EXPECT_NE(message.find("42"), std::string::npos) << message;
}

}  // namespace
}  // namespace zero
