#include "engine/csv_monitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "core/error.h"

namespace zero::engine {
namespace {

// A CSV cell, quoted as Python's csv module quotes (only when it must be).
std::string csv_cell(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string shortest_text(double value) {
  std::array<char, 64> text{};
  const auto [end, error] = std::to_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() ? std::string(text.data(), end) : std::to_string(value);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void write_failed(const std::filesystem::path& path, const char* what) {
  throw FileError(path.string() + ": cannot " + what + " the csv_monitor file: " +
                  std::strerror(errno) +
                  "; free space there or point csv_monitor.output_path elsewhere");
}

}  // namespace

std::string csv_metric_file_name(std::string_view metric) {
  std::string name(metric);
  for (char& c : name) {
    if (c == '/' || c == ' ') c = '_';
  }
  return name + ".csv";
}

std::string csv_metric_header(std::string_view metric) {
  const size_t slash = metric.rfind('/');
  return std::string(slash == std::string_view::npos ? metric : metric.substr(slash + 1));
}

CsvMonitor::~CsvMonitor() {
  try {
    flush();
  } catch (const Error&) {
    // Already unwinding or shutting down: the rows of the last window are lost.
  }
}

void CsvMonitor::write_event(std::string_view name, double value, int64_t global_samples) {
  MetricFile& file = files_[csv_metric_file_name(name)];
  if (file.header.empty()) file.header = csv_cell(csv_metric_header(name));
  file.pending += std::to_string(global_samples) + "," + shortest_text(value) + "\n";
}

void CsvMonitor::flush() {
  for (auto& [name, file] : files_) {
    if (!file.pending.empty()) append_rows(dir_ / name, file);
  }
}

void CsvMonitor::append_rows(const std::filesystem::path& path, MetricFile& file) {
  const Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd.get() < 0) write_failed(path, "open");
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) write_failed(path, "inspect");
  std::string text;
  if (info.st_size == 0) {
    text.append("step,").append(file.header).push_back('\n');
  } else {
    // A file cut off mid-row (a crash of an earlier run) gets its row ended first, so the new
    // rows stay rows of their own.
    char last = '\n';
    if (::pread(fd.get(), &last, 1, info.st_size - 1) != 1) write_failed(path, "read");
    if (last != '\n') text.push_back('\n');
  }
  text += file.pending;
  file.pending.clear();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      write_failed(path, "append to");
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace zero::engine
