// Fuzzes command-line flag parsing as the `zero` subcommands do it: the input is the argument
// vector (arguments separated by NUL bytes, which no real argument can contain), parsed by an
// ArgParser that declares the flags of `zero train` and `zero launch`; then every flag is read
// back with get(), get_int(), get_double() and get_bool() as the commands read their flags (a
// ConfigError for a value of the wrong kind is expected).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tools/arg_parser.h"

namespace {

struct Flag {
  const char* name;
  const char* default_value;
};

// `zero train`'s flags (its defaults), plus `zero launch`'s.
constexpr Flag kFlags[] = {
    {"deepspeed", ""},     {"model", "tiny"},    {"data", "synthetic"}, {"eval-data", ""},
    {"eval-every", "0"},   {"seq-len", "64"},    {"steps", "1000"},     {"save", ""},
    {"save-every", "0"},   {"resume", ""},       {"seed", "1234"},      {"log-json", ""},
    {"micro-batch", ""},   {"grad-accum", ""},   {"lr", ""},            {"gradient-checkpointing", "false"},
    {"np", ""},            {"hostfile", ""},     {"mpirun", "mpirun"},  {"oversubscribe", ""},
    {"dry-run", ""},
};

std::vector<std::string> split_arguments(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  if (size == 0) return args;
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  args.push_back(current);
  return args;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  zero::fuzz::silence_stdout();  // --help prints the usage
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zero::tools::ArgParser parser("fuzz", split_arguments(data, size));
  for (const Flag& flag : kFlags) parser.option(flag.name, flag.default_value, "fuzzed flag");
  bool parsed = false;
  zero::fuzz::expect_only_user_errors([&] { parsed = parser.parse(); });
  if (!parsed) return 0;
  for (const Flag& flag : kFlags) {
    (void)parser.get(flag.name);
    zero::fuzz::expect_only_user_errors([&] { (void)parser.get_int(flag.name); });
    zero::fuzz::expect_only_user_errors([&] { (void)parser.get_double(flag.name); });
    zero::fuzz::expect_only_user_errors([&] { (void)parser.get_bool(flag.name); });
  }
  (void)parser.usage();
  return 0;
}
