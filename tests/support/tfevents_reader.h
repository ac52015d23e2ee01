// An independent reader for TensorBoard event files, written for the tests from the format's
// description and sharing no code with src/io: TFRecord framing with every CRC checked (a bitwise
// CRC32C, where the writer uses a table), then a strict protobuf decode of each Event that
// accepts only the fields zero.cpp means to write and rejects anything malformed. Problems are
// reported as text so a test can show exactly which byte or record is wrong.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zero::testing {

inline uint32_t reference_crc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) != 0 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
  }
  return ~crc;
}

inline uint32_t reference_mask(uint32_t crc) {
  const uint32_t rotated = (crc >> 15) | (crc << 17);
  return static_cast<uint32_t>(rotated + 0xa282ead8u);
}

// Little-endian integer of `bytes` bytes at `at`.
inline uint64_t read_le(const std::string& data, size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(data[at + static_cast<size_t>(i)]);
  }
  return value;
}

// The records of a TFRecord byte string; throws std::runtime_error naming the record and offset
// of a truncated record or a CRC that does not match.
inline std::vector<std::string> read_tfrecords(const std::string& file) {
  std::vector<std::string> records;
  size_t at = 0;
  while (at < file.size()) {
    const std::string where =
        "record " + std::to_string(records.size()) + " at byte " + std::to_string(at);
    if (file.size() - at < 12) throw std::runtime_error(where + ": truncated header");
    const std::string length_bytes = file.substr(at, 8);
    const uint64_t length = read_le(file, at, 8);
    if (read_le(file, at + 8, 4) != reference_mask(reference_crc32c(length_bytes))) {
      throw std::runtime_error(where + ": length CRC mismatch");
    }
    if (file.size() - at - 12 < length + 4) throw std::runtime_error(where + ": truncated data");
    const std::string data = file.substr(at + 12, length);
    if (read_le(file, at + 12 + length, 4) != reference_mask(reference_crc32c(data))) {
      throw std::runtime_error(where + ": data CRC mismatch");
    }
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

struct ScalarValue {
  std::string tag;
  float value = 0.0f;
};

struct DecodedEvent {
  std::optional<double> wall_time;
  int64_t step = 0;
  std::optional<std::string> file_version;
  std::vector<ScalarValue> values;  // Summary.Value entries with a simple_value
};

// A minimal protobuf cursor: varints, fixed-width fields and length-delimited fields.
class ProtoCursor {
 public:
  explicit ProtoCursor(const std::string& data) : data_(data) {}
  bool done() const { return at_ == data_.size(); }
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ >= data_.size()) throw std::runtime_error("varint runs past the message");
      const auto byte = static_cast<unsigned char>(data_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7Fu) << shift;
      if ((byte & 0x80u) == 0) return value;
    }
    throw std::runtime_error("varint longer than ten bytes");
  }
  uint64_t fixed(int bytes) {
    if (data_.size() - at_ < static_cast<size_t>(bytes)) throw std::runtime_error("fixed field truncated");
    const uint64_t value = read_le(data_, at_, bytes);
    at_ += static_cast<size_t>(bytes);
    return value;
  }
  std::string bytes() {
    const uint64_t length = varint();
    if (data_.size() - at_ < length) throw std::runtime_error("length-delimited field truncated");
    std::string out = data_.substr(at_, length);
    at_ += length;
    return out;
  }

 private:
  const std::string& data_;
  size_t at_ = 0;
};

inline std::string field_error(const char* message, uint64_t key) {
  return std::string(message) + ": field " + std::to_string(key >> 3) + " wire type " +
         std::to_string(key & 7);
}

inline ScalarValue decode_summary_value(const std::string& data) {
  ScalarValue value;
  bool has_simple_value = false;
  ProtoCursor in(data);
  while (!in.done()) {
    const uint64_t key = in.varint();
    if (key == ((1u << 3) | 2u)) {
      value.tag = in.bytes();
    } else if (key == ((2u << 3) | 5u)) {
      const auto bits = static_cast<uint32_t>(in.fixed(4));
      std::memcpy(&value.value, &bits, 4);
      has_simple_value = true;
    } else {
      throw std::runtime_error(field_error("unexpected Summary.Value field", key));
    }
  }
  if (!has_simple_value) throw std::runtime_error("Summary.Value without simple_value");
  return value;
}

inline DecodedEvent decode_event(const std::string& data) {
  DecodedEvent event;
  ProtoCursor in(data);
  while (!in.done()) {
    const uint64_t key = in.varint();
    if (key == ((1u << 3) | 1u)) {
      const uint64_t bits = in.fixed(8);
      double wall_time = 0.0;
      std::memcpy(&wall_time, &bits, 8);
      event.wall_time = wall_time;
    } else if (key == ((2u << 3) | 0u)) {
      event.step = static_cast<int64_t>(in.varint());
    } else if (key == ((3u << 3) | 2u)) {
      event.file_version = in.bytes();
    } else if (key == ((5u << 3) | 2u)) {
      const std::string summary = in.bytes();
      ProtoCursor values(summary);
      while (!values.done()) {
        const uint64_t value_key = values.varint();
        if (value_key != ((1u << 3) | 2u)) {
          throw std::runtime_error(field_error("unexpected Summary field", value_key));
        }
        event.values.push_back(decode_summary_value(values.bytes()));
      }
    } else {
      throw std::runtime_error(field_error("unexpected Event field", key));
    }
  }
  return event;
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string bytes(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error(path + ": cannot read");
  }
  return bytes;
}

// Every event of an events file, after checking its framing.
inline std::vector<DecodedEvent> read_event_file(const std::string& path) {
  std::vector<DecodedEvent> events;
  for (const std::string& record : read_tfrecords(read_whole_file(path))) {
    events.push_back(decode_event(record));
  }
  return events;
}

// One scalar as TensorBoard shows it: (tag, step, value).
struct Scalar {
  std::string tag;
  int64_t step = 0;
  float value = 0.0f;
};

// The scalars of an events file whose first event is the file_version event every TensorBoard
// writer starts with; throws when it is missing or another event lacks a wall time.
inline std::vector<Scalar> read_scalars(const std::string& path) {
  const std::vector<DecodedEvent> events = read_event_file(path);
  if (events.empty() || events[0].file_version != "brain.Event:2") {
    throw std::runtime_error(path + ": the first event is not file_version \"brain.Event:2\"");
  }
  std::vector<Scalar> scalars;
  for (size_t i = 1; i < events.size(); ++i) {
    if (!events[i].wall_time) throw std::runtime_error(path + ": event without wall_time");
    for (const ScalarValue& v : events[i].values) scalars.push_back({v.tag, events[i].step, v.value});
  }
  return scalars;
}

}  // namespace zero::testing
