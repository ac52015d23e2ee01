#include "io/tensorboard_events.h"

#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/error.h"

namespace zero::io {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, uint32_t field, uint32_t wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFFu));
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event fields 1 (wall_time) and 2 (step): every event starts with them.
std::string event_header(double wall_time, int64_t step) {
  std::string event;
  if (wall_time != 0.0) {
    put_key(event, 1, kFixed64);
    put_fixed(event, std::bit_cast<uint64_t>(wall_time), 8);
  }
  if (step != 0) {
    put_key(event, 2, kVarint);
    put_varint(event, static_cast<uint64_t>(step));  // negative int64s take ten bytes, as protobuf
  }
  return event;
}

std::string hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string event = event_header(wall_time, 0);
  put_bytes(event, 3, kEventFileVersion);
  return event;
}

std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_key(summary_value, 2, kFixed32);
  put_fixed(summary_value, std::bit_cast<uint32_t>(value), 4);
  std::string summary;
  put_bytes(summary, 1, summary_value);
  std::string event = event_header(wall_time, step);
  put_bytes(event, 5, summary);
  return event;
}

std::string event_file_name(int64_t seconds, std::string_view host, int64_t pid, int64_t uid) {
  std::array<char, 32> stamp{};
  std::snprintf(stamp.data(), stamp.size(), "%010lld", static_cast<long long>(seconds));
  return "events.out.tfevents." + std::string(stamp.data()) + "." + std::string(host) + "." +
         std::to_string(pid) + "." + std::to_string(uid);
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  const double now = wall_time_now();
  const std::string host = hostname();
  // The uid part keeps names apart when this process (or one with the same pid on another boot)
  // already made a file in the same second.
  constexpr int64_t kMaxUid = 1000;
  for (int64_t uid = 0; !records_ && uid < kMaxUid; ++uid) {
    const std::string name = event_file_name(static_cast<int64_t>(now), host, ::getpid(), uid);
    records_ = TfRecordWriter::create_new((std::filesystem::path(dir) / name).string());
  }
  if (!records_) {
    throw FileError(dir + ": " + std::to_string(kMaxUid) +
                    " event files of this process and second already exist there; use an empty "
                    "directory");
  }
  records_->append(encode_file_version_event(now));
  flush();
}

void EventFileWriter::add_scalar(std::string_view tag, float value, int64_t step) {
  records_->append(encode_scalar_event(wall_time_now(), step, tag, value));
}

void EventFileWriter::flush() { records_->flush(); }

}  // namespace zero::io
