// kFixtures, which two tokenizer tests defined alike; one copy here since the folder's tests are
// built as one unit.
#pragma once
#include <string>

namespace zero::data::testing {

// The folder of tokenizer fixtures (tests/fixtures/tokenizers/), with a trailing slash.
inline const std::string kFixtures = std::string(ZERO_TEST_FIXTURES) + "/tokenizers/";

}  // namespace zero::data::testing
