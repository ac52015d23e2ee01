// The NVMe swap of ZeRO-Infinity (offload::NvmeSwapStore) next to the disk's own sequential
// bandwidth, measured in the same run on the same folder.
//   build/default/bench/bench_nvme_swap [folder=.] [MiB=1024] [rounds=3] [sub_groups=8]
// The store holds three f32 tensors (master, exp_avg, exp_avg_sq: Adam's swapped state) of
// MiB/3 each, cut into `sub_groups` sub-groups. Figures, each the best of `rounds`:
//  * disk: O_DIRECT pwrite/pread of 16 MiB requests over a file of the same size from 1 and from
//    4 threads (the baseline: what the device gives sequentially, at depth 1 and 4; fdatasync is
//    part of the write time); the better of the two is the disk's figure;
//  * store write_all / read_all: the whole state out and back in (checkpoint-like traffic);
//  * sweep: for_each_sub_group with an update touching every element, read + write GB/s, with
//    the default aio block (1 MiB blocks, queue depth 8, 1 thread) and pipelining off
//    (buffer_count 3: one sub-group staged) versus pipeline_read + pipeline_write
//    (buffer_count 9: read next, update current, write previous overlap), the latter also
//    without the per-block checksums (verify_checksums off) to show what they cost.
// O_DIRECT keeps the page cache out of every figure; where the file system refuses it the store
// falls back to buffered I/O (the output says so) and the figures then measure the page cache.
#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "offload/nvme_block_store.h"
#include "offload/nvme_swap_store.h"

namespace {

using namespace zero;
using Clock = std::chrono::steady_clock;

double seconds_of(const std::function<void()>& f) {
  const auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string file_system_name(const std::filesystem::path& dir) {
  struct statfs s {};
  if (::statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<unsigned long>(s.f_type)) {
    case 0xEF53: return "ext2/ext3/ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(s.f_type));
      return hex;
    }
  }
}

struct DiskBaseline {
  double write_gbs = 0;
  double read_gbs = 0;
  bool direct = false;
};

// `threads` threads each moving a contiguous share with 16 MiB requests (1 thread: plain
// sequential; 4: sequential at queue depth 4), O_DIRECT where allowed, fdatasync inside the
// write timing.
DiskBaseline disk_baseline(const std::filesystem::path& dir, int64_t bytes, int rounds, int threads) {
  constexpr int64_t kChunk = 16 << 20;
  bytes = (bytes + kChunk - 1) / kChunk * kChunk;
  const std::string path = (dir / "bench_disk_baseline.bin").string();
  DiskBaseline out;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  out.direct = fd >= 0;
  if (fd < 0) fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw FileError(path + ": " + std::strerror(errno));
  std::vector<void*> buffers(static_cast<size_t>(threads));
  for (auto& b : buffers) {
    b = std::aligned_alloc(4096, kChunk);
    std::memset(b, 0x3c, kChunk);
  }
  const int64_t chunks = bytes / kChunk;
  // Runs pread or pwrite over the file from `threads` threads; false if any call fell short.
  auto transfer = [&](bool write) {
    std::vector<std::thread> pool;
    std::atomic<bool> ok{true};
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int64_t c = chunks * t / threads; c < chunks * (t + 1) / threads; ++c) {
          void* b = buffers[static_cast<size_t>(t)];
          const ssize_t n = write ? ::pwrite(fd, b, kChunk, c * kChunk) : ::pread(fd, b, kChunk, c * kChunk);
          if (n != kChunk) ok = false;
        }
      });
    }
    for (auto& th : pool) th.join();
    if (!ok) throw FileError(path + ": baseline " + (write ? "write" : "read") + " failed");
  };
  for (int r = 0; r < rounds; ++r) {
    const double w = seconds_of([&] {
      transfer(true);
      ::fdatasync(fd);
    });
    const double rd = seconds_of([&] { transfer(false); });
    out.write_gbs = std::max(out.write_gbs, static_cast<double>(bytes) / w / 1e9);
    out.read_gbs = std::max(out.read_gbs, static_cast<double>(bytes) / rd / 1e9);
  }
  for (void* b : buffers) std::free(b);
  ::close(fd);
  ::unlink(path.c_str());
  return out;
}

struct StoreFigures {
  double write_all_gbs = 0;
  double read_all_gbs = 0;
  double sweep_gbs = 0;  // bytes read + written per second
  double sweep_ms = 0;
  bool direct = false;
  int64_t staging_mib = 0;
};

