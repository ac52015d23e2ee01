// offload::NvmeBlockStore (the NVMe tier of ZeRO-3's parameter partition): blocks of any size
// round-trip, through O_DIRECT and the buffered fallback; read-ahead is counted, never reads a
// block twice and leaves a buffer for acquire(); reads see the newest bytes even while the write
// is in flight; more blocks than staging buffers; the file layout and its cleanup; one store per
// folder and rank; a truncated file, a block altered on disk and a full disk are FileErrors
// naming the file; a block whose write failed is reported as lost when read (not as altered, and
// not silently without checksums); rewriting a damaged block heals it, also while a read ahead of
// its old bytes is in flight.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "aio_test_support.h"
#include "core/allocator.h"
#include "core/error.h"
#include "offload/nvme_block_store.h"

namespace zero::offload {
namespace {

using testing::expect_error;
using testing::scribble;
using testing::SmallTmpfs;
using testing::RefuseDirectIo;
using testing::ScratchDir;
using testing::ExhaustedAllocator;

constexpr const char* kKey = "zero_optimization.offload_param.nvme_path";

NvmeBlockStoreOptions options_for(const std::filesystem::path& dir, std::vector<int64_t> blocks,
                                  int64_t buffer_count) {
  NvmeBlockStoreOptions o;
  o.nvme_path = dir;
  o.block_bytes = std::move(blocks);
  o.buffer_count = buffer_count;
  o.buffer_bytes = *std::max_element(o.block_bytes.begin(), o.block_bytes.end());
  o.aio.block_size = 8192;  // several pieces per block
  o.aio.queue_depth = 4;
  o.warn = [](const std::string&) {};
  return o;
}

// Bytes of block `block` in generation `seed`: every byte depends on both, so a stale or
// misplaced block shows.
std::vector<char> pattern(int64_t bytes, int64_t block, int seed) {
  std::vector<char> v(static_cast<size_t>(bytes));
  uint32_t x = static_cast<uint32_t>(block * 7919 + seed * 104729 + 1);
  for (char& c : v) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return v;
}

// Acquires `block`, compares its bytes with `expected`, releases it.
void expect_block(NvmeBlockStore& store, int64_t block, const std::vector<char>& expected) {
  const void* bytes = store.acquire(block);
  ASSERT_NE(bytes, nullptr);
  if (!expected.empty()) {  // an empty vector's data() may be null
    EXPECT_EQ(std::memcmp(bytes, expected.data(), expected.size()), 0) << "block " << block;
  }
  store.release(block);
}

int64_t alignment_of(const NvmeBlockStore& store) {
  return probe_direct_io(store.file_path().parent_path()).alignment;  // cached: the store's value
}

// Odd sizes: not multiples of the alignment, one byte, a zero-byte block, one exact multiple.
const std::vector<int64_t> kOddBlocks = {4095, 1, 0, 12345, 8192, 4097, 3};

class NvmeBlockRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(NvmeBlockRoundTrip, OddSizesComeBackWhole) {
  const bool buffered = GetParam();
  ScratchDir dir(buffered ? "blocks_buffered" : "blocks_direct");
  std::optional<RefuseDirectIo> refuse;
  if (buffered) refuse.emplace();
  CpuAllocator pinned;
  std::vector<int64_t> blocks = kOddBlocks;
  blocks.push_back(777);  // never written: reads as zeros
  NvmeBlockStore store(options_for(dir.path(), blocks, 3), pinned);
  EXPECT_EQ(store.direct_io(), !buffered && probe_direct_io(store.file_path().parent_path()).supported);
  EXPECT_EQ(store.block_count(), 8);
  for (size_t b = 0; b < kOddBlocks.size(); ++b) {
    store.write(static_cast<int64_t>(b), pattern(kOddBlocks[b], static_cast<int64_t>(b), 1).data());
  }
  store.flush();
  const int64_t total = std::accumulate(kOddBlocks.begin(), kOddBlocks.end(), int64_t{0});
  EXPECT_EQ(store.stats().blocks_written, 7);
  EXPECT_EQ(store.stats().bytes_written, total);
  // Forward, then backward (the order ZeRO-3 uses them in).
  for (size_t b = 0; b < kOddBlocks.size(); ++b) {
    expect_block(store, static_cast<int64_t>(b), pattern(kOddBlocks[b], static_cast<int64_t>(b), 1));
  }
  for (size_t b = kOddBlocks.size(); b-- > 0;) {
    expect_block(store, static_cast<int64_t>(b), pattern(kOddBlocks[b], static_cast<int64_t>(b), 1));
  }
  expect_block(store, 7, std::vector<char>(777, 0));
  // The same bytes through fill_for_write + submit_write (no copy from the caller).
  for (size_t b = 0; b < kOddBlocks.size(); ++b) {
    const std::vector<char> next = pattern(kOddBlocks[b], static_cast<int64_t>(b), 2);
    void* target = store.fill_for_write(static_cast<int64_t>(b));
    if (!next.empty()) std::memcpy(target, next.data(), next.size());
    store.submit_write(static_cast<int64_t>(b));
  }
  store.flush();
  for (size_t b = 0; b < kOddBlocks.size(); ++b) {
    expect_block(store, static_cast<int64_t>(b), pattern(kOddBlocks[b], static_cast<int64_t>(b), 2));
  }
  EXPECT_EQ(store.stats().bytes_read, 3 * total + 777);
}

INSTANTIATE_TEST_SUITE_P(Modes, NvmeBlockRoundTrip, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "buffered" : "direct"; });

// Writes generation `seed` of every block and waits for it.
void write_all(NvmeBlockStore& store, const std::vector<int64_t>& blocks, int seed) {
  for (size_t b = 0; b < blocks.size(); ++b) {
    store.write(static_cast<int64_t>(b), pattern(blocks[b], static_cast<int64_t>(b), seed).data());
  }
  store.flush();
}

TEST(NvmeBlockStore, PrefetchedBlocksAreHitsAndReadOnce) {
  ScratchDir dir("prefetch");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {5000, 3000, 7000, 100};
  NvmeBlockStore store(options_for(dir.path(), blocks, 5), pinned);  // read-ahead leaves one free
  write_all(store, blocks, 1);
  EXPECT_EQ(store.stats().blocks_read, 0);
  for (int64_t b = 0; b < 4; ++b) EXPECT_TRUE(store.prefetch(b));
  for (int64_t b = 0; b < 4; ++b) EXPECT_TRUE(store.prefetch(b)) << "already in flight: nothing new";
  for (int64_t b = 0; b < 4; ++b) expect_block(store, b, pattern(blocks[static_cast<size_t>(b)], b, 1));
  EXPECT_EQ(store.stats().prefetch_hits, 4);
  EXPECT_EQ(store.stats().blocks_read, 4) << "each block read once";
  EXPECT_EQ(store.stats().bytes_read, 15100);
  // Released blocks are gone from the buffers: acquiring again reads again, without a hit.
  expect_block(store, 2, pattern(7000, 2, 1));
  EXPECT_EQ(store.stats().prefetch_hits, 4);
  EXPECT_EQ(store.stats().blocks_read, 5);
}

TEST(NvmeBlockStore, PrefetchReturnsFalseWhenNoBufferIsLeftForReadAhead) {
  ScratchDir dir("busy");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {4000, 4000, 4000, 4000, 4000};
  NvmeBlockStore store(options_for(dir.path(), blocks, 3), pinned);
  write_all(store, blocks, 3);
  const void* zero = store.acquire(0);
  const void* one = store.acquire(1);
  EXPECT_FALSE(store.prefetch(2)) << "the last free buffer is kept for the next acquire";
  EXPECT_TRUE(store.prefetch(1)) << "an acquired block counts as staged";
  const void* two = store.acquire(2);  // takes the last buffer
  EXPECT_FALSE(store.prefetch(3)) << "every buffer is held by the caller";
  EXPECT_EQ(std::memcmp(zero, pattern(4000, 0, 3).data(), 4000), 0);
  EXPECT_EQ(std::memcmp(one, pattern(4000, 1, 3).data(), 4000), 0);
  EXPECT_EQ(std::memcmp(two, pattern(4000, 2, 3).data(), 4000), 0);
  const int64_t reads = store.stats().blocks_read;
  store.release(0);
  store.release(1);
  EXPECT_TRUE(store.prefetch(3));
  EXPECT_FALSE(store.prefetch(4)) << "one buffer left";
  store.release(2);
  EXPECT_TRUE(store.prefetch(4));
  EXPECT_FALSE(store.prefetch(0));
  expect_block(store, 3, pattern(4000, 3, 3));
  expect_block(store, 4, pattern(4000, 4, 3));
  EXPECT_EQ(store.stats().prefetch_hits, 2);
  EXPECT_EQ(store.stats().blocks_read, reads + 2);
}

TEST(NvmeBlockStore, AcquireDropsTheNewestReadAhead) {
  ScratchDir dir("evict");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {6000, 2000, 9000, 3000};
  NvmeBlockStore store(options_for(dir.path(), blocks, 3), pinned);
  write_all(store, blocks, 4);
  EXPECT_TRUE(store.prefetch(0));
  EXPECT_TRUE(store.prefetch(1));
  const void* held = store.acquire(3);  // the last free buffer
  // Every buffer busy: block 1, read ahead last (so needed last), makes room for block 2.
  expect_block(store, 2, pattern(9000, 2, 4));
  EXPECT_EQ(store.stats().prefetch_hits, 0);
  expect_block(store, 0, pattern(6000, 0, 4));  // still staged
  EXPECT_EQ(store.stats().prefetch_hits, 1);
  expect_block(store, 1, pattern(2000, 1, 4));  // read again
  EXPECT_EQ(store.stats().prefetch_hits, 1);
  EXPECT_EQ(std::memcmp(held, pattern(3000, 3, 4).data(), 3000), 0) << "an acquired block is never dropped";
  store.release(3);
}

TEST(NvmeBlockStore, MoreBlocksThanBuffersWithReadAhead) {
  ScratchDir dir("many");
  CpuAllocator pinned;
  std::vector<int64_t> blocks;
  for (int64_t b = 0; b < 13; ++b) blocks.push_back(1000 + 977 * b);
  NvmeBlockStore store(options_for(dir.path(), blocks, 3), pinned);
  write_all(store, blocks, 1);
  for (int pass = 0; pass < 3; ++pass) {
    const int seed = pass + 1;
    // Forward with two blocks of read-ahead, then backward, as the parameter fetcher does.
    for (int64_t b = 0; b < 13; ++b) {
      for (int64_t ahead = b + 1; ahead <= std::min<int64_t>(b + 2, 12); ++ahead) store.prefetch(ahead);
      expect_block(store, b, pattern(blocks[static_cast<size_t>(b)], b, seed));
    }
    for (int64_t b = 12; b >= 0; --b) {
      if (b > 0) store.prefetch(b - 1);
      expect_block(store, b, pattern(blocks[static_cast<size_t>(b)], b, seed));
    }
    // The optimizer step rewrites every block (writes wait for buffers, no flush in between).
    for (int64_t b = 0; b < 13; ++b) {
      store.write(b, pattern(blocks[static_cast<size_t>(b)], b, seed + 1).data());
    }
  }
  store.flush();
  EXPECT_EQ(store.stats().blocks_written, 13 * 4);
  EXPECT_GT(store.stats().prefetch_hits, 13);
}

TEST(NvmeBlockStore, ReadAfterWriteSeesTheNewBytesWhileTheWriteIsInFlight) {
  ScratchDir dir("raw");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {1 << 20, 5000};  // a large block keeps its write in flight
  NvmeBlockStoreOptions o = options_for(dir.path(), blocks, 3);
  o.aio.block_size = 4096;  // 256 pieces per write
  // Two workers: a read's halves go to other workers than the write's, so without the wait for
  // the write in flight the read would overtake it.
  o.aio.intra_op_parallelism = 2;
  NvmeBlockStore store(o, pinned);
  write_all(store, blocks, 1);
  for (int seed = 2; seed < 8; ++seed) {
    const std::vector<char> next = pattern(1 << 20, 0, seed);
    if (seed % 2 == 0) {
      EXPECT_TRUE(store.prefetch(0));  // a read of the old bytes, dropped by the write
    }
    store.write(0, next.data());
    expect_block(store, 0, next);  // no flush in between
  }
  // The same through fill_for_write / submit_write, and a prefetch issued after the write.
  std::memcpy(store.fill_for_write(1), pattern(5000, 1, 9).data(), 5000);
  store.submit_write(1);
  EXPECT_TRUE(store.prefetch(1));
  expect_block(store, 1, pattern(5000, 1, 9));
  store.flush();
  expect_block(store, 0, pattern(1 << 20, 0, 7));
}

TEST(NvmeBlockStore, FileLayoutAndCleanup) {
  ScratchDir dir("layout");
  const std::vector<int64_t> blocks = {100, 5000, 0, 4096, 9000};
  std::filesystem::path file;
  {
    CpuAllocator pinned;
    NvmeBlockStoreOptions o = options_for(dir.path(), blocks, 2);
    o.rank = 3;
    NvmeBlockStore store(o, pinned);
    file = dir.path() / "zero_param_swap" / "rank3" / "params.swp";
    EXPECT_EQ(store.file_path(), file);
    const int64_t a = alignment_of(store);
    int64_t expected = 0;
    for (int64_t bytes : blocks) expected += round_up_bytes(bytes, a);
    EXPECT_EQ(static_cast<int64_t>(std::filesystem::file_size(file)), expected);
    // Each block starts at its aligned offset: block 3 (4096 bytes) sits after 100, 5000 and 0.
    store.write(3, pattern(4096, 3, 1).data());
    store.flush();
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::vector<char> raw(4096);
    const int64_t at = round_up_bytes(100, a) + round_up_bytes(5000, a);
    ASSERT_EQ(::pread(fd, raw.data(), raw.size(), at), 4096);
    ::close(fd);
    EXPECT_EQ(raw, pattern(4096, 3, 1));
    EXPECT_TRUE(std::filesystem::exists(file.parent_path() / ".lock"));
  }
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "zero_param_swap"))
      << "file, lock, rank folder and area folder are removed by the destructor";
  EXPECT_TRUE(std::filesystem::exists(dir.path())) << "the user's folder stays";
}

