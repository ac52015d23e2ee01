// Post-processors; see post_processor.h.
#include "data/tokenizer/post_processor.h"

#include "core/error.h"
#include "io/bounded_json.h"

namespace zero::data::tokenizer {
namespace {

// TemplateProcessing's single template: a list of special-token id runs and the sequence.
class TemplateProcessor : public PostProcessor {
 public:
  struct Item {
    bool is_sequence;
    std::vector<uint32_t> ids;
  };
  explicit TemplateProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void process(std::vector<uint32_t>& ids) const override {
    std::vector<uint32_t> out;
    out.reserve(ids.size() + 8);
    for (const Item& item : items_) {
      if (item.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    ids.swap(out);
  }
  std::vector<uint32_t> trailing_ids() const override {
    std::vector<uint32_t> trailing;
    for (size_t i = items_.size(); i-- > 0 && !items_[i].is_sequence;) {
      trailing.insert(trailing.begin(), items_[i].ids.begin(), items_[i].ids.end());
    }
    return trailing;
  }

 private:
  std::vector<Item> items_;
};

std::unique_ptr<PostProcessor> make_template(const Json& spec, const JsonPath& at) {
  const Json& single = require_field(spec, "single", at);
  const Json& specials = require_field(spec, "special_tokens", at);
  if (!single.is_array()) throw ConfigError(at.child("single").str() + " must be an array");
  std::vector<TemplateProcessor::Item> items;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonPath here = at.child("single").index(i);
    if (const Json* sequence = optional_field(single[i], "Sequence")) {
      const std::string name = string_field(*sequence, "id", here.child("Sequence"));
      if (name != "A") {
        throw ConfigError(here.str() + ": the single-sequence template refers to sequence \"" +
                          name + "\"; only A exists for one sequence");
      }
      items.push_back({true, {}});
    } else if (const Json* special = optional_field(single[i], "SpecialToken")) {
      const std::string name = string_field(*special, "id", here.child("SpecialToken"));
      const JsonPath entry = at.child("special_tokens").child(name);
      if (!specials.is_object() || !specials.contains(name)) {
        throw ConfigError(entry.str() + " is missing: the template uses the special token \"" +
                          name + "\"");
      }
      const Json& ids = require_field(specials[name], "ids", entry);
      if (!ids.is_array()) throw ConfigError(entry.child("ids").str() + " must be an array");
      TemplateProcessor::Item item{false, {}};
      for (const Json& id : ids) {
        if (!id.is_number_unsigned() || id.get<uint64_t>() >= 0xFFFFFFFFull) {
          throw ConfigError(entry.child("ids").str() + " must hold token ids, got " +
                            io::json_excerpt(id));
        }
        item.ids.push_back(static_cast<uint32_t>(id.get<uint64_t>()));
      }
      items.push_back(std::move(item));
    } else {
      throw ConfigError(here.str() + " must be {\"Sequence\": ...} or {\"SpecialToken\": ...}, got " +
                        io::json_excerpt(single[i]));
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(items));
}

// Roberta/Bert: [cls] A [sep]; the tokens are given as ["text", id].
std::unique_ptr<PostProcessor> make_cls_sep(const Json& spec, const JsonPath& at) {
  const auto id_of = [&](const std::string& key) {
    const Json& pair = require_field(spec, key, at);
    if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_unsigned() ||
        pair[1].get<uint64_t>() >= 0xFFFFFFFFull) {
      throw ConfigError(at.child(key).str() + " must be [\"token\", id], got " +
                        io::json_excerpt(pair));
    }
    return static_cast<uint32_t>(pair[1].get<uint64_t>());
  };
  std::vector<TemplateProcessor::Item> items;
  items.push_back({false, {id_of("cls")}});
  items.push_back({true, {}});
  items.push_back({false, {id_of("sep")}});
  return std::make_unique<TemplateProcessor>(std::move(items));
}

class NoIdsProcessor : public PostProcessor {
 public:
  void process(std::vector<uint32_t>&) const override {}
  std::vector<uint32_t> trailing_ids() const override { return {}; }
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<uint32_t>& ids) const override {
    for (const auto& step : steps_) step->process(ids);
  }
  std::vector<uint32_t> trailing_ids() const override {
    for (size_t i = steps_.size(); i-- > 0;) {
      auto ids = steps_[i]->trailing_ids();
      if (!ids.empty()) return ids;
    }
    return {};
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& spec, const JsonPath& at) {
  if (spec.is_null()) return nullptr;
  const std::string type = type_field(spec, at);
  if (type == "TemplateProcessing") return make_template(spec, at);
  if (type == "RobertaProcessing" || type == "BertProcessing") return make_cls_sep(spec, at);
  if (type == "ByteLevel") return std::make_unique<NoIdsProcessor>();
  if (type == "Sequence") {
    const Json& list = require_field(spec, "processors", at);
    if (!list.is_array()) throw ConfigError(at.child("processors").str() + " must be an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      if (auto step = make_post_processor(list[i], at.child("processors").index(i))) {
        steps.push_back(std::move(step));
      }
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  unsupported_type(at, "post-processor", type,
                   "TemplateProcessing, RobertaProcessing, BertProcessing, ByteLevel, Sequence");
}

}  // namespace zero::data::tokenizer
