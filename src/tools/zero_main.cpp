// The `zero` command: dispatches to subcommands. Errors from the library are printed here and
// turned into exit codes; the library itself never exits.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "comm/world.h"
#include "core/error.h"
#include "tools/command.h"

namespace {

const char* kUsage =
    "usage: zero [COMMAND] [flags]\n"
    "\n"
    "commands:\n"
    "  train              train a model with a DeepSpeed config (the default)\n"
    "  convert            checkpoint -> Hugging Face folder: zero convert CKPT_DIR OUT_DIR\n"
    "  prepare            text/JSONL -> .bin token shards (tokenizer.json or bytes; loss masks)\n"
    "  inspect            describe a model folder, checkpoint, safetensors file or .bin shard\n"
    "  estimate           memory per GPU and node for ZeRO stages 0-3, offload, activations\n"
    "  launch             run `zero ARGS` on N ranks under mpirun: zero launch -n N -- ARGS\n"
    "  plot               training curves as PNG or SVG: zero plot LOG.jsonl [...] -o curve.png\n"
    "  tokenize           text -> token ids (or --decode ids -> text) with a tokenizer.json\n"
    "  generate           continue a prompt with a model (key/value cache, HF sampling)\n"
    "  forward-backward   one forward and backward pass on a random batch\n"
    "  help               this text\n"
    "\n"
    "`zero COMMAND --help` lists a command's flags. With no command, zero trains the\n"
    "built-in tiny model on the synthetic source and prints the loss floor next to the loss.\n";

}  // namespace

namespace {

// Prints the failure and returns `code`; in a multi-rank job it brings every rank down instead,
// so no rank waits forever in a collective for one that has failed.
int fail(const char* kind, const char* what, int code) {
  zero::comm::Comm& world = zero::comm::world();
  if (world.world_size() > 1) {
    std::fprintf(stderr, "zero: rank %d of %d: %s: %s\n", world.rank(), world.world_size(), kind, what);
    std::fflush(stderr);
    world.abort_job(code);
  } else {
    std::fprintf(stderr, "zero: %s: %s\n", kind, what);
  }
  return code;
}

int dispatch(const std::string& command, const std::vector<std::string>& args) {
  if (command == "train") return zero::tools::run_train(args);
  if (command == "convert") return zero::tools::run_convert(args);
  if (command == "prepare") return zero::tools::run_prepare(args);
  if (command == "inspect") return zero::tools::run_inspect(args);
  if (command == "estimate") return zero::tools::run_estimate(args);
  if (command == "launch") return zero::tools::run_launch(args);
  if (command == "plot") return zero::tools::run_plot(args);
  if (command == "tokenize") return zero::tools::run_tokenize(args);
  if (command == "generate") return zero::tools::run_generate(args);
  if (command == "forward-backward") return zero::tools::run_forward_backward(args);
  if (command == "help" || command == "-h" || command == "--help") {
    // `zero help COMMAND` is `zero COMMAND --help`.
    if (command == "help" && !args.empty() && args[0] != "help" && args[0].rfind("-", 0) != 0) {
      return dispatch(args[0], {"--help"});
    }
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::string shown = command.substr(0, 80);
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  std::fprintf(stderr, "zero: unknown command \"%s%s\"\n\n%s", shown.c_str(),
               command.size() > 80 ? "..." : "", kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command = "train";
  // `zero --help` is the program's help; other leading flags belong to the default `train`.
  if (!args.empty() && (args[0].rfind("--", 0) != 0 || args[0] == "--help")) {
    command = args[0];
    args.erase(args.begin());
  }
  try {
    zero::comm::WorldScope world_scope;
    try {
      return dispatch(command, args);
    } catch (const zero::InternalError& e) {
      return fail("internal error", e.what(), 3);
    } catch (const zero::Error& e) {
      return fail("error", e.what(), 2);
    } catch (const std::bad_alloc&) {
      // Memory, not a bug: something asked for more than this machine has.
      return fail("error",
                  "out of memory; a size on the command line, in the config or in a file is "
                  "larger than this machine can hold (lower batch, sequence or model sizes)",
                  2);
    } catch (const std::exception& e) {
      // A library exception that no reader turned into a zero::Error: a bug in zero.cpp.
      return fail("internal error", e.what(), 3);
    }
  } catch (const zero::Error& e) {
    std::fprintf(stderr, "zero: error: %s\n", e.what());
    return 2;
  }
}
