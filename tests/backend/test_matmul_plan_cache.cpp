// The CUDA backend's cuBLASLt plan cache (backend/cuda/cuda_matmul_plan_cache.h): the key must
// change with every property that shapes the descriptors or the heuristic's answer and with
// nothing else, and the cache must keep the most recently used plans. The header uses no CUDA,
// so this runs in every build, GPU or not (the addresses below are never dereferenced).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_matmul_plan_cache.h"
#include "core/error.h"

namespace zero::backend::cuda {
namespace {

const void* address(uintptr_t value) { return reinterpret_cast<const void*>(value); }
void* mutable_address(uintptr_t value) { return reinterpret_cast<void*>(value); }

// GPT-2's attention projection in bf16, each operand at a 256-byte-aligned address.
GemmOperands base_operands() {
  GemmOperands op;
  op.dtype = DType::kBF16;
  op.transpose_a = false;
  op.transpose_b = true;
  op.m = 4096;
  op.n = 768;
  op.k = 768;
  op.a = address(0x10000);
  op.lda = 768;
  op.b = address(0x20000);
  op.ldb = 768;
  op.c = mutable_address(0x30000);
  op.ldc = 768;
  op.alpha = 1.0f;
  op.beta = 0.0f;
  return op;
}

constexpr size_t kWorkspace = size_t{32} << 20;

struct Change {
  std::string name;
  std::function<void(GemmOperands&, size_t&)> apply;
};

// Runs each change on a copy of `base` and expects a different key (and, for these values, a
// different hash: a field the hash skipped would put every such plan in one bucket).
void expect_each_change_alters_key(const GemmOperands& base, const std::vector<Change>& changes) {
  const MatmulPlanKey base_key = make_plan_key(base, kWorkspace);
  const size_t base_hash = MatmulPlanKeyHash{}(base_key);
  for (const Change& change : changes) {
    GemmOperands op = base;
    size_t workspace = kWorkspace;
    change.apply(op, workspace);
    const MatmulPlanKey key = make_plan_key(op, workspace);
    EXPECT_FALSE(key == base_key) << change.name << " must change the key";
    EXPECT_NE(MatmulPlanKeyHash{}(key), base_hash) << change.name << " must change the hash";
  }
}

TEST(MatmulPlanKey, PointerAlignmentIsTheLargestPowerOfTwoUpTo256) {
  EXPECT_EQ(pointer_alignment(address(0x10000)), 256u);
  EXPECT_EQ(pointer_alignment(address(0x10100)), 256u);
  EXPECT_EQ(pointer_alignment(address(0x10080)), 128u);
  EXPECT_EQ(pointer_alignment(address(0x10010)), 16u);
  EXPECT_EQ(pointer_alignment(address(0x10002)), 2u);
  EXPECT_EQ(pointer_alignment(address(0x10001)), 1u);
  EXPECT_EQ(pointer_alignment(nullptr), 256u);
}

TEST(MatmulPlanKey, SameOperandsGiveEqualKeysAndHashes) {
  const MatmulPlanKey a = make_plan_key(base_operands(), kWorkspace);
  const MatmulPlanKey b = make_plan_key(base_operands(), kWorkspace);
  EXPECT_TRUE(a == b);
  EXPECT_EQ(MatmulPlanKeyHash{}(a), MatmulPlanKeyHash{}(b));
}

TEST(MatmulPlanKey, EveryPropertyOfTheProductIsInTheKey) {
  expect_each_change_alters_key(
      base_operands(),
      {{"dtype", [](GemmOperands& op, size_t&) { op.dtype = DType::kF32; }},
       {"transpose_a", [](GemmOperands& op, size_t&) { op.transpose_a = true; }},
       {"transpose_b", [](GemmOperands& op, size_t&) { op.transpose_b = false; }},
       {"m", [](GemmOperands& op, size_t&) { op.m = 4095; }},
       {"n", [](GemmOperands& op, size_t&) { op.n = 767; }},
       {"k", [](GemmOperands& op, size_t&) { op.k = 767; }},
       {"lda", [](GemmOperands& op, size_t&) { op.lda = 2304; }},
       {"ldb", [](GemmOperands& op, size_t&) { op.ldb = 2304; }},
       {"ldc", [](GemmOperands& op, size_t&) { op.ldc = 2304; }},
       {"beta zero -> nonzero", [](GemmOperands& op, size_t&) { op.beta = 1.0f; }},
       {"bias epilogue", [](GemmOperands& op, size_t&) { op.bias = address(0x40000); }},
       {"a alignment", [](GemmOperands& op, size_t&) { op.a = address(0x10002); }},
       {"b alignment", [](GemmOperands& op, size_t&) { op.b = address(0x20010); }},
       {"c alignment", [](GemmOperands& op, size_t&) { op.c = mutable_address(0x30004); }},
       {"workspace bytes", [](GemmOperands&, size_t& workspace) { workspace = 4u << 20; }}});
}

TEST(MatmulPlanKey, BiasAlignmentIsInTheKey) {
  // The heuristic reads the bias pointer for its alignment (cublasLt.h).
  GemmOperands with_bias = base_operands();
  with_bias.bias = address(0x40000);
  const MatmulPlanKey key = make_plan_key(with_bias, kWorkspace);
  EXPECT_TRUE(key.bias);
  EXPECT_EQ(key.bias_dtype, DType::kBF16);
  EXPECT_EQ(key.bias_alignment, 256u);
  expect_each_change_alters_key(
      with_bias, {{"bias alignment", [](GemmOperands& op, size_t&) { op.bias = address(0x40002); }},
                  {"dtype (of the bias too)",
                   [](GemmOperands& op, size_t&) { op.dtype = DType::kF16; }}});
}

// make_plan_key ties the bias dtype to the operands' dtype; the key and hash still tell a key
// whose bias dtype alone differs apart (a second bias dtype would need no change here).
TEST(MatmulPlanKey, EveryKeyFieldTakesPartInEqualityAndHash) {
  GemmOperands with_bias = base_operands();
  with_bias.bias = address(0x40000);
  const MatmulPlanKey base = make_plan_key(with_bias, kWorkspace);
  const std::vector<std::pair<std::string, std::function<void(MatmulPlanKey&)>>> fields = {
      {"dtype", [](MatmulPlanKey& k) { k.dtype = DType::kF16; }},
      {"transpose_a", [](MatmulPlanKey& k) { k.transpose_a = !k.transpose_a; }},
      {"transpose_b", [](MatmulPlanKey& k) { k.transpose_b = !k.transpose_b; }},
      {"m", [](MatmulPlanKey& k) { ++k.m; }},
      {"n", [](MatmulPlanKey& k) { ++k.n; }},
      {"k", [](MatmulPlanKey& k) { ++k.k; }},
      {"lda", [](MatmulPlanKey& k) { ++k.lda; }},
      {"ldb", [](MatmulPlanKey& k) { ++k.ldb; }},
      {"ldc", [](MatmulPlanKey& k) { ++k.ldc; }},
      {"beta_zero", [](MatmulPlanKey& k) { k.beta_zero = !k.beta_zero; }},
      {"bias", [](MatmulPlanKey& k) { k.bias = !k.bias; }},
      {"bias_dtype", [](MatmulPlanKey& k) { k.bias_dtype = DType::kF32; }},
      {"bias_alignment", [](MatmulPlanKey& k) { k.bias_alignment = 8; }},
      {"a_alignment", [](MatmulPlanKey& k) { k.a_alignment = 8; }},
      {"b_alignment", [](MatmulPlanKey& k) { k.b_alignment = 8; }},
      {"c_alignment", [](MatmulPlanKey& k) { k.c_alignment = 8; }},
      {"workspace_bytes", [](MatmulPlanKey& k) { k.workspace_bytes /= 2; }},
      {"epilogue", [](MatmulPlanKey& k) { k.epilogue = GemmOperands::Epilogue::kGelu; }},
      {"ld_aux", [](MatmulPlanKey& k) { k.ld_aux = 3072; }},
      {"aux_alignment", [](MatmulPlanKey& k) { k.aux_alignment = 16; }}};
  for (const auto& [name, change] : fields) {
    MatmulPlanKey key = base;
    change(key);
    EXPECT_FALSE(key == base) << name;
    EXPECT_NE(MatmulPlanKeyHash{}(key), MatmulPlanKeyHash{}(base)) << name;
  }
}

TEST(MatmulPlanKey, GeluEpilogueAuxLeadingDimensionAndAlignmentAreInTheKey) {
  // GPT-2's MLP up-projection with GELU in the epilogue; then its gradient's epilogue.
  GemmOperands gelu = base_operands();
  gelu.n = 3072;
  gelu.ldc = 3072;
  gelu.epilogue = GemmOperands::Epilogue::kGelu;
  gelu.aux = mutable_address(0x50000);
  gelu.ld_aux = 3072;
  const MatmulPlanKey key = make_plan_key(gelu, kWorkspace);
  EXPECT_EQ(key.epilogue, GemmOperands::Epilogue::kGelu);
  EXPECT_EQ(key.ld_aux, 3072);
  EXPECT_EQ(key.aux_alignment, 256u);
  expect_each_change_alters_key(
      gelu,
      {{"no epilogue",
        [](GemmOperands& op, size_t&) { op.epilogue = GemmOperands::Epilogue::kNone; }},
       {"gradient epilogue",
        [](GemmOperands& op, size_t&) { op.epilogue = GemmOperands::Epilogue::kGeluGradient; }},
       {"ld_aux", [](GemmOperands& op, size_t&) { op.ld_aux = 3080; }},
       {"aux alignment", [](GemmOperands& op, size_t&) { op.aux = mutable_address(0x50010); }}});
  // Without an epilogue the aux fields are not read: stale values must not split the plans.
  GemmOperands plain = base_operands(), stale = base_operands();
  stale.aux = mutable_address(0x50010);
  stale.ld_aux = 8;
  EXPECT_TRUE(make_plan_key(plain, kWorkspace) == make_plan_key(stale, kWorkspace));
}

TEST(MatmulPlanKey, AddressesAlphaAndBetaValueAreNotInTheKey) {
  // These change from call to call (activations, the bias view of each layer) without changing
  // the plan: keying on them would make every call a miss.
  GemmOperands first = base_operands();
  first.bias = address(0x40000);
  GemmOperands second = first;
  second.a = address(0x90000);
  second.b = address(0xa0100);
  second.c = mutable_address(0xb0000);
  second.bias = address(0xc0000);
  second.alpha = 0.5f;
  EXPECT_TRUE(make_plan_key(first, kWorkspace) == make_plan_key(second, kWorkspace));

  GemmOperands accumulate = base_operands();
  accumulate.beta = 1.0f;
  GemmOperands accumulate_half = accumulate;
  accumulate_half.beta = 0.5f;
  EXPECT_TRUE(make_plan_key(accumulate, kWorkspace) == make_plan_key(accumulate_half, kWorkspace));
}

// A plan that counts its destructions (the cache must destroy each evicted plan exactly once).
struct CountedPlan {
  int id = 0;
  std::shared_ptr<int> destroyed;
  CountedPlan(int plan_id, std::shared_ptr<int> counter)
      : id(plan_id), destroyed(std::move(counter)) {}
  CountedPlan(CountedPlan&&) = default;
  CountedPlan& operator=(CountedPlan&&) = default;
  ~CountedPlan() {
    if (destroyed) ++*destroyed;
  }
};

MatmulPlanKey key_with_m(int64_t m) {
  GemmOperands op = base_operands();
  op.m = m;
  return make_plan_key(op, kWorkspace);
}

TEST(MatmulPlanCache, FindsWhatWasInsertedAtAStableAddress) {
  MatmulPlanCache<CountedPlan> cache(8);
  const auto destroyed = std::make_shared<int>(0);
  EXPECT_EQ(cache.find(key_with_m(1)), nullptr);
  CountedPlan& first = cache.insert(key_with_m(1), CountedPlan(1, destroyed));
  for (int64_t m = 2; m <= 8; ++m) cache.insert(key_with_m(m), CountedPlan(static_cast<int>(m), destroyed));
  EXPECT_EQ(cache.size(), 8u);
  EXPECT_EQ(cache.find(key_with_m(1)), &first);
  EXPECT_EQ(first.id, 1);
  EXPECT_EQ(cache.find(key_with_m(5))->id, 5);
  EXPECT_EQ(cache.find(key_with_m(9)), nullptr);
  EXPECT_EQ(cache.evictions(), 0u);
  EXPECT_EQ(*destroyed, 0);
}

TEST(MatmulPlanCache, EvictsTheLeastRecentlyUsedPlanWhenFull) {
  MatmulPlanCache<CountedPlan> cache(3);
  const auto destroyed = std::make_shared<int>(0);
  cache.insert(key_with_m(1), CountedPlan(1, destroyed));
  cache.insert(key_with_m(2), CountedPlan(2, destroyed));
  cache.insert(key_with_m(3), CountedPlan(3, destroyed));
  ASSERT_NE(cache.find(key_with_m(1)), nullptr);  // 2 is now the least recently used

  cache.insert(key_with_m(4), CountedPlan(4, destroyed));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(*destroyed, 1);
  EXPECT_EQ(cache.find(key_with_m(2)), nullptr);
  EXPECT_NE(cache.find(key_with_m(1)), nullptr);
  EXPECT_NE(cache.find(key_with_m(3)), nullptr);
  EXPECT_NE(cache.find(key_with_m(4)), nullptr);

  // Found in order 1, 3, 4: 1 is the oldest now, so inserting 2 again evicts it.
  cache.insert(key_with_m(2), CountedPlan(2, destroyed));
  EXPECT_EQ(cache.find(key_with_m(1)), nullptr);
  EXPECT_EQ(cache.evictions(), 2u);
  EXPECT_EQ(*destroyed, 2);

  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(*destroyed, 5);
  EXPECT_EQ(cache.find(key_with_m(3)), nullptr);
}

TEST(MatmulPlanCache, HoldsMoveOnlyPlansAndRejectsDuplicateKeysAndZeroCapacity) {
  MatmulPlanCache<std::unique_ptr<int>> cache(2);
  cache.insert(key_with_m(1), std::make_unique<int>(7));
  EXPECT_EQ(**cache.find(key_with_m(1)), 7);
  EXPECT_THROW(cache.insert(key_with_m(1), std::make_unique<int>(8)), Error);
  EXPECT_EQ(**cache.find(key_with_m(1)), 7);
  EXPECT_THROW(MatmulPlanCache<int>(0), Error);
}

}  // namespace
}  // namespace zero::backend::cuda
