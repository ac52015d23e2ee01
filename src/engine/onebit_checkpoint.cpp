#include "engine/onebit_checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace zero::engine {
namespace fs = std::filesystem;
namespace {

std::string file_name(int rank, int world) {
  return "onebit_errors_" + std::to_string(rank) + "_of_" + std::to_string(world) +
         ".safetensors";
}

Tensor host_copy(backend::Backend& be, const Tensor& t) {
  Tensor host = Tensor::empty(cpu_allocator(), {t.numel()}, DType::kF32, MemoryCategory::kOther);
  be.copy_to_host(host.raw_data(), t);
  return host;
}

// Whether `folder` holds 1-bit Adam error files of any world size.
bool has_any_error_files(const fs::path& folder) {
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.path().filename().string().rfind("onebit_errors_", 0) == 0) return true;
  }
  return false;
}

Tensor read_errors(const io::SafetensorsFile& file, const char* name, int64_t expected) {
  const io::SafetensorsEntry& entry = file.entry(name);
  if (entry.dtype != DType::kF32 || entry.shape != Shape{expected}) {
    throw FileError(file.path() + ": '" + name + "' must be f32 [" + std::to_string(expected) +
                    "] for this model and world size; resume with the model and world size the "
                    "checkpoint was saved with");
  }
  return file.elements(name, 0, expected);
}

}  // namespace

void save_onebit_errors(optim::Optimizer& optimizer, comm::Comm& comm, const std::string& staging) {
  comm::CompressedAllReduce* compression = optimizer.compression();
  if (compression == nullptr) return;
  backend::Backend& be = compression->backend();
  std::vector<std::pair<std::string, Tensor>> tensors;
  tensors.emplace_back("worker_error", host_copy(be, compression->worker_error()));
  tensors.emplace_back("server_error", host_copy(be, compression->server_error()));
  io::write_safetensors((fs::path(staging) / file_name(comm.rank(), comm.world_size())).string(),
                        tensors);
}

void load_onebit_errors(optim::Optimizer& optimizer, comm::Comm& comm, const std::string& folder,
                        std::span<const backend::ParamSegment> segments) {
  const fs::path path = fs::path(folder) / file_name(comm.rank(), comm.world_size());
  // Every rank decides alike: files for this world size are all there or none is.
  const bool mine = fs::exists(path);
  const double present = comm.all_reduce_scalar(mine ? 1.0 : 0.0, comm::ReduceOp::kSum);
  if (present == 0.0) {
    if (comm.rank() == 0 && has_any_error_files(folder)) {
      std::fprintf(stderr, "zero: warning: %s holds 1-bit Adam's compression errors for another "
                           "number of ranks; they restart at zero (as DeepSpeed's always do)\n",
                   folder.c_str());
    }
    optimizer.restore_compression_errors(std::nullopt, folder);
    return;
  }
  if (present != comm.world_size()) {
    throw FileError(folder + ": 1-bit Adam's error files for " +
                    std::to_string(comm.world_size()) + " ranks are incomplete" +
                    (mine ? std::string() : " (" + path.filename().string() + " is missing)") +
                    "; the checkpoint was not written whole: resume from another one");
  }
  const backend::OneBitLayout layout = backend::OneBitLayout::build(segments, comm.world_size());
  const io::SafetensorsFile file = io::SafetensorsFile::open(path.string());
  Tensor worker = read_errors(file, "worker_error", layout.worker_elements);
  Tensor server = read_errors(file, "server_error", layout.server_elements);
  optimizer.restore_compression_errors(std::make_pair(std::move(worker), std::move(server)),
                                       path.string());
}

}  // namespace zero::engine