TEST(NvmeBlockStore, OneStorePerFolderAndRank) {
  ScratchDir dir("lock");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {100, 200};
  {
    NvmeBlockStore first(options_for(dir.path(), blocks, 1), pinned);
    expect_error<ConfigError>([&] { NvmeBlockStore second(options_for(dir.path(), blocks, 1), pinned); },
                              {kKey, "zero_param_swap/rank0 is in use", "give each job its own nvme_path"});
    NvmeBlockStoreOptions named = options_for(dir.path(), blocks, 1);
    named.key = "some.other.key";
    expect_error<ConfigError>([&] { NvmeBlockStore second(named, pinned); }, {"some.other.key"});
    NvmeBlockStoreOptions other_rank = options_for(dir.path(), blocks, 1);
    other_rank.rank = 1;
    NvmeBlockStore fine(other_rank, pinned);
    NvmeBlockStoreOptions other_area = options_for(dir.path(), blocks, 1);
    other_area.area = "zero_swap";
    NvmeBlockStore also_fine(other_area, pinned);
    EXPECT_TRUE(std::filesystem::exists(first.file_path())) << "the failed store left the first's file alone";
  }
  NvmeBlockStore again(options_for(dir.path(), blocks, 1), pinned);  // released by the destructor
  expect_error<ConfigError>([&] { NvmeBlockStore s(options_for(dir.path() / "missing", blocks, 1), pinned); },
                            {kKey, "does not exist"});
}

