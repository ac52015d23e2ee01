// `zero launch -n N [--hostfile FILE] [--oversubscribe] [--dry-run] -- ARGS`: runs `zero ARGS`
// on N ranks through OpenMPI's mpirun, the way `deepspeed --hostfile` runs a script: it reads
// DeepSpeed's hostfile (comm::read_hostfile), hands the hosts to mpirun as --host h:slots,...,
// sizes OMP_NUM_THREADS so the ranks on a host share its cores instead of each taking all of
// them, and returns mpirun's exit status. --dry-run prints the command instead.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "comm/hostfile.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "tools/arg_parser.h"
#include "tools/command.h"

extern char** environ;

namespace zero::tools {
namespace {

namespace fs = std::filesystem;

// The most ranks one launch starts (as many as a checkpoint may record).
constexpr int64_t kMaxRanks = int64_t{1} << 20;

// Quotes an argument for the printed command line only when a shell would split or expand it.
std::string shell_quote(const std::string& arg) {
  const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,@+%", c) != nullptr;
  });
  if (plain) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

int64_t local_cores() {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

// This executable, so every rank runs the same build as the launcher.
std::string self_path() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error) throw FileError("zero launch: cannot resolve /proc/self/exe (" + error.message() + ")");
  return exe.string();
}

int run_process(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  for (const std::string& a : argv) pointers.push_back(const_cast<char*>(a.c_str()));
  pointers.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = 0;
  const int spawn_error = ::posix_spawnp(&pid, argv[0].c_str(), nullptr, nullptr, pointers.data(), environ);
  if (spawn_error != 0) {
    throw FileError("zero launch: cannot run " + argv[0] + " (" + std::strerror(spawn_error) +
                    "); install OpenMPI or pass --mpirun PATH");
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw FileError(std::string("zero launch: waiting for mpirun failed: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "zero launch: %s was killed by signal %d\n", argv[0].c_str(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 1;
}

}  // namespace

int run_launch(const Args& args) {
  const auto separator = std::find(args.begin(), args.end(), std::string("--"));
  const Args command(separator == args.end() ? args.end() : separator + 1, args.end());
  // Bare switches and mpirun's -n spelling become flags ArgParser understands.
  bool dry_run = false, oversubscribe = false;
  Args flags;
  for (auto it = args.begin(); it != separator; ++it) {
    if (*it == "--dry-run") dry_run = true;
    else if (*it == "--oversubscribe") oversubscribe = true;
    else if (*it == "-n" || *it == "-np") flags.push_back("--np");
    else if (it->rfind("-n=", 0) == 0) flags.push_back("--np=" + it->substr(3));
    else flags.push_back(*it);
  }
  const bool wants_help = std::find(flags.begin(), flags.end(), "--help") != flags.end() ||
                          std::find(flags.begin(), flags.end(), "-h") != flags.end();
  if (!wants_help && (separator == args.end() || command.empty())) {
    throw ConfigError("zero launch: put the zero command after --, e.g. `zero launch -n 2 -- train --model tiny`");
  }
  ArgParser parser("launch", flags);
  parser.synopsis("zero launch -n N [--hostfile FILE] [--oversubscribe] [--dry-run] -- ARGS",
                  "then: -- ARGS, the zero command each rank runs (e.g. -- train --model tiny)\n");
  parser.option("np", "", "ranks to start, also -n N (default: the hostfile's total slots)")
      .option("hostfile", "", "DeepSpeed hostfile: `hostname slots=N` per line")
      .option("mpirun", "mpirun", "the mpirun to run (OpenMPI)")
      .option("oversubscribe", "", "a bare flag: allow more ranks than slots (or cores)")
      .option("dry-run", "", "a bare flag: print the mpirun command instead of running it");
  if (!parser.parse()) return 0;
  const std::string hostfile = parser.get("hostfile");
  std::optional<std::vector<comm::HostSlots>> hosts;
  // read_hostfile takes only a regular file of hostfile size (a FIFO or /dev/zero is refused).
  if (!hostfile.empty()) hosts = comm::read_hostfile(hostfile);
  int64_t ranks = 0;
  if (!parser.get("np").empty()) {
    const std::string text = parser.get("np");
    const std::optional<int64_t> parsed = parse_int64(text);
    if (!parsed) {
      throw ConfigError("zero launch: -n must be a number of ranks, got \"" + ArgParser::shown(text) + "\"");
    }
    ranks = *parsed;
    if (ranks < 1) throw ConfigError("zero launch: -n must be at least 1, got " + std::to_string(ranks));
    if (ranks > kMaxRanks) {
      throw ConfigError("zero launch: -n must be at most " + std::to_string(kMaxRanks) + ", got " +
                        std::to_string(ranks));
    }
  } else if (hosts) {
    ranks = comm::total_slots(*hosts);
  } else {
    throw ConfigError("zero launch: -n N is needed without --hostfile (how many ranks to start)");
  }
  const int64_t cores = local_cores();
  if (hosts && ranks > comm::total_slots(*hosts) && !oversubscribe) {
    throw ConfigError("zero launch: -n " + std::to_string(ranks) + " is more than the " +
                      std::to_string(comm::total_slots(*hosts)) + " slots in " + hostfile +
                      "; add slots or pass --oversubscribe");
  }
  if (!hosts && ranks > cores && !oversubscribe) {
    throw ConfigError("zero launch: -n " + std::to_string(ranks) + " is more than the " + std::to_string(cores) +
                      " cores of this machine; pass --oversubscribe to run anyway");
  }

  std::vector<std::string> argv = {parser.get("mpirun")};
  // OpenMPI refuses to start as root unless told; containers commonly run as root.
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  argv.insert(argv.end(), {"-n", std::to_string(ranks)});
  if (oversubscribe) argv.push_back("--oversubscribe");
  int64_t busiest = ranks;  // ranks on the most loaded host
  if (hosts) {
    std::string list;
    for (const auto& h : *hosts) {
      if (!list.empty()) list += ',';
      list += h.host;
      list += ':';
      list += std::to_string(h.slots);
    }
    argv.insert(argv.end(), {"--host", list});
    const auto placed = comm::ranks_per_host(*hosts, ranks);
    busiest = *std::max_element(placed.begin(), placed.end());
  }
  // A user's OMP_NUM_THREADS wins; otherwise the ranks on a host split its cores (assuming the
  // other hosts have as many cores as this one). -x also carries it to remote hosts.
  if (const char* user = std::getenv("OMP_NUM_THREADS"); user != nullptr && *user != '\0') {
    argv.insert(argv.end(), {"-x", "OMP_NUM_THREADS"});
  } else {
    const int64_t threads = std::max<int64_t>(1, cores / std::max<int64_t>(1, busiest));
    argv.insert(argv.end(), {"-x", "OMP_NUM_THREADS=" + std::to_string(threads)});
  }
  argv.push_back(self_path());
  argv.insert(argv.end(), command.begin(), command.end());

  if (dry_run) {
    std::string line;
    for (const auto& a : argv) {
      if (!line.empty()) line += ' ';
      line += shell_quote(a);
    }
    std::printf("%s\n", line.c_str());
    return 0;
  }
  return run_process(argv);
}

}  // namespace zero::tools
