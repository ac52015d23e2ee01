#include "comm/hostfile.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/check.h"
#include "core/error.h"

namespace zero::comm {
namespace {

bool parse_slots(const std::string& token, int64_t& slots) {
  const std::string prefix = "slots=";
  if (token.rfind(prefix, 0) != 0 || token.size() == prefix.size() || token.size() > prefix.size() + 9) {
    return false;
  }
  slots = 0;
  for (size_t i = prefix.size(); i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return false;
    slots = slots * 10 + (token[i] - '0');
  }
  return true;
}

}  // namespace

std::vector<HostSlots> parse_hostfile(const std::string& text, const std::string& source) {
  std::vector<HostSlots> hosts;
  std::map<std::string, int> seen;  // host -> line it was first listed on
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string where = source + ":" + std::to_string(number);
    const std::string raw = line;
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) tokens.push_back(word);
    if (tokens.empty()) continue;
    int64_t slots = 0;
    if (tokens.size() != 2 || !parse_slots(tokens[1], slots)) {
      throw ConfigError(where + ": bad hostfile line \"" + raw +
                        "\"; each line must be `hostname slots=N` (DeepSpeed's hostfile format)");
    }
    if (slots < 1) {
      throw ConfigError(where + ": host " + tokens[0] + " has slots=" + std::to_string(slots) +
                        "; give it at least 1 slot or remove the line");
    }
    if (const auto it = seen.find(tokens[0]); it != seen.end()) {
      throw ConfigError(where + ": host " + tokens[0] + " is listed again (first on line " +
                        std::to_string(it->second) + "); list each host once with its total slots");
    }
    seen[tokens[0]] = number;
    hosts.push_back(HostSlots{tokens[0], slots, number});
  }
  if (hosts.empty()) {
    throw ConfigError(source + ": the hostfile lists no hosts; add lines like `worker-1 slots=8`");
  }
  return hosts;
}

std::vector<HostSlots> read_hostfile(const std::string& path) {
  // Only a regular file of hostfile size: a FIFO would block and /dev/zero never ends.
  constexpr std::uintmax_t kMaxHostfileBytes = 64 << 10;
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error || !std::filesystem::is_regular_file(status)) {
    throw FileError(path + ": cannot read the hostfile (" +
                    (error ? error.message() : std::string("not a regular file")) +
                    "); check the path given to --hostfile");
  }
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (error || size > kMaxHostfileBytes) {
    throw FileError(path + ": the hostfile is larger than 64 KiB; is this the right file?");
  }
  std::ifstream in(path);
  if (!in) throw FileError(path + ": cannot read the hostfile (does it exist?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

int64_t total_slots(const std::vector<HostSlots>& hosts) {
  int64_t total = 0;
  for (const HostSlots& h : hosts) total += h.slots;
  return total;
}

std::vector<int64_t> ranks_per_host(const std::vector<HostSlots>& hosts, int64_t ranks) {
  ZERO_CHECK(!hosts.empty() && ranks >= 0, "ranks_per_host: hosts " << hosts.size() << ", ranks " << ranks);
  const int64_t total = total_slots(hosts);
  ZERO_CHECK(total > 0, "ranks_per_host: no slots");
  std::vector<int64_t> placed(hosts.size(), 0);
  const int64_t full_passes = ranks / total;
  int64_t left = ranks % total;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const int64_t extra = std::min(left, hosts[i].slots);
    placed[i] = full_passes * hosts[i].slots + extra;
    left -= extra;
  }
  return placed;
}

}  // namespace zero::comm
