// offload::AioEngine and AioFile: io_uring round trips under every aio setting, O_DIRECT and its
// buffered fallback, and clear errors for failed, short and malformed requests.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "aio_test_support.h"
#include "core/error.h"
#include "offload/aio_engine.h"
#include "offload/aio_file.h"

namespace zero::offload {
namespace {

using testing::AlignedBuffer;
using testing::expect_error;
using testing::RefuseDirectIo;
using testing::ScratchDir;

void fill_pattern(unsigned char* data, size_t bytes, unsigned seed) {
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

struct EngineCase {
  int64_t block_size;
  int64_t queue_depth;
  int64_t threads;
  bool single_submit;
  bool overlap_events;
};

std::string case_name(const EngineCase& c) {
  return "block" + std::to_string(c.block_size) + "_qd" + std::to_string(c.queue_depth) + "_threads" +
         std::to_string(c.threads) + (c.single_submit ? "_single" : "_batched") +
         (c.overlap_events ? "_overlap" : "_waves");
}

AioEngineOptions options_of(const EngineCase& c) {
  AioEngineOptions o;
  o.block_size = c.block_size;
  o.queue_depth = c.queue_depth;
  o.intra_op_parallelism = c.threads;
  o.single_submit = c.single_submit;
  o.overlap_events = c.overlap_events;
  return o;
}

class AioEngineRoundTrip : public ::testing::TestWithParam<EngineCase> {};

// Writes several requests (sizes not multiples of block_size, more pieces than queue_depth),
// reads them back into a second buffer, compares.
void round_trip(AioEngine& engine, const AioFile& file, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t total = 0;
  for (const auto& r : ranges) total = std::max(total, r.first + r.second);
  AlignedBuffer source(static_cast<size_t>(total));
  AlignedBuffer back(static_cast<size_t>(total));
  fill_pattern(source.get(), static_cast<size_t>(total), 3);
  std::memset(back.get(), 0, static_cast<size_t>(total));
  std::vector<AioEngine::Ticket> writes;
  for (const auto& [offset, bytes] : ranges) {
    writes.push_back(engine.submit_write(file, offset, source.get() + offset, bytes));
  }
  for (auto t : writes) engine.wait(t);
  std::vector<AioEngine::Ticket> reads;
  for (const auto& [offset, bytes] : ranges) {
    reads.push_back(engine.submit_read(file, offset, back.get() + offset, bytes));
  }
  for (auto it = reads.rbegin(); it != reads.rend(); ++it) engine.wait(*it);  // any order
  for (const auto& [offset, bytes] : ranges) {
    ASSERT_EQ(std::memcmp(source.get() + offset, back.get() + offset, static_cast<size_t>(bytes)), 0)
        << "range at " << offset << " of " << bytes << " bytes";
  }
}

TEST_P(AioEngineRoundTrip, DirectFilesAlignedOddMultiplesOfTheBlock) {
  ScratchDir dir("direct");
  if (!probe_direct_io(dir.path()).supported) {
    GTEST_SKIP() << "the file system of " << dir.path() << " refuses O_DIRECT; the buffered case covers the engine";
  }
  AioEngine engine(options_of(GetParam()));
  AioFile file(dir.path() / "data.swp", AioFile::Mode::kCreate);
  ASSERT_TRUE(file.direct());
  const int64_t a = file.alignment();
  // 5 and 13 alignment units: not multiples of the 8 KiB / 64 KiB blocks; 40 more one-unit
  // requests queue far beyond queue_depth.
  std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 5 * a}, {5 * a, 13 * a}, {18 * a, a}};
  for (int64_t i = 0; i < 40; ++i) ranges.emplace_back((19 + i) * a, a);
  round_trip(engine, file, ranges);
}

TEST_P(AioEngineRoundTrip, BufferedFilesAnySizeAndOffset) {
  ScratchDir dir("buffered");
  RefuseDirectIo refuse;
  AioEngine engine(options_of(GetParam()));
  std::string warning;
  AioFile file(dir.path() / "data.swp", AioFile::Mode::kCreate, [&](const std::string& w) { warning = w; });
  ASSERT_FALSE(file.direct());
  std::vector<std::pair<int64_t, int64_t>> ranges = {{17, 12345}, {12362, 1}, {12363, 70001}, {82364, 0}};
  for (int64_t i = 0; i < 30; ++i) ranges.emplace_back(82364 + i * 999, 999);
  round_trip(engine, file, ranges);
}

INSTANTIATE_TEST_SUITE_P(Settings, AioEngineRoundTrip,
                         ::testing::Values(EngineCase{8192, 2, 1, false, true}, EngineCase{8192, 2, 1, true, true},
                                           EngineCase{8192, 4, 3, false, true}, EngineCase{8192, 4, 3, true, false},
                                           EngineCase{65536, 8, 1, false, false},
                                           EngineCase{1048576, 8, 3, false, true}),
                         [](const ::testing::TestParamInfo<EngineCase>& param_info) { return case_name(param_info.param); });

TEST(AioEngine, SingleSubmitCallsSubmitOncePerPiece) {
  ScratchDir dir("submit");
  RefuseDirectIo refuse;  // any size, same count either way
  AioFile file(dir.path() / "data.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  AlignedBuffer buffer(64 * 4096);
  fill_pattern(buffer.get(), buffer.size, 1);
  for (bool single : {true, false}) {
    AioEngineOptions o;
    o.block_size = 4096;
    o.queue_depth = 8;
    o.single_submit = single;
    // Whole batches only (no refill as single completions arrive), so the batched count does
    // not depend on how the kernel happens to spread the completions (one at a time on a
    // loaded machine: then a refill-per-completion engine submits nearly once per piece too).
    o.overlap_events = false;
    AioEngine engine(o);
    engine.wait(engine.submit_write(file, 0, buffer.get(), 64 * 4096));
    const AioEngineStats s = engine.stats();
    EXPECT_EQ(s.pieces, 64);
    EXPECT_EQ(s.bytes_written, 64 * 4096);
    if (single) {
      EXPECT_GE(s.submit_calls, 64) << "one io_uring_submit per piece";
    } else {
      // 64 pieces in batches of queue_depth 8: 8 submits (16 leaves room for EINTR retries).
      EXPECT_LE(s.submit_calls, 16) << "pieces are batched (queue_depth per submit)";
    }
  }
}

TEST(AioEngine, ThreadsSplitOneRequest) {
  ScratchDir dir("threads");
  RefuseDirectIo refuse;
  AioFile file(dir.path() / "data.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  AioEngineOptions o;
  o.block_size = 4096;
  o.intra_op_parallelism = 3;
  AioEngine engine(o);
  AlignedBuffer buffer(10 * 4096 + 5);
  fill_pattern(buffer.get(), buffer.size, 9);
  engine.wait(engine.submit_write(file, 0, buffer.get(), static_cast<int64_t>(buffer.size)));
  EXPECT_EQ(engine.stats().pieces, 11);
  EXPECT_EQ(file.size_bytes(), static_cast<int64_t>(buffer.size));
  AlignedBuffer back(buffer.size);
  engine.wait(engine.submit_read(file, 0, back.get(), static_cast<int64_t>(buffer.size)));
  EXPECT_EQ(std::memcmp(buffer.get(), back.get(), buffer.size), 0);
}

TEST(AioEngine, ShortReadNamesTheFileAndOffset) {
  ScratchDir dir("short");
  AioFile file(dir.path() / "short.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  AioEngine engine(AioEngineOptions{});
  AlignedBuffer buffer(8 * 4096);
  fill_pattern(buffer.get(), buffer.size, 2);
  engine.wait(engine.submit_write(file, 0, buffer.get(), 4 * 4096));
  const auto ticket = engine.submit_read(file, 0, buffer.get(), 8 * 4096);
  expect_error<FileError>([&] { engine.wait(ticket); },
                          {(dir.path() / "short.swp").string(), "byte offset 16384", "short read",
                           "truncated or replaced"});
  // The engine stays usable after a failure.
  engine.wait(engine.submit_read(file, 0, buffer.get(), 4 * 4096));
}

TEST(AioEngine, FailedWriteNamesTheFileAndErrno) {
  ScratchDir dir("ebadf");
  AioFile file(dir.path() / "readonly.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  // Make the engine's descriptor read-only behind its back: the write completes with -EBADF.
  const int readonly = ::open(file.path().c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(readonly, 0);
  ASSERT_GE(::dup3(readonly, file.fd(), O_CLOEXEC), 0);
  ::close(readonly);
  AioEngine engine(AioEngineOptions{});
  AlignedBuffer buffer(4096);
  const auto ticket = engine.submit_write(file, 4096, buffer.get(), 4096);
  expect_error<FileError>([&] { engine.wait(ticket); },
                          {file.path().string(), "write of 4096 bytes at byte offset 4096", std::strerror(EBADF)});
}

TEST(AioEngine, WaitAllRethrowsAfterEverythingFinished) {
  ScratchDir dir("waitall");
  AioFile file(dir.path() / "w.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  AioEngine engine(AioEngineOptions{});
  AlignedBuffer buffer(16 * 4096);
  engine.submit_write(file, 0, buffer.get(), 4096);
  engine.submit_read(file, 0, buffer.get() + 4096, 8 * 4096);  // past the end: short
  expect_error<FileError>([&] { engine.wait_all(); }, {"short read"});
  engine.wait_all();  // nothing left
}

TEST(AioEngine, BadSettingsAndRequests) {
  AioEngineOptions o;
  o.queue_depth = 0;
  expect_error<ConfigError>([&] { AioEngine e(o); }, {"aio.queue_depth", "got 0"});
  o = AioEngineOptions{};
  o.block_size = -1;
  expect_error<ConfigError>([&] { AioEngine e(o); }, {"aio.block_size", "got -1"});
  o.block_size = int64_t{4} << 30;
  expect_error<ConfigError>([&] { AioEngine e(o); }, {"aio.block_size", "got 4294967296"});
  o = AioEngineOptions{};
  o.intra_op_parallelism = 0;
  expect_error<ConfigError>([&] { AioEngine e(o); }, {"aio.intra_op_parallelism (thread_count)"});

  AioEngine engine(AioEngineOptions{});
  expect_error<InternalError>([&] { engine.wait(12345); }, {"unknown or already waited"});
  ScratchDir dir("misaligned");
  AioFile file(dir.path() / "m.swp", AioFile::Mode::kCreate, [](const std::string&) {});
  if (file.direct()) {
    AlignedBuffer buffer(8192);
    expect_error<InternalError>([&] { engine.submit_write(file, 0, buffer.get(), 100); }, {"not aligned"});
    expect_error<InternalError>([&] { engine.submit_write(file, 0, buffer.get() + 1, 4096); }, {"not aligned"});
  }
}

TEST(AioEngine, OptionsFromTheAioSection) {
  config::AioConfig aio;
  aio.block_size = 4096;
  aio.queue_depth = 3;
  aio.intra_op_parallelism = 2;
  aio.single_submit = true;
  aio.overlap_events = false;
  const AioEngineOptions o = AioEngineOptions::from_config(aio);
  EXPECT_EQ(o.block_size, 4096);
  EXPECT_EQ(o.queue_depth, 3);
  EXPECT_EQ(o.intra_op_parallelism, 2);
  EXPECT_TRUE(o.single_submit);
  EXPECT_FALSE(o.overlap_events);
}

TEST(AioFile, DirectIoOnTheBuildTreeDisk) {
  ScratchDir dir("probe");
  const DirectIoSupport support = probe_direct_io(dir.path());
  if (!support.supported) {
    GTEST_SKIP() << "O_DIRECT is refused in " << dir.path() << " (" << support.reason
                 << "); the direct path cannot be tested on this file system";
  }
  EXPECT_GE(support.alignment, 4096);
  EXPECT_EQ(support.alignment & (support.alignment - 1), 0);
  std::string warning;
  AioFile file(dir.path() / "d.swp", AioFile::Mode::kCreate, [&](const std::string& w) { warning = w; });
  EXPECT_TRUE(file.direct());
  EXPECT_TRUE(warning.empty()) << warning;
  EXPECT_EQ(::fcntl(file.fd(), F_GETFL) & O_DIRECT, O_DIRECT);
}

TEST(AioFile, FallbackWarnsOncePerDirectoryAndUsesBufferedIo) {
  ScratchDir dir("fallback");
  RefuseDirectIo refuse;
  std::vector<std::string> warnings;
  auto sink = [&](const std::string& w) { warnings.push_back(w); };
  AioFile a(dir.path() / "a.swp", AioFile::Mode::kCreate, sink);
  AioFile b(dir.path() / "b.swp", AioFile::Mode::kCreate, sink);
  EXPECT_FALSE(a.direct());
  EXPECT_FALSE(b.direct());
  EXPECT_EQ(::fcntl(a.fd(), F_GETFL) & O_DIRECT, 0);
  ASSERT_EQ(warnings.size(), 1u) << "one warning per directory";
  EXPECT_NE(warnings[0].find("O_DIRECT is unavailable in " + dir.path().string()), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("page cache"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("Invalid argument"), std::string::npos) << warnings[0];
}

TEST(AioFile, TmpfsFallsBackWhereItRefusesODirect) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
  ScratchDir dir("shm", "/dev/shm");
  const DirectIoSupport support = probe_direct_io(dir.path());
  std::vector<std::string> warnings;
  AioFile file(dir.path() / "t.swp", AioFile::Mode::kCreate, [&](const std::string& w) { warnings.push_back(w); });
  // tmpfs accepts O_DIRECT since Linux 6.6; older kernels take the fallback. Either way the
  // file works and the warning appears exactly when direct I/O is off.
  EXPECT_EQ(file.direct(), support.supported);
  EXPECT_EQ(warnings.size(), support.supported ? 0u : 1u);
  AioEngine engine(AioEngineOptions{});
  AlignedBuffer out(3 * 4096);
  AlignedBuffer back(3 * 4096);
  fill_pattern(out.get(), out.size, 5);
  engine.wait(engine.submit_write(file, 0, out.get(), 3 * 4096));
  engine.wait(engine.submit_read(file, 0, back.get(), 3 * 4096));
  EXPECT_EQ(std::memcmp(out.get(), back.get(), out.size), 0);
}

TEST(AioFile, MissingDirectoryAndFile) {
  expect_error<FileError>([] { probe_direct_io("/nonexistent/zero_aio_dir"); },
                          {"/nonexistent/zero_aio_dir", "not a directory"});
  ScratchDir dir("missing");
  expect_error<FileError>([&] { AioFile f(dir.path() / "absent.swp", AioFile::Mode::kOpenExisting); },
                          {(dir.path() / "absent.swp").string(), "cannot open", std::strerror(ENOENT)});
}

}  // namespace
}  // namespace zero::offload
