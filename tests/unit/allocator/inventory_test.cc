// allocator::Inventory on its own: pools and generations, node indexes, DeviceTaintRules applied,
// class selectors evaluated once per device, attribute sets, and what AllocatedState makes of
// allocations (exclusive devices, shares summed, counters consumed, unknown devices ignored).
#include "allocator/inventory.h"

#include <gtest/gtest.h>

namespace qm::allocator {
namespace {

Quantity Q(const std::string& text) { return *ParseQuantity(text); }

model::Device Gpu(const std::string& name, const std::string& product) {
  model::Device d;
  d.name = name;
  d.attributes["productName"] = product;
  d.attributes["gpu.example.com/numa"] = int64_t{0};
  return d;
}

model::ResourceSlice Slice(const std::string& node, int64_t generation,
                           std::vector<model::Device> devices) {
  model::ResourceSlice s;
  s.name = node + "-g" + std::to_string(generation);
  s.driver = "gpu.example.com";
  s.pool = node;
  s.generation = generation;
  s.node_name = node;
  s.devices = std::move(devices);
  return s;
}

TEST(InventoryTest, PoolsKeepTheirGenerationsAndNodesTheirSlices) {
  InventoryInput input;
  input.slices = {Slice("node-a", 1, {Gpu("gpu-0", "A100")}),
                  Slice("node-a", 2, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "A100")}),
                  Slice("node-b", 1, {Gpu("gpu-0", "L4")})};
  auto inv = Inventory::Build(std::move(input));
  ASSERT_EQ(inv->pools().size(), 2u);
  for (const auto& pool : inv->pools()) {
    EXPECT_EQ(pool.max_generation, pool.name == "node-a" ? 2 : 1) << pool.name;
    EXPECT_EQ(pool.groups.size(), pool.name == "node-a" ? 2u : 1u) << pool.name;
  }
  EXPECT_EQ(inv->SlicesOnNode("node-a").size(), 2u);
  EXPECT_EQ(inv->SlicesOnNode("node-b").size(), 1u);
  EXPECT_TRUE(inv->SlicesOnNode("node-c").empty());
  EXPECT_TRUE(inv->SlicesNotOnOneNode().empty());
  // gpu-0 of node-a exists in both generations.
  const std::vector<uint32_t> both = inv->FindDevice("gpu.example.com", "node-a", "gpu-0");
  ASSERT_EQ(both.size(), 2u);
  for (uint32_t i : both) {
    EXPECT_EQ(inv->DeviceId(inv->devices()[i]), "gpu.example.com/node-a/gpu-0");
  }
  // Oldest generation first.
  EXPECT_EQ(inv->groups()[inv->devices()[both[0]].group].generation, 1);
  EXPECT_EQ(inv->groups()[inv->devices()[both[1]].group].generation, 2);
  ASSERT_EQ(inv->FindDevice("gpu.example.com", "node-a", "gpu-1").size(), 1u);
  ASSERT_EQ(inv->FindDevice("gpu.example.com", "node-b", "gpu-0").size(), 1u);
  EXPECT_EQ(inv->devices()[inv->FindDevice("gpu.example.com", "node-b", "gpu-0")[0]]
                .device->attributes.at("productName"),
            model::AttributeValue{std::string("L4")});
  EXPECT_TRUE(inv->FindDevice("gpu.example.com", "node-a", "gpu-9").empty());
  EXPECT_TRUE(inv->FindDevice("gpu.example.com", "node-c", "gpu-0").empty());
  EXPECT_TRUE(inv->FindDevice("other.example.com", "node-a", "gpu-0").empty());
}

TEST(InventoryTest, TaintRulesAddTheirTaintToTheDevicesTheySelect) {
  InventoryInput input;
  model::Device tainted = Gpu("gpu-1", "A100");
  tainted.taints = {{"own", "", "NoSchedule", ""}};
  input.slices = {Slice("node-a", 1, {Gpu("gpu-0", "A100"), tainted}),
                  Slice("node-b", 1, {Gpu("gpu-0", "L4")})};
  model::DeviceTaintRule rule;
  rule.name = "drain-a";
  rule.driver = "gpu.example.com";
  rule.pool = "node-a";
  rule.taint = {"maintenance", "now", "NoExecute", ""};
  input.taint_rules = {rule};
  auto inv = Inventory::Build(std::move(input));
  std::map<std::string, std::vector<std::string>> keys;
  for (const auto& d : inv->devices()) {
    for (const auto& t : d.taints) keys[inv->DeviceId(d)].push_back(t.key);
  }
  EXPECT_EQ(keys, (std::map<std::string, std::vector<std::string>>{
                      {"gpu.example.com/node-a/gpu-0", {"maintenance"}},
                      {"gpu.example.com/node-a/gpu-1", {"own", "maintenance"}}}));
}