TEST(NvmeBlockStore, TruncatedFileIsAShortReadNamingTheFile) {
  ScratchDir dir("truncated");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {3000, 6000, 5000, 2000};
  NvmeBlockStore store(options_for(dir.path(), blocks, 2), pinned);
  write_all(store, blocks, 1);
  const int64_t a = alignment_of(store);
  const int64_t block2 = round_up_bytes(3000, a) + round_up_bytes(6000, a);
  ASSERT_EQ(::truncate(store.file_path().c_str(), block2 + 100), 0);
  const std::string file = store.file_path().string();
  expect_error<FileError>([&] { store.acquire(2); }, {file, "short read"});
  EXPECT_TRUE(store.prefetch(3));
  expect_error<FileError>([&] { store.acquire(3); }, {file, "short read"});
  // The blocks before the damage still read, and the store is usable again.
  expect_block(store, 0, pattern(3000, 0, 1));
  expect_block(store, 1, pattern(6000, 1, 1));
}

TEST(NvmeBlockStore, AlteredBlockIsAChecksumMismatchAndRewritingHealsIt) {
  ScratchDir dir("altered");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {3000, 6000, 5000, 2000};
  NvmeBlockStore store(options_for(dir.path(), blocks, 2), pinned);
  write_all(store, blocks, 1);
  const int64_t a = alignment_of(store);
  const int64_t begin = round_up_bytes(3000, a) + round_up_bytes(6000, a);
  scribble(store.file_path(), begin + 10, 4);
  const std::string file = store.file_path().string();
  const std::string range =
      "block 2 (bytes " + std::to_string(begin) + " to " + std::to_string(begin + round_up_bytes(5000, a)) + ")";
  expect_error<FileError>([&] { store.acquire(2); }, {file, range, "checksum mismatch", "last checkpoint"});
  EXPECT_TRUE(store.prefetch(2));  // the same through read-ahead
  expect_error<FileError>([&] { store.acquire(2); }, {file, "block 2", "checksum mismatch"});
  // Damage in the padding after a block's bytes is caught too (the checksum covers it).
  scribble(store.file_path(), round_up_bytes(3000, a) - 8, 4);
  expect_error<FileError>([&] { store.acquire(0); }, {file, "block 0", "checksum mismatch"});
  expect_block(store, 1, pattern(6000, 1, 1));
  expect_block(store, 3, pattern(2000, 3, 1));
  store.write(2, pattern(5000, 2, 5).data());
  expect_block(store, 2, pattern(5000, 2, 5));
  store.write(0, pattern(3000, 0, 5).data());
  expect_block(store, 0, pattern(3000, 0, 5));
}