StoreFigures measure_store(const std::filesystem::path& dir, int64_t numel, int64_t sub_group, bool pipelined,
                           bool checksums, int rounds) {
  offload::NvmeSwapStoreOptions o;
  o.nvme_path = dir;
  o.tensor_names = {"master", "exp_avg", "exp_avg_sq"};
  o.numel = numel;
  o.sub_group_elements = sub_group;
  o.buffer_count = pipelined ? 9 : 3;
  o.pipeline_read = pipelined;
  o.pipeline_write = pipelined;
  o.verify_checksums = checksums;
  offload::NvmeSwapStore store(o, cpu_pinned_allocator());
  StoreFigures f;
  f.direct = store.direct_io();
  f.staging_mib = store.staging_bytes() >> 20;
  std::vector<float> host(static_cast<size_t>(numel));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1000) * 1e-3f;
  const double tensor_bytes = static_cast<double>(numel) * 4.0;
  for (int r = 0; r < rounds; ++r) {
    const double w = seconds_of([&] {
      for (const auto& name : o.tensor_names) store.write_all(name, host);
    });
    const double rd = seconds_of([&] {
      for (const auto& name : o.tensor_names) store.read_all(name, host);
    });
    const double s = seconds_of([&] {
      store.for_each_sub_group([](int64_t, int64_t, int64_t count, std::span<Tensor> views) {
        float* p = views[0].data<float>();
        float* m = views[1].data<float>();
        float* v = views[2].data<float>();
        for (int64_t i = 0; i < count; ++i) {  // a memory-bound touch of every element
          m[i] = 0.9f * m[i] + 0.1f * p[i];
          v[i] = 0.99f * v[i] + 0.01f * p[i] * p[i];
          p[i] -= 1e-3f * m[i];
        }
      });
    });
    f.write_all_gbs = std::max(f.write_all_gbs, 3 * tensor_bytes / w / 1e9);
    f.read_all_gbs = std::max(f.read_all_gbs, 3 * tensor_bytes / rd / 1e9);
    if (f.sweep_ms == 0 || s * 1e3 < f.sweep_ms) f.sweep_ms = s * 1e3;
    f.sweep_gbs = std::max(f.sweep_gbs, 2 * 3 * tensor_bytes / s / 1e9);
  }
  return f;
}

struct ParamSwapFigures {
  double write_gbs = 0;  // publishing every block after a step
  double read_gbs = 0;   // one pass over the blocks in order, reading ahead into free buffers
  int64_t prefetch_hits = 0;
};

