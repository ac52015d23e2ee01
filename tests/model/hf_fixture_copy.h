// Test helpers for the Hugging Face fixtures: a copy of a fixture folder
// (../shared/fixtures/hf/<folder>) under `parent` whose weights were rewritten by `edit` (name ->
// tensor list), for tests of bad folders; our gradients in HF's transposed layout.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors_reader.h"
#include "io/safetensors_writer.h"

namespace zero::model::testing {

inline std::string hf_fixture(const std::string& folder) {
  return std::string(ZERO_TEST_FIXTURES) + "/hf/" + folder;
}

// `ours` (an f64 host [out, in] gradient) in Hugging Face's transposed [in, out] layout (GPT-2's
// Conv1D weights), to compare with a dump element by element.
inline Tensor in_hf_transposed_layout(const Tensor& ours, const Shape& hf_shape) {
  Tensor t = Tensor::zeros_host(hf_shape, DType::kF64);
  const int64_t rows = hf_shape[0], cols = hf_shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t.data<double>()[r * cols + c] = ours.data<double>()[c * rows + r];
  }
  return t;
}

using TensorList = std::vector<std::pair<std::string, Tensor>>;

inline std::string edited_fixture_copy(const std::filesystem::path& parent, const std::string& folder,
                                       const std::function<void(TensorList&)>& edit) {
  const std::string out = (parent / folder).string();
  std::filesystem::create_directories(out);
  std::filesystem::copy_file(hf_fixture(folder) + "/config.json", out + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto file = io::SafetensorsFile::open(hf_fixture(folder) + "/model.safetensors");
  TensorList tensors;
  for (const auto& e : file.entries()) tensors.emplace_back(e.name, file.tensor(e.name));
  edit(tensors);
  io::write_safetensors(out + "/model.safetensors", tensors, {{"format", "pt"}});
  return out;
}

}  // namespace zero::model::testing