TEST(InventoryTest, ClassSelectorsMatchAndReportErrorsPerDevice) {
  InventoryInput input;
  input.slices = {Slice("node-a", 1, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "L4")})};
  model::DeviceClass a100;
  a100.name = "a100";
  a100.selectors = {"device.attributes['gpu.example.com'].productName == 'A100'"};
  model::DeviceClass broken;
  broken.name = "broken";
  broken.selectors = {"device.attributes['gpu.example.com'].missing == 'x'"};
  input.classes = {a100, broken};
  auto inv = Inventory::Build(std::move(input));
  const auto* cls = inv->FindClass("a100");
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(inv->FindClass("nope"), nullptr);
  std::string error;
  EXPECT_EQ(inv->ClassMatches(*cls, 0, &error), Inventory::Match::kYes);
  EXPECT_EQ(inv->ClassMatches(*cls, 1, &error), Inventory::Match::kNo);
  EXPECT_EQ(inv->ClassMatches(*cls, 0, &error), Inventory::Match::kYes);  // from the memo
  EXPECT_EQ(inv->ClassMatches(*inv->FindClass("broken"), 0, &error), Inventory::Match::kError);
  EXPECT_NE(error.find("missing"), std::string::npos) << error;
  // Attribute sets answer by fully qualified name, found under the bare name too.
  const auto& numa = inv->AttributeSets("gpu.example.com/numa");
  ASSERT_EQ(numa.size(), 2u);
  ASSERT_TRUE(numa[0].has_value());
  ASSERT_TRUE(numa[1].has_value());
  EXPECT_EQ(*numa[0], *numa[1]);  // both 0: one value id
  EXPECT_EQ(numa[0]->size(), 1u);
  const auto& products = inv->AttributeSets("gpu.example.com/productName");
  ASSERT_TRUE(products[0].has_value() && products[1].has_value());
  EXPECT_NE(*products[0], *products[1]);  // A100 and L4
  EXPECT_FALSE(inv->AttributeSets("gpu.example.com/nope")[0].has_value());
}

TEST(InventoryTest, ARebuildTakesTheValuesOfSlicesItSharesWithThePreviousInventory) {
  model::DeviceClass a100;
  a100.name = "a100";
  a100.selectors = {"device.attributes['gpu.example.com'].productName == 'A100'"};
  const SharedSlice kept = std::make_shared<const model::ResourceSlice>(
      Slice("node-b", 1, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "L4")}));
  auto first = Inventory::Build({{kept}, {a100}, {}});
  // node-a sorts before node-b: the kept slice's devices move to other positions.
  InventoryInput input{
      {Slice("node-a", 1, {Gpu("gpu-0", "L4")}), kept, Slice("node-c", 1, {Gpu("gpu-0", "A100")})},
      {a100},
      {}};
  auto second = Inventory::Build(std::move(input), nullptr, first.get());
  ASSERT_EQ(second->devices().size(), 4u);
  const auto* cls = second->FindClass("a100");
  ASSERT_NE(cls, nullptr);
  std::vector<std::string> seen;
  for (uint32_t i = 0; i < second->devices().size(); ++i) {
    std::string error;
    const bool yes = second->ClassMatches(*cls, i, &error) == Inventory::Match::kYes;
    seen.push_back(second->DeviceId(second->devices()[i]) + (yes ? " A100" : " other"));
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "gpu.example.com/node-a/gpu-0 other", "gpu.example.com/node-b/gpu-0 A100",
                      "gpu.example.com/node-b/gpu-1 other", "gpu.example.com/node-c/gpu-0 A100"}));
  // The kept slice's devices carry the very values of the first inventory.
  EXPECT_EQ(second->devices()[1].value->DebugString(), first->devices()[0].value->DebugString());
  EXPECT_EQ(second->devices()[2].device, &kept->devices[1]);
}

