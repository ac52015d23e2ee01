// A prompt/response corpus for the masked-training tests (single-process and MPI): records of
// prompt tokens (mask 0), then response tokens and a separator (mask 1), over the 37-token
// vocabulary of zero_harness.h's gpt2 model (41 for llama: ids stay below 37). Prompt lengths
// vary so masked spans fall anywhere in a window.
#pragma once
#include <cstdint>
#include <vector>

namespace zero::engine::zero_test {

struct MaskedCorpus {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> mask;
};

inline MaskedCorpus masked_corpus(int records) {
  MaskedCorpus c;
  uint32_t x = 7;
  for (int r = 0; r < records; ++r) {
    const int prompt = 2 + r % 5, response = 1 + (r * 3) % 4;
    for (int i = 0; i < prompt + response; ++i) {
      x = x * 1103515245u + 12345u;
      c.tokens.push_back(1 + (x >> 16) % 35);
      c.mask.push_back(i < prompt ? 0 : 1);
    }
    c.tokens.push_back(36);  // the separator, a target
    c.mask.push_back(1);
  }
  return c;
}

}  // namespace zero::engine::zero_test
