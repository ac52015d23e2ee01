// The anchor of the tests' precompiled header (tests/CMakeLists.txt, zero_test_headers): CMake
// builds the header with this target's flags and every test target reuses it. The executable
// has no tests of its own and is never run.
