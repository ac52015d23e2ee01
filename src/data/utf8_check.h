// Strict UTF-8 validation for corpus text: tokenizers other than the byte tokenizer work on
// Unicode text, and invalid bytes would otherwise be tokenized into something nobody meant (or
// throw from deep inside the tokenizer without saying where the bad byte is).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace zero::data {

// The byte offset of the first byte that does not start or continue a well-formed UTF-8
// sequence (RFC 3629: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF,
// no truncated sequence at the end); nullopt when `text` is valid UTF-8. The tokenizer's
// validator (data/tokenizer/utf8.h) answering as an optional: one decoder of UTF-8 in zero.
std::optional<size_t> invalid_utf8_offset(std::string_view text);

// The 1-based line number of byte `offset` in `text` (lines end at '\n'), for messages.
int64_t line_of_offset(std::string_view text, size_t offset);

}  // namespace zero::data
