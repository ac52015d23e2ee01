// Metaspace options; see metaspace.h.
#include "data/tokenizer/metaspace.h"

#include "core/error.h"
#include "data/tokenizer/utf8.h"

namespace zero::data::tokenizer {

MetaspaceOptions parse_metaspace(const Json& spec, const JsonPath& at) {
  MetaspaceOptions options;
  options.replacement = string_field(spec, "replacement", at);
  size_t end = 0;
  if (options.replacement.empty() ||
      (next_code_point(options.replacement, end), end != options.replacement.size())) {
    throw ConfigError(at.child("replacement").str() + " must be exactly one character, got \"" +
                      options.replacement + "\"");
  }
  if (const Json* scheme = optional_field(spec, "prepend_scheme")) {
    const std::string name = scheme->is_string() ? scheme->get<std::string>() : "";
    if (name == "always") {
      options.prepend_scheme = PrependScheme::kAlways;
    } else if (name == "first") {
      options.prepend_scheme = PrependScheme::kFirst;
    } else if (name == "never") {
      options.prepend_scheme = PrependScheme::kNever;
    } else {
      throw ConfigError(at.child("prepend_scheme").str() +
                        " must be \"always\", \"first\" or \"never\"");
    }
  } else {
    options.prepend_scheme = bool_field(spec, "add_prefix_space", at, true) ? PrependScheme::kAlways
                                                                             : PrependScheme::kNever;
  }
  options.split = bool_field(spec, "split", at, true);
  return options;
}

}  // namespace zero::data::tokenizer
