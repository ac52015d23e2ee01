// The `zero` command: dispatches to subcommands. Errors from the library are printed here and
// turned into exit codes; the library itself never exits.
#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  (void)argc;
  (void)argv;
  std::puts("zero: no subcommands yet");
  return 0;
}