// A read of a damaged block still in flight when the block is rewritten is dropped, not
// verified: its bytes are never used, and the rewrite heals the block.
TEST(NvmeBlockStore, RewritingABlockWhoseReadAheadIsInFlightHealsIt) {
  ScratchDir dir("heal_in_flight");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {3000, 6000, 5000};
  NvmeBlockStore store(options_for(dir.path(), blocks, 3), pinned);
  write_all(store, blocks, 1);
  const int64_t a = alignment_of(store);
  scribble(store.file_path(), round_up_bytes(3000, a) + 10, 4);  // block 1
  EXPECT_TRUE(store.prefetch(1));
  store.write(1, pattern(6000, 1, 2).data());
  store.flush();
  expect_block(store, 1, pattern(6000, 1, 2));
  // The same for a block cut short behind the store's back.
  ASSERT_EQ(::truncate(store.file_path().c_str(), round_up_bytes(3000, a) + round_up_bytes(6000, a) + 100), 0);
  EXPECT_TRUE(store.prefetch(2));
  store.write(2, pattern(5000, 2, 2).data());
  store.flush();
  expect_block(store, 2, pattern(5000, 2, 2));
  expect_block(store, 0, pattern(3000, 0, 1));
}

TEST(NvmeBlockStore, WithoutChecksumsAChangeGoesUnnoticed) {
  ScratchDir dir("nochecksum");
  CpuAllocator pinned;
  const std::vector<int64_t> blocks = {3000, 6000};
  NvmeBlockStoreOptions o = options_for(dir.path(), blocks, 2);
  o.verify_checksums = false;
  NvmeBlockStore store(o, pinned);
  write_all(store, blocks, 1);
  scribble(store.file_path(), 10, 4);
  std::vector<char> expected = pattern(3000, 0, 1);
  std::fill(expected.begin() + 10, expected.begin() + 14, static_cast<char>(0x3c));
  expect_block(store, 0, expected);
}

