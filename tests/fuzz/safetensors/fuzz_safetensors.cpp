// Fuzzes the safetensors reader: the input is a whole .safetensors file (u64 header length,
// JSON header, data), opened with SafetensorsFile::open as model loading, checkpoint reading and
// `zero inspect` do. Then every tensor is fetched and its first and last byte read, so an
// offset the validation let through that points outside the mapping crashes here.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "io/safetensors_reader.h"

namespace {

uint8_t touch_bytes(const zero::Tensor& tensor) {
  const size_t bytes = tensor.nbytes();
  if (bytes == 0) return 0;
  const auto* first = static_cast<const uint8_t*>(tensor.raw_data());
  return static_cast<uint8_t>(first[0] ^ first[bytes - 1]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const zero::fuzz::ScratchDir scratch("safetensors");
  const std::string path = scratch.write("fuzz.safetensors", zero::fuzz::as_text(data, size));
  zero::fuzz::expect_only_user_errors([&] {
    const auto file = zero::io::SafetensorsFile::open(path);
    volatile uint8_t sink = 0;
    for (const auto& entry : file.entries()) sink = sink ^ touch_bytes(file.tensor(entry.name));
    for (const auto& [key, value] : file.metadata()) sink = sink ^ static_cast<uint8_t>(key.size() + value.size());
    (void)file.entry("a tensor no file has");  // the "not found, did you mean" path
  });
  return 0;
}