// ZeRO-Infinity's parameter swap (offload::NvmeBlockStore, offload_param {device: nvme}): `bytes`
// of parameter shards in `blocks` equal blocks (one per model unit), `buffer_count` staging
// buffers. The read pass is what a forward does: acquire each block in order after hinting the
// following ones, then release it (a real step uploads it to the device in between).
ParamSwapFigures measure_param_swap(const std::filesystem::path& dir, int64_t bytes, int64_t blocks,
                                    int64_t buffer_count, int rounds) {
  offload::NvmeBlockStoreOptions o;
  o.nvme_path = dir;
  const int64_t block = (bytes / blocks + 4095) / 4096 * 4096;
  o.block_bytes.assign(static_cast<size_t>(blocks), block);
  o.buffer_count = buffer_count;
  o.buffer_bytes = block;
  offload::NvmeBlockStore store(o, cpu_pinned_allocator());
  std::vector<char> source(static_cast<size_t>(block), 0x2a);
  ParamSwapFigures f;
  const double total = static_cast<double>(block) * static_cast<double>(blocks);
  for (int r = 0; r < rounds; ++r) {
    const double w = seconds_of([&] {
      for (int64_t b = 0; b < blocks; ++b) store.write(b, source.data());
      store.flush();
    });
    const int64_t hits_before = store.stats().prefetch_hits;
    const double rd = seconds_of([&] {
      for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t ahead = b + 1; ahead < blocks && store.prefetch(ahead); ++ahead) {
        }
        store.acquire(b);
        store.release(b);
      }
    });
    f.prefetch_hits = store.stats().prefetch_hits - hits_before;
    f.write_gbs = std::max(f.write_gbs, total / w / 1e9);
    f.read_gbs = std::max(f.read_gbs, total / rd / 1e9);
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : ".";
  const int64_t mib = argc > 2 ? std::atoll(argv[2]) : 1024;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  const int64_t sub_groups = argc > 4 ? std::atoll(argv[4]) : 8;
  if (mib < 3 || rounds < 1 || sub_groups < 1 || !std::filesystem::is_directory(dir)) {
    std::fprintf(stderr, "usage: bench_nvme_swap [existing folder] [MiB >= 3] [rounds >= 1] [sub_groups >= 1]\n");
    return 2;
  }
  try {
    const int64_t numel = mib * (1 << 20) / 4 / 3;
    const int64_t sub_group = (numel + sub_groups - 1) / sub_groups;
    std::printf("folder %s (%s); state %lld MiB = 3 tensors x %lld f32, %lld sub-groups of %lld; best of %d\n\n",
                std::filesystem::absolute(dir).string().c_str(), file_system_name(dir).c_str(),
                static_cast<long long>(mib), static_cast<long long>(numel), static_cast<long long>(sub_groups),
                static_cast<long long>(sub_group), rounds);
    DiskBaseline disk;
    std::printf("| disk baseline (16 MiB requests) | write GB/s | read GB/s |\n|---|---|---|\n");
    for (int threads : {1, 4}) {
      const DiskBaseline d = disk_baseline(dir, numel * 4 * 3, rounds, threads);
      std::printf("| %d thread%s%s | %.2f | %.2f |\n", threads, threads > 1 ? "s" : "",
                  d.direct ? ", O_DIRECT" : ", buffered", d.write_gbs, d.read_gbs);
      disk.write_gbs = std::max(disk.write_gbs, d.write_gbs);
      disk.read_gbs = std::max(disk.read_gbs, d.read_gbs);
    }
    std::printf("| best of both (the disk's figure below) | %.2f | %.2f |\n\n", disk.write_gbs, disk.read_gbs);
    std::printf("| NvmeSwapStore (aio defaults) | staging MiB | write_all GB/s | read_all GB/s | sweep ms | "
                "sweep GB/s (read+write) | sweep / mean(disk r,w) |\n|---|---|---|---|---|---|---|\n");
    const double disk_mean = 2.0 / (1.0 / disk.write_gbs + 1.0 / disk.read_gbs);
    for (const auto& [pipelined, checksums] : {std::pair{false, true}, std::pair{true, true}, std::pair{true, false}}) {
      const StoreFigures f = measure_store(dir, numel, sub_group, pipelined, checksums, rounds);
      std::printf("| %s%s%s | %lld | %.2f | %.2f | %.0f | %.2f | %.0f%% |\n",
                  pipelined ? "pipeline_read+write, buffer_count 9" : "pipelining off, buffer_count 3",
                  checksums ? "" : ", verify_checksums off",
                  f.direct ? "" : " (buffered: O_DIRECT refused)", static_cast<long long>(f.staging_mib),
                  f.write_all_gbs, f.read_all_gbs, f.sweep_ms, f.sweep_gbs, 100.0 * f.sweep_gbs / disk_mean);
    }
    std::printf("\nsweep / mean: the sweep's read+write rate over the harmonic mean of the disk's sequential\n"
                "read and write rates (the rate a disk doing both halves one after the other gives).\n\n");
    // The parameter swap moves the same number of bytes as one of the three state tensors x 3
    // (a bf16 partition of 1.5x the f32 state's elements would be the same size).
    const int64_t param_blocks = 32;
    std::printf("| NvmeBlockStore (parameters, %lld blocks) | write GB/s | read pass GB/s | read / disk read | "
                "prefetch hits |\n|---|---|---|---|---|\n",
                static_cast<long long>(param_blocks));
    for (const int64_t buffers : {int64_t{1}, int64_t{5}}) {
      const ParamSwapFigures f = measure_param_swap(dir, numel * 4 * 3, param_blocks, buffers, rounds);
      std::printf("| buffer_count %lld | %.2f | %.2f | %.0f%% | %lld of %lld |\n", static_cast<long long>(buffers),
                  f.write_gbs, f.read_gbs, 100.0 * f.read_gbs / disk.read_gbs,
                  static_cast<long long>(f.prefetch_hits), static_cast<long long>(param_blocks));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_nvme_swap: %s\n", e.what());
    return 1;
  }
  return 0;
}