// The address of a device's `device` value (equal addresses: one value shared).
const void* ValueAddress(const Inventory& inv, uint32_t device) {
  return &inv.devices()[device].value->map_value();
}

TEST(InventoryTest, SlicesOfTheSameShapeShareTheirDeviceValuesAcrossRebuilds) {
  auto first =
      Inventory::Build({{Slice("node-a", 1, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "L4")})}, {}, {}});
  // node-b is node-a again under other names; node-c differs in one attribute of its second
  // device; node-d has a capacity node-a lacks.
  model::ResourceSlice d = Slice("node-d", 1, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "L4")});
  d.devices[1].capacity["memory"].value = Q("80Gi");
  model::ResourceSlice c = Slice("node-c", 1, {Gpu("gpu-0", "A100"), Gpu("gpu-1", "L4")});
  c.devices[1].attributes["gpu.example.com/numa"] = int64_t{1};
  InventoryInput input{{Slice("node-b", 1, {Gpu("x", "A100"), Gpu("y", "L4")}), c, d}, {}, {}};
  auto second = Inventory::Build(std::move(input), nullptr, first.get());
  ASSERT_EQ(second->devices().size(), 6u);
  auto at = [&](const char* node, const char* device) {
    const std::vector<uint32_t> found = second->FindDevice("gpu.example.com", node, device);
    EXPECT_EQ(found.size(), 1u) << node << "/" << device;
    return found.empty() ? 0u : found[0];
  };
  // node-a's slice is gone, but its shape stays: node-b takes its values.
  EXPECT_EQ(ValueAddress(*second, at("node-b", "x")), ValueAddress(*first, 0));
  EXPECT_EQ(ValueAddress(*second, at("node-b", "y")), ValueAddress(*first, 1));
  EXPECT_NE(ValueAddress(*second, at("node-c", "gpu-0")), ValueAddress(*first, 0));
  EXPECT_NE(ValueAddress(*second, at("node-c", "gpu-1")), ValueAddress(*first, 1));
  EXPECT_NE(ValueAddress(*second, at("node-d", "gpu-1")), ValueAddress(*first, 1));
  EXPECT_EQ(second->devices()[at("node-c", "gpu-1")].value->DebugString(),
            R"({"driver": "gpu.example.com", "attributes": {"gpu.example.com": {"numa": 1, )"
            R"("productName": "L4"}}, "capacity": {}, "allowMultipleAllocations": false})");
  EXPECT_EQ(second->devices()[at("node-d", "gpu-1")].value->DebugString(),
            R"({"driver": "gpu.example.com", "attributes": {"gpu.example.com": {"numa": 0, )"
            R"("productName": "L4"}}, "capacity": {"gpu.example.com": {"memory": )"
            R"(quantity("80Gi")}}, "allowMultipleAllocations": false})");
  // Within one build too: a third inventory with node-c twice under two names.
  model::ResourceSlice c2 = c;
  c2.name = "node-e-g1";
  c2.pool = c2.node_name = "node-e";
  auto third = Inventory::Build({{c, c2}, {}, {}});
  EXPECT_EQ(ValueAddress(*third, 0), ValueAddress(*third, 2));
  EXPECT_EQ(ValueAddress(*third, 1), ValueAddress(*third, 3));
}

