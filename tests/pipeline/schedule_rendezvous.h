// Test support: runs every stage's instruction stream of one pipeline together with rendezvous
// semantics, the way DeepSpeed's blocking p2p behaves, to show that sends and receives pair up.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "pipeline/pipe_instruction.h"

namespace zero::pipeline {

// Runs all stages' streams with rendezvous semantics (a send blocks until the neighbour reaches
// the matching receive, as DeepSpeed's blocking p2p does), checking each pair: same kind, same
// step, same micro-batch (by order). Returns whether every stage finished (no deadlock).
inline bool runs_without_deadlock(const std::vector<std::vector<PipeStep>>& streams,
                                  const std::string& where) {
  struct Cursor {
    size_t step = 0, index = 0;
    std::map<InstructionKind, int64_t> count;
  };
  const size_t stages = streams.size();
  std::vector<Cursor> at(stages);
  auto head = [&](size_t s) -> const PipeInstruction* {
    Cursor& c = at[s];
    while (c.step < streams[s].size() && c.index >= streams[s][c.step].size()) {
      ++c.step;
      c.index = 0;
    }
    return c.step < streams[s].size() ? &streams[s][c.step][c.index] : nullptr;
  };
  auto is_comm = [](InstructionKind k) {
    return k == InstructionKind::kSendActivation || k == InstructionKind::kRecvActivation || k == InstructionKind::kSendGrad ||
           k == InstructionKind::kRecvGrad;
  };
  auto advance = [&](size_t s, InstructionKind kind) {
    ++at[s].count[kind];
    ++at[s].index;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t s = 0; s < stages; ++s) {
      for (const PipeInstruction* op = head(s); op != nullptr && !is_comm(op->kind); op = head(s)) {
        advance(s, op->kind);
        progress = true;
      }
    }
    for (size_t s = 0; s + 1 < stages; ++s) {
      const PipeInstruction* up = head(s);
      const PipeInstruction* down = head(s + 1);
      if (up == nullptr || down == nullptr) continue;
      const bool activation = up->kind == InstructionKind::kSendActivation && down->kind == InstructionKind::kRecvActivation;
      const bool gradient = up->kind == InstructionKind::kRecvGrad && down->kind == InstructionKind::kSendGrad;
      if (!activation && !gradient) continue;
      EXPECT_EQ(at[s].step, at[s + 1].step) << where << " stages " << s << "-" << s + 1;
      EXPECT_EQ(at[s].count[up->kind], at[s + 1].count[down->kind])
          << where << " stages " << s << "-" << s + 1 << " step " << at[s].step;
      advance(s, up->kind);
      advance(s + 1, down->kind);
      progress = true;
    }
  }
  for (size_t s = 0; s < stages; ++s) {
    if (head(s) != nullptr) {
      ADD_FAILURE() << where << ": stage " << s << " blocked at step " << at[s].step << " on "
                    << head(s)->to_string();
      return false;
    }
  }
  return true;
}

}  // namespace zero::pipeline