TEST(NvmeBlockStore, FullDiskIsAFileErrorNamingTheFile) {
  SmallTmpfs disk("256k");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << disk.error() << "); needs CAP_SYS_ADMIN";
  CpuAllocator pinned;
  const std::vector<int64_t> blocks(8, 64 * 1024);  // 512 KiB on a 256 KiB disk (sparse at first)
  NvmeBlockStore store(options_for(disk.path(), blocks, 2), pinned);
  const std::string file = store.file_path().string();
  expect_error<FileError>([&] { write_all(store, blocks, 1); },
                          {file, "write of", std::strerror(ENOSPC), "the disk under nvme_path is full"});
  // No I/O is left in flight: the first block (written while there was room) still reads.
  expect_block(store, 0, pattern(64 * 1024, 0, 1));
}

// After the disk filled up, a block whose write failed (also one whose error was dropped because
// an earlier write's error was reported first) is named as lost when it is read: never returned
// as if it held the bytes written (checksums off), never blamed on someone altering the file.
TEST(NvmeBlockStore, ABlockWhoseWriteFailedIsReportedWhenRead) {
  for (const bool checksums : {true, false}) {
    SmallTmpfs disk("256k");
    if (!disk.mounted()) GTEST_SKIP() << "cannot mount a small tmpfs here (" << disk.error() << "); needs CAP_SYS_ADMIN";
    CpuAllocator pinned;
    const std::vector<int64_t> blocks(8, 64 * 1024);
    NvmeBlockStoreOptions o = options_for(disk.path(), blocks, 2);
    o.verify_checksums = checksums;
    NvmeBlockStore store(o, pinned);
    std::vector<bool> issued(blocks.size(), false);  // write() returned: the write was started
    int failures = 0;
    for (int64_t b = 0; b < 8; ++b) {
      try {
        store.write(b, pattern(64 * 1024, b, 1).data());
        issued[static_cast<size_t>(b)] = true;
      } catch (const FileError&) {
        ++failures;  // an earlier block's failed write (this one was not started)
      }
    }
    try {
      store.flush();
    } catch (const FileError&) {
      ++failures;
    }
    ASSERT_GT(failures, 0) << "512 KiB fit on a 256 KiB tmpfs";
    int lost = 0;
    int64_t first_lost = -1;
    for (int64_t b = 0; b < 8; ++b) {
      const std::string label = "block " + std::to_string(b) + (checksums ? "" : " without checksums");
      try {
        const void* bytes = store.acquire(b);
        const std::vector<char> expected =
            issued[static_cast<size_t>(b)] ? pattern(64 * 1024, b, 1) : std::vector<char>(64 * 1024, 0);
        EXPECT_EQ(std::memcmp(bytes, expected.data(), expected.size()), 0) << label;
        store.release(b);
      } catch (const FileError& e) {
        ++lost;
        if (first_lost < 0) first_lost = b;
        const std::string what = e.what();
        EXPECT_TRUE(issued[static_cast<size_t>(b)]) << label << ": " << what;
        EXPECT_NE(what.find("block " + std::to_string(b) + " (bytes"), std::string::npos) << what;
        EXPECT_NE(what.find("its last write failed"), std::string::npos) << label << ": " << what;
        EXPECT_EQ(what.find("checksum mismatch"), std::string::npos) << label << ": " << what;
      }
    }
    EXPECT_GT(lost, 0) << "the blocks that did not fit are named as lost";
    if (first_lost < 0) continue;
    // Once there is room again (block 0's space handed back to the file system), rewriting a lost
    // block makes it whole: the store is usable after the error.
    const int fd = ::open(store.file_path().c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 64 * 1024), 0) << std::strerror(errno);
    ::close(fd);
    store.write(first_lost, pattern(64 * 1024, first_lost, 2).data());
    store.flush();
    expect_block(store, first_lost, pattern(64 * 1024, first_lost, 2));
  }
}