TEST(InventoryTest, AllocatedStateCountsExclusiveSharedAndCounters) {
  InventoryInput input;
  model::Device shared = Gpu("gpu-0", "A100");
  shared.allow_multiple_allocations = true;
  shared.capacity["memory"].value = Q("80Gi");
  model::Device part = Gpu("gpu-1-mig", "A100");
  part.consumes_counters = {{"gpu-1", {{"memory", Q("40Gi")}}}};
  model::ResourceSlice s = Slice("node-a", 1, {shared, part, Gpu("gpu-2", "A100")});
  s.shared_counters = {{"gpu-1", {{"memory", Q("80Gi")}}}};
  input.slices = {s};
  auto inv = Inventory::Build(std::move(input));
  AllocatedState state = inv->ResolveAllocated({
      {"gpu.example.com", "node-a", "gpu-0", "share-1", {{"memory", Q("10Gi")}}, false},
      {"gpu.example.com", "node-a", "gpu-0", "share-2", {{"memory", Q("20Gi")}}, false},
      {"gpu.example.com", "node-a", "gpu-1-mig", "", {}, false},
      {"gpu.example.com", "node-a", "gpu-2", "", {}, true},  // admin access: blocks nothing
      {"gpu.example.com", "node-a", "gone", "", {}, false},  // not in the inventory
  });
  EXPECT_FALSE(state.Exclusive(0));
  ASSERT_NE(state.SharedConsumed(0), nullptr);
  EXPECT_EQ(state.SharedConsumed(0)->at("memory"), Q("30Gi"));
  EXPECT_TRUE(state.Exclusive(1));
  EXPECT_FALSE(state.Exclusive(2));
  const auto* counters = state.CountersConsumed(inv->devices()[1].group);
  ASSERT_NE(counters, nullptr);
  EXPECT_EQ(counters->at("gpu-1").at("memory"), Q("40Gi"));
  // In-flight bindings add to a resolved state.
  inv->AddAllocated(state, {{"gpu.example.com", "node-a", "gpu-2", "", {}, false}});
  EXPECT_TRUE(state.Exclusive(2));
}

TEST(InventoryTest, RemoveAllocatedUndoesExactlyOneAddition) {
  InventoryInput input;
  model::Device shared = Gpu("gpu-0", "A100");
  shared.allow_multiple_allocations = true;
  shared.capacity["memory"].value = Q("80Gi");
  shared.consumes_counters = {{"gpu-0", {{"memory", Q("80Gi")}}}};
  model::Device part = Gpu("gpu-1-mig", "A100");
  part.consumes_counters = {{"gpu-1", {{"memory", Q("40Gi")}}}};
  model::ResourceSlice s = Slice("node-a", 1, {shared, part});
  s.shared_counters = {{"gpu-0", {{"memory", Q("80Gi")}}}, {"gpu-1", {{"memory", Q("80Gi")}}}};
  input.slices = {s};
  auto inv = Inventory::Build(std::move(input));
  const uint32_t group = inv->devices()[0].group;
  const std::vector<AllocatedDevice> share1 = {
      {"gpu.example.com", "node-a", "gpu-0", "share-1", {{"memory", Q("10Gi")}}, false}};
  const std::vector<AllocatedDevice> share2 = {
      {"gpu.example.com", "node-a", "gpu-0", "share-2", {{"memory", Q("20Gi")}}, false}};
  const std::vector<AllocatedDevice> mig = {
      {"gpu.example.com", "node-a", "gpu-1-mig", "", {}, false}};
  // The same partition in two claims (conflicting allocations in the store): it stays taken
  // until both are gone.
  AllocatedState state = inv->ResolveAllocated({share1[0], share2[0], mig[0]});
  inv->AddAllocated(state, mig);
  EXPECT_EQ(state.size(), 4u);

  inv->RemoveAllocated(state, share1);
  ASSERT_NE(state.SharedConsumed(0), nullptr);
  EXPECT_EQ(state.SharedConsumed(0)->at("memory"), Q("20Gi"));
  // A shared device consumes its counters once, while any share is left.
  EXPECT_EQ(state.CountersConsumed(group)->at("gpu-0").at("memory"), Q("80Gi"));
  inv->RemoveAllocated(state, share2);
  EXPECT_EQ(state.SharedConsumed(0), nullptr);
  EXPECT_EQ(state.CountersConsumed(group)->at("gpu-0").at("memory"), Q("0"));

  inv->RemoveAllocated(state, mig);
  EXPECT_TRUE(state.Exclusive(1));
  EXPECT_EQ(state.CountersConsumed(group)->at("gpu-1").at("memory"), Q("40Gi"));
  inv->RemoveAllocated(state, mig);
  EXPECT_FALSE(state.Exclusive(1));
  EXPECT_EQ(state.CountersConsumed(group)->at("gpu-1").at("memory"), Q("0"));
  EXPECT_EQ(state.size(), 0u);

  // Added again, the devices count as before.
  inv->AddAllocated(state, share2);
  EXPECT_EQ(state.SharedConsumed(0)->at("memory"), Q("20Gi"));
  EXPECT_EQ(state.CountersConsumed(group)->at("gpu-0").at("memory"), Q("80Gi"));
}

}  // namespace
}  // namespace qm::allocator
