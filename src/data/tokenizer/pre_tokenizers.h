// tokenizer.json "pre_tokenizer": cuts each normalized piece into the words the BPE model sees.
// Supported: ByteLevel (GPT-2 regex optional, bytes -> byte-level characters), Split (String or
// Regex pattern, every split behaviour, invert), Metaspace (prepend_scheme always/first/never,
// split), Sequence. Anything else is a ConfigError naming its path.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer/json_fields.h"

namespace zero::data::tokenizer {

// Receives each word: a view valid only during the call, and whether it begins at byte 0 of
// the text given to encode() (Metaspace's prepend_scheme "first" prepends only there).
// A non-owning callable reference: no allocation per word.
class WordSink {
 public:
  template <typename F>
  WordSink(F& f)  // NOLINT: implicit on purpose, like std::function_ref
      : object_(&f), call_([](void* o, std::string_view w, bool s) { (*static_cast<F*>(o))(w, s); }) {}
  void operator()(std::string_view word, bool at_start) const { call_(object_, word, at_start); }

 private:
  void* object_;
  void (*call_)(void*, std::string_view, bool);
};

// How a pre-tokenizer treats a line start: a position after "\n" that follows a printable
// non-space ASCII character, before an ASCII letter (parallel_encode.h cuts long texts there).
enum class LineCut {
  kUnknown,      // no promise: the text must not be cut
  kTransparent,  // never joins or cuts words (ByteLevel without regex or prefix space)
  kCuts,         // always ends a word there, whatever comes before or after
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual LineCut line_cut() const { return LineCut::kUnknown; }
  // Cuts `text` into words and passes each non-empty one to `emit`, in order.
  virtual void pre_tokenize(std::string_view text, bool at_start, const WordSink& emit) const = 0;
};

// null JSON -> nullptr (the whole piece is one word).
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& spec, const JsonPath& at);

}  // namespace zero::data::tokenizer