TEST(NvmeBlockStore, StagingIsAccountedInTheGivenAllocatorAndFreed) {
  ScratchDir dir("staging");
  CpuAllocator pinned;
  const size_t host_before = cpu_allocator().stats().live(MemoryCategory::kParams);
  {
    NvmeBlockStore store(options_for(dir.path(), {5000, 3000, 100}, 3), pinned);
    const int64_t a = alignment_of(store);
    EXPECT_EQ(store.staging_bytes(), 3 * round_up_bytes(5000, a));
    const size_t live = pinned.stats().live(MemoryCategory::kParams);
    EXPECT_GE(live, static_cast<size_t>(store.staging_bytes()));
    EXPECT_LE(live, static_cast<size_t>(store.staging_bytes() + a)) << "one alignment of slack at most";
    EXPECT_EQ(pinned.stats().total_live_bytes, live) << "nothing in other categories";
    EXPECT_EQ(cpu_allocator().stats().live(MemoryCategory::kParams), host_before);
  }
  EXPECT_EQ(pinned.stats().total_live_bytes, 0u);
}

TEST(NvmeBlockStore, FailedConstructionLeavesNothingBehind) {
  ScratchDir dir("failed");
  ExhaustedAllocator exhausted;
  expect_error<Error>([&] { NvmeBlockStore s(options_for(dir.path(), {100, 200}, 2), exhausted); },
                      {"out of pinned memory"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "zero_param_swap")) << "file, lock and folders are removed";
  CpuAllocator pinned;
  NvmeBlockStore store(options_for(dir.path(), {100, 200}, 2), pinned);  // the lock was released
}

}  // namespace
}  // namespace zero::offload
