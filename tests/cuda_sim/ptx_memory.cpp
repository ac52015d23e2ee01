// The emulation of cp.async and ldmatrix (cuda_sim/ptx_memory.h). ldmatrix: the lanes exchange
// their row addresses (one warp exchange), then each lane reads its own fragment elements
// straight from the rows the PTX ISA assigns it.
#include "cuda_sim/ptx_memory.h"

#include <array>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_sim/thread_state.h"

namespace cuda_sim {
namespace {

void require_aligned(const void* p, const char* what) {
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    kernel_fault(std::string(what) + ": address not 16-byte aligned");
  }
}

uint16_t element(const void* row, unsigned column) {
  uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(row) + 2 * column, sizeof(v));
  return v;
}

uint32_t pack(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (uint32_t{hi} << 16); }

struct PendingCopy {
  void* shared_dst;
  std::array<unsigned char, 16> bytes;  // the source, read at issue
};
using CopyGroup = std::vector<PendingCopy>;

// One thread's copies: the open group (not yet committed) and the committed ones, oldest first.
struct ThreadCopies {
  CopyGroup open;
  std::deque<CopyGroup> committed;
};

// The running block's threads' copies (reset when another block runs: a block's unwaited copies
// are dropped with it).
ThreadCopies& my_copies() {
  static std::unordered_map<uint64_t, ThreadCopies> threads;
  static uint64_t block = ~uint64_t{0};
  if (block != block_serial()) {
    threads.clear();
    block = block_serial();
  }
  const uint3 t = g_builtins.thread_idx;
  const dim3 d = g_builtins.block_dim;
  return threads[(uint64_t{t.z} * d.y + t.y) * d.x + t.x];
}

}  // namespace

void cp_async_16(void* shared_dst, const void* global_src) {
  require_aligned(shared_dst, "cp.async destination");
  require_aligned(global_src, "cp.async source");
  PendingCopy copy{shared_dst, {}};
  std::memcpy(copy.bytes.data(), global_src, 16);
  my_copies().open.push_back(copy);
}

void cp_async_commit() {
  ThreadCopies& mine = my_copies();
  mine.committed.push_back(std::move(mine.open));
  mine.open.clear();
}

void cp_async_wait(int pending) {
  ThreadCopies& mine = my_copies();
  while (mine.committed.size() > static_cast<size_t>(pending < 0 ? 0 : pending)) {
    for (const PendingCopy& copy : mine.committed.front()) {
      std::memcpy(copy.shared_dst, copy.bytes.data(), 16);
    }
    mine.committed.pop_front();
  }
}

void ldmatrix_x4(uint32_t (&r)[4], const void* row, bool trans) {
  require_aligned(row, "ldmatrix row");
  const unsigned char* slots = warp_exchange(0xffffffffu, &row, sizeof(row),
                                             trans ? "ldmatrix.x4.trans" : "ldmatrix.x4");
  auto row_of = [slots](unsigned lane) {
    const void* p;
    std::memcpy(&p, slots + lane * kWarpSlotBytes, sizeof(p));
    return p;
  };
  const unsigned lane = lane_id(), group = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    if (trans) {  // column `group`, rows 2t and 2t + 1
      r[i] = pack(element(row_of(8 * i + 2 * t), group), element(row_of(8 * i + 2 * t + 1), group));
    } else {  // row `group`, columns 2t and 2t + 1
      const void* mine = row_of(8 * i + group);
      r[i] = pack(element(mine, 2 * t), element(mine, 2 * t + 1));
    }
  }
}

}  // namespace cuda_sim
