// TensorBoard event files written without TensorFlow or libprotobuf: TFRecord framing
// (tfrecord_writer.h) around hand-encoded `tensorflow.Event` protobufs. The fields used
// (tensorflow/core/util/event.proto and framework/summary.proto):
//   Event:         wall_time double = 1, step int64 = 2, file_version string = 3, summary = 5
//   Summary:       repeated Value value = 1
//   Summary.Value: tag string = 1, simple_value float = 2
// The first record of a file is an Event with file_version "brain.Event:2", as every TensorBoard
// writer emits; scalars are Events whose summary holds one simple_value, which is what PyTorch's
// SummaryWriter.add_scalar (and so DeepSpeed's TensorBoard monitor) writes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "io/tfrecord_writer.h"

namespace zero::io {

inline constexpr std::string_view kEventFileVersion = "brain.Event:2";

// Serialized Event protobufs (proto3: fields at their default value are left out).
std::string encode_file_version_event(double wall_time);
std::string encode_scalar_event(double wall_time, int64_t step, std::string_view tag, float value);

// "events.out.tfevents.<10-digit seconds>.<hostname>.<pid>.<uid>": the name TensorBoard's
// EventFileWriter (behind PyTorch's SummaryWriter) gives its files. TensorBoard reads every file
// in a run directory whose name contains "tfevents".
std::string event_file_name(int64_t seconds, std::string_view hostname, int64_t pid, int64_t uid);

// Seconds since the Unix epoch, with the clock's resolution (Event.wall_time).
double wall_time_now();

// One new events file in an existing directory. Each writer starts its own file, as PyTorch's
// does, so a resumed run adds a file beside the earlier ones and never rewrites them.
class EventFileWriter {
 public:
  // Throws FileError naming the directory when no file can be created in it.
  explicit EventFileWriter(const std::string& dir);
  void add_scalar(std::string_view tag, float value, int64_t step);  // buffered
  void flush();                                                       // throws FileError
  const std::string& path() const { return records_->path(); }

 private:
  std::unique_ptr<TfRecordWriter> records_;
};

}  // namespace zero::io
