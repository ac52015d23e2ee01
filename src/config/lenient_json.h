// Reading DeepSpeed config text as DeepSpeed reads it. DeepSpeed loads configs with hjson, so
// every JSON file and every HJSON file is a config:
//   - root braces are optional (a file of `key: value` lines is an object);
//   - comments: `# ...` and `// ...` to the end of the line, `/* ... */`;
//   - keys may be unquoted (`stage: 3`) or in single quotes;
//   - strings may be unquoted (`type: AdamW`: the rest of the line, trailing blanks dropped),
//     in single quotes, or multiline between ''' and ''' (the opening column's indent removed);
//   - commas between members and elements are optional, trailing commas are fine.
// A quoteless value that reads as true/false/null or a number is that value, as in hjson.
// Every problem is reported as "<source>:<line>:<column>: ..." so the user can jump to it.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace zero::config {

// Full key path ("zero_optimization.stage", "optimizer.params.betas") -> 1-based line where the
// key is written, so messages about a key can point at its line.
using KeyLines = std::map<std::string, size_t>;

// Parses one config document. Throws ConfigError (naming `source_name`, line and column) on
// malformed input, on invalid UTF-8 in a string, on nesting deeper than 256 levels, and on a key
// repeated within one object (JSON parsers silently keep the last one; DeepSpeed rejects
// duplicates, and so do we, naming the full key path). Integers that fit int64 (or uint64) stay
// integers; other numbers become doubles. When `key_lines` is given it receives every key's line.
nlohmann::json parse_lenient_json(std::string_view text, const std::string& source_name,
                                  KeyLines* key_lines = nullptr);

}  // namespace zero::config
