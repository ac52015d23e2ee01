#include "io/tfrecord_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace zero::io {
namespace {

// Byte-at-a-time table for the reflected Castagnoli polynomial, built at compile time.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) != 0 ? 0x82F63B78u : 0u);
    table[byte] = crc;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

void append_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char c : data) {
    crc = kCrc32cTable[(crc ^ static_cast<unsigned char>(c)) & 0xFFu] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string frame_tfrecord(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  append_le(out, data.size(), 8);
  append_le(out, mask_crc32c(crc32c(out)), 4);
  out.append(data);
  append_le(out, mask_crc32c(crc32c(data)), 4);
  return out;
}

std::unique_ptr<TfRecordWriter> TfRecordWriter::create_new(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return nullptr;
    throw FileError(path + ": cannot create the record file: " + std::strerror(errno));
  }
  return std::unique_ptr<TfRecordWriter>(new TfRecordWriter(fd, path));
}

TfRecordWriter::~TfRecordWriter() {
  write_pending();
  ::close(fd_);
}

void TfRecordWriter::append(std::string_view data) {
  pending_ += frame_tfrecord(data);
  ++pending_records_;
}

bool TfRecordWriter::write_pending() noexcept {
  if (failed_) {
    errno = EIO;
    return false;
  }
  size_t done = 0;
  while (done < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n == 0 ? EIO : errno;
      // Cut a partly written record back off and write nothing more: a record's tail where a
      // reader expects a length would hide every record after it.
      // If the cut fails too, a reader still gets every record before the torn one.
      [[maybe_unused]] const int cut = ::ftruncate(fd_, static_cast<off_t>(bytes_in_file_));
      failed_ = true;
      pending_.clear();
      pending_records_ = 0;
      errno = error;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  bytes_in_file_ += pending_.size();
  pending_.clear();
  records_written_ += pending_records_;
  pending_records_ = 0;
  return true;
}

void TfRecordWriter::flush() {
  if (!write_pending()) {
    throw FileError(path_ + ": writing records failed: " + std::strerror(errno) +
                    "; free space on that disk or point the monitor's output_path elsewhere");
  }
}

}  // namespace zero::io
