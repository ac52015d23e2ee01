// Streaming tokenizer.json reader; see tokenizer_json_reader.h.
#include "data/tokenizer/tokenizer_json_reader.h"

#include "core/error.h"
#include "io/bounded_json.h"

namespace zero::data::tokenizer {
namespace {

enum class Mode { kNormal, kVocab, kMerges, kMergePair };

struct Frame {
  Json* container;  // nullptr for the special modes
  Mode mode;
  std::string key;  // the pending key of an object
};

// nlohmann's SAX interface: builds `out.root` except for model.vocab / model.merges.
class Handler {
 public:
  Handler(TokenizerJson& out, std::string origin) : out_(out), origin_(std::move(origin)) {}

  bool null() { return value(Json()); }
  bool boolean(bool v) { return value(Json(v)); }
  bool number_integer(int64_t v) { return value(Json(v)); }
  bool number_unsigned(uint64_t v) {
    if (!stack_.empty() && stack_.back().mode == Mode::kVocab) {
      if (v >= 0xFFFFFFFFull) bad_vocab("an id below 2^32 - 1");
      out_.tables.vocab.emplace_back(std::move(stack_.back().key), static_cast<uint32_t>(v));
      return true;
    }
    return value(Json(v));
  }
  bool number_float(double v, const std::string&) { return value(Json(v)); }
  bool string(std::string& v) {
    if (!stack_.empty()) {
      Frame& top = stack_.back();
      if (top.mode == Mode::kMerges) {
        const size_t space = v.find(' ');
        if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
          throw ConfigError(merge_path() + ": a merge must be two tokens separated by one space, got \"" +
                            v + "\"");
        }
        out_.tables.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
        return true;
      }
      if (top.mode == Mode::kMergePair) {
        pair_.push_back(std::move(v));
        if (pair_.size() > 2) bad_merge();
        return true;
      }
    }
    return value(Json(std::move(v)));
  }
  bool binary(Json::binary_t&) { return value(Json()); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) {
    if (!stack_.empty() && stack_.back().mode == Mode::kMerges) {
      pair_.clear();
      stack_.push_back({nullptr, Mode::kMergePair, {}});
      return true;
    }
    return open(Json::array());
  }
  bool key(std::string& k) {
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() {
    stack_.pop_back();
    return true;
  }
  bool end_array() {
    if (stack_.back().mode == Mode::kMergePair) {
      if (pair_.size() != 2) bad_merge();
      out_.tables.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
    }
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    throw FileError(origin_ + ": the tokenizer (tokenizer.json) is not valid JSON (at byte " +
                    std::to_string(position) + "); is the file complete?");
  }

 private:
  // Where a new value goes; the special modes take no values but their own.
  Json* place(Json&& v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    Frame& top = stack_.back();
    switch (top.mode) {
      case Mode::kVocab:
        bad_vocab("a token id (a non-negative integer)");
      case Mode::kMerges:
      case Mode::kMergePair:
        bad_merge();
      case Mode::kNormal:
        break;
    }
    if (top.container->is_object()) return &((*top.container)[top.key] = std::move(v));
    top.container->push_back(std::move(v));
    return &top.container->back();
  }

  bool value(Json&& v) {
    place(std::move(v));
    return true;
  }

  bool open(Json&& container) {
    if (stack_.size() + 1 > static_cast<size_t>(io::kMaxJsonDepth)) {
      throw FileError(origin_ + ": the tokenizer (tokenizer.json) nests deeper than " +
                      std::to_string(io::kMaxJsonDepth) + " levels; this is not a tokenizer.json");
    }
    // model.vocab and model.merges: the members of "model" at the top level.
    Mode mode = Mode::kNormal;
    if (stack_.size() == 2 && stack_[0].key == "model" && stack_[1].container->is_object()) {
      const std::string& key = stack_[1].key;
      if (key == "vocab" && container.is_object()) mode = Mode::kVocab, out_.tables.has_vocab = true;
      if (key == "merges" && container.is_array()) mode = Mode::kMerges, out_.tables.has_merges = true;
    }
    Json* placed = place(std::move(container));
    stack_.push_back({mode == Mode::kNormal ? placed : nullptr, mode, {}});
    return true;
  }

  std::string merge_path() const {
    return origin_ + ": model.merges[" + std::to_string(out_.tables.merges.size()) + "]";
  }
  [[noreturn]] void bad_merge() const {
    throw ConfigError(merge_path() + ": a merge must be \"left right\" or [\"left\", \"right\"]");
  }
  [[noreturn]] void bad_vocab(const std::string& expected) const {
    throw ConfigError(origin_ + ": model.vocab[\"" + stack_.back().key + "\"] must be " + expected);
  }

  TokenizerJson& out_;
  std::string origin_;
  std::vector<Frame> stack_;
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson read_tokenizer_json(std::string_view text, const std::string& origin) {
  TokenizerJson out;
  Handler handler(out, origin);
  try {
    Json::sax_parse(text.begin(), text.end(), &handler);
  } catch (const nlohmann::json::exception& e) {
    throw FileError(origin + ": the tokenizer (tokenizer.json) could not be read as JSON (" +
                    e.what() + ")");
  }
  return out;
}

}  // namespace zero::data::tokenizer
