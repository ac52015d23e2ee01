// TFRecord files, the container TensorBoard event files use. Each record is
//   uint64 length (little-endian) | uint32 masked CRC32C of those 8 bytes |
//   data | uint32 masked CRC32C of the data
// with CRC32C the Castagnoli polynomial and mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
//
// The writer keeps framed records in memory and writes them with flush(), so the file only ever
// holds whole records: a crash between flushes loses the unflushed records, never the framing of
// the ones before (a reader, or a later run appending a new file next to it, sees a clean file).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace zero::io {

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), e.g. crc32c("123456789") = 0xE3069283.
uint32_t crc32c(std::string_view data);
// TFRecord's masked form of a CRC32C (a CRC of data that itself holds CRCs stays well mixed).
uint32_t mask_crc32c(uint32_t crc);
// One record as it appears in the file.
std::string frame_tfrecord(std::string_view data);

class TfRecordWriter {
 public:
  // Creates `path` as a new file. Returns nullptr when `path` already exists (the caller picks
  // another name: an existing record file is never truncated or appended to); throws FileError
  // naming the path for any other failure (missing directory, no permission, read-only disk).
  static std::unique_ptr<TfRecordWriter> create_new(const std::string& path);
  ~TfRecordWriter();  // flushes what is pending; errors are dropped (a destructor cannot report)
  TfRecordWriter(const TfRecordWriter&) = delete;
  TfRecordWriter& operator=(const TfRecordWriter&) = delete;

  void append(std::string_view data);  // buffered until flush()
  // Writes every pending record; throws FileError (and writes nothing more) when the disk fails.
  void flush();
  const std::string& path() const { return path_; }
  int64_t records_written() const { return records_written_; }

 private:
  TfRecordWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  bool write_pending() noexcept;  // false on a write error (errno set)

  int fd_;
  std::string path_;
  std::string pending_;
  int64_t pending_records_ = 0;
  int64_t records_written_ = 0;
  uint64_t bytes_in_file_ = 0;  // whole records only
  bool failed_ = false;         // a write failed: the file is closed to further records
};

}  // namespace zero::io
