// How MIG devices are published (mig.h), checked with the allocator that hands them out: with
// the dynamic strategy every placement of a GPU is a device, and the per-memory-slice counters
// keep the allocator from giving out two placements that overlap, whichever way the GPU is
// split.
#include "agent/mig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/inventory.h"
#include "allocator/allocator.h"

namespace qm::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr char kNode[] = "node-a";

Quantity Gi(int64_t n) {
  return Quantity::FromInt(n * 1024 * 1024 * 1024, Quantity::Format::kBinarySI);
}

std::vector<std::string> Names(const std::vector<MigPlacementSpec>& specs) {
  std::vector<std::string> out;
  for (const auto& s : specs) out.push_back(NewMigPlacementDevice(s).name);
  return out;
}

TEST(MigTest, ParsesTheStrategies) {
  EXPECT_EQ(*ParseMigStrategy("static"), MigStrategy::kStatic);
  EXPECT_EQ(*ParseMigStrategy("dynamic"), MigStrategy::kDynamic);
  auto bad = ParseMigStrategy("mixed");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "want static or dynamic, got \"mixed\"");
}

TEST(MigTest, StandardPlacementsAreThoseOfNvidiasDrivers) {
  auto a100 = StandardMigPlacements("gpu-0", "GPU-a", 0, 7, Gi(40));
  EXPECT_THAT(
      Names(a100),
      ElementsAre("gpu-0-mig-1g-5gb-at-0", "gpu-0-mig-1g-5gb-at-1", "gpu-0-mig-1g-5gb-at-2",
                  "gpu-0-mig-1g-5gb-at-3", "gpu-0-mig-1g-5gb-at-4", "gpu-0-mig-1g-5gb-at-5",
                  "gpu-0-mig-1g-5gb-at-6", "gpu-0-mig-2g-10gb-at-0", "gpu-0-mig-2g-10gb-at-2",
                  "gpu-0-mig-2g-10gb-at-4", "gpu-0-mig-3g-20gb-at-0", "gpu-0-mig-3g-20gb-at-4",
                  "gpu-0-mig-4g-20gb-at-0", "gpu-0-mig-7g-40gb-at-0"));
  EXPECT_EQ(a100[11].size, 4);  // 3g covers 4 of the 8 memory slices
  EXPECT_EQ(a100[11].gpu_instance_slices, 3);
  EXPECT_EQ(a100[13].size, 8);
  auto a30 = StandardMigPlacements("gpu-1", "GPU-b", 1, 4, Gi(24));
  EXPECT_THAT(Names(a30),
              ElementsAre("gpu-1-mig-1g-6gb-at-0", "gpu-1-mig-1g-6gb-at-1", "gpu-1-mig-1g-6gb-at-2",
                          "gpu-1-mig-1g-6gb-at-3", "gpu-1-mig-2g-12gb-at-0",
                          "gpu-1-mig-2g-12gb-at-2", "gpu-1-mig-4g-24gb-at-0"));
  EXPECT_TRUE(StandardMigPlacements("gpu-2", "GPU-c", 2, 3, Gi(24)).empty());
}

TEST(MigTest, APlacementConsumesTheMemorySlicesItCovers) {
  model::CounterSet set = DynamicMigCounterSet("gpu-0", Gi(40), 7, 8);
  EXPECT_EQ(set.name, "gpu-0-counter-set");
  EXPECT_EQ(set.counters.size(), 10u);
  EXPECT_EQ(set.counters.at("memory").String(), "40Gi");
  EXPECT_EQ(set.counters.at("compute-slices").String(), "7");
  EXPECT_EQ(set.counters.at("memory-slice-0").String(), "1");
  EXPECT_EQ(set.counters.at("memory-slice-7").String(), "1");

  model::Device d = NewMigPlacementDevice(
      MigPlacementSpec{"gpu-0", "GPU-a", 0, "3g.20gb", 2, 4, 4, Gi(20), 42, 3});
  EXPECT_EQ(d.name, "gpu-0-mig-3g-20gb-at-4");
  EXPECT_EQ(std::get<std::string>(d.attributes.at("type")), "mig");
  EXPECT_EQ(std::get<std::string>(d.attributes.at("profile")), "3g.20gb");
  EXPECT_EQ(std::get<int64_t>(d.attributes.at("placementStart")), 4);
  EXPECT_EQ(std::get<int64_t>(d.attributes.at("placementSize")), 4);
  EXPECT_FALSE(d.attributes.contains("uuid"));  // no instance yet
  EXPECT_EQ(d.capacity.at("multiprocessors").value.String(), "42");
  ASSERT_EQ(d.consumes_counters.size(), 1u);
  std::vector<std::string> counters;
  for (const auto& [name, q] : d.consumes_counters[0].counters) {
    counters.push_back(name + "=" + q.String());
  }
  EXPECT_THAT(counters,
              UnorderedElementsAre("memory=20Gi", "compute-slices=3", "memory-slice-4=1",
                                   "memory-slice-5=1", "memory-slice-6=1", "memory-slice-7=1"));
  // Profiles with other characters ("+me") still give valid device names.
  EXPECT_EQ(MigPlacementDeviceName("gpu-0", "1g.5gb+me", 6), "gpu-0-mig-1g-5gb-me-at-6");
}

// The allocator over the pool an agent publishes for one A100-40GB with the dynamic strategy.
class MigAllocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::ResourceSlice counters;
    counters.name = "counters";
    counters.driver = kGpuDriver;
    counters.pool = kNode;
    counters.node_name = kNode;
    counters.resource_slice_count = 2;
    counters.shared_counters.push_back(DynamicMigCounterSet("gpu-0", Gi(40), 7, 8));
    model::ResourceSlice devices = counters;
    devices.name = "devices";
    devices.shared_counters.clear();
    for (const auto& spec : StandardMigPlacements("gpu-0", "GPU-a", 0, 7, Gi(40))) {
      devices.devices.push_back(NewMigPlacementDevice(spec));
    }
    std::vector<model::DeviceClass> classes;
    for (const char* profile : {"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}) {
      classes.push_back(
          {std::string("mig-") + profile,
           {"device.attributes['gpu.nvidia.com'].profile == '" + std::string(profile) + "'"},
           {},
           ""});
    }
    inventory_ = allocator::Inventory::Build({{counters, devices}, classes, {}});
  }

  // Allocates `count` devices of each class in `wants` as one claim, with `in_use` allocated.
  allocator::Outcome Allocate(const std::vector<std::pair<std::string, int>>& wants,
                              const std::vector<std::string>& in_use) {
    std::vector<allocator::AllocatedDevice> allocated;
    for (const auto& d : in_use) allocated.push_back({kGpuDriver, kNode, d, "", {}, false});
    allocator::AllocatedState state = inventory_->ResolveAllocated(allocated);
    model::ResourceClaim claim;
    claim.namespace_ = "ns";
    claim.name = "c";
    for (const auto& [profile, count] : wants) {
      model::DeviceRequest r;
      r.name = "r" + std::to_string(claim.spec.requests.size());
      r.exactly = model::ExactDeviceRequest{};
      r.exactly->device_class_name = "mig-" + profile;
      r.exactly->count = count;
      claim.spec.requests.push_back(std::move(r));
    }
    model::NodeInfo node{kNode, {}};
    return allocator::Allocate(*inventory_, state, {&claim}, &node);
  }

  static std::vector<std::string> Devices(const allocator::Outcome& out) {
    std::vector<std::string> names;
    for (const auto& a : out.allocations) {
      for (const auto& r : a.results) names.push_back(r.device);
    }
    return names;
  }

  std::shared_ptr<const allocator::Inventory> inventory_;
};

TEST_F(MigAllocationTest, SevenSmallInstancesFillTheGpu) {
  auto out = Allocate({{"1g.5gb", 7}}, {});
  ASSERT_EQ(out.kind, allocator::OutcomeKind::kAllocated) << out.reason << out.error;
  EXPECT_EQ(Devices(out).size(), 7u);
  // Nothing else fits beside them, not even the smallest profile of another size.
  EXPECT_EQ(Allocate({{"1g.5gb", 7}, {"2g.10gb", 1}}, {}).kind,
            allocator::OutcomeKind::kUnschedulable);
  EXPECT_EQ(Allocate({{"7g.40gb", 1}}, Devices(out)).kind, allocator::OutcomeKind::kUnschedulable);
}

TEST_F(MigAllocationTest, OverlappingPlacementsAreNeverBothAllocated) {
  // A 3g.20gb at memory slices 0-3 is in use: what is left is slices 4-7.
  const std::vector<std::string> in_use = {"gpu-0-mig-3g-20gb-at-0"};
  auto two = Allocate({{"2g.10gb", 1}}, in_use);
  ASSERT_EQ(two.kind, allocator::OutcomeKind::kAllocated) << two.reason << two.error;
  EXPECT_THAT(Devices(two), ElementsAre("gpu-0-mig-2g-10gb-at-4"));
  EXPECT_EQ(Allocate({{"2g.10gb", 2}}, in_use).kind, allocator::OutcomeKind::kUnschedulable);
  auto small = Allocate({{"1g.5gb", 3}}, in_use);
  ASSERT_EQ(small.kind, allocator::OutcomeKind::kAllocated) << small.reason << small.error;
  EXPECT_THAT(Devices(small), ElementsAre("gpu-0-mig-1g-5gb-at-4", "gpu-0-mig-1g-5gb-at-5",
                                          "gpu-0-mig-1g-5gb-at-6"));
  EXPECT_EQ(Allocate({{"1g.5gb", 4}}, in_use).kind, allocator::OutcomeKind::kUnschedulable);
  EXPECT_EQ(Allocate({{"4g.20gb", 1}}, in_use).kind, allocator::OutcomeKind::kUnschedulable);
  // The other 3g.20gb fits (slices 4-7), and then nothing does.
  auto other = Allocate({{"3g.20gb", 1}}, in_use);
  ASSERT_EQ(other.kind, allocator::OutcomeKind::kAllocated) << other.reason << other.error;
  EXPECT_THAT(Devices(other), ElementsAre("gpu-0-mig-3g-20gb-at-4"));
  EXPECT_EQ(Allocate({{"1g.5gb", 1}}, {"gpu-0-mig-3g-20gb-at-0", "gpu-0-mig-3g-20gb-at-4"}).kind,
            allocator::OutcomeKind::kUnschedulable);
}

TEST_F(MigAllocationTest, TheAllocatorSearchesForALayoutThatFits) {
  // One claim for a 4g.20gb and a 3g.20gb: only 4g at 0 and 3g at 4 fit together.
  auto out = Allocate({{"4g.20gb", 1}, {"3g.20gb", 1}}, {});
  ASSERT_EQ(out.kind, allocator::OutcomeKind::kAllocated) << out.reason << out.error;
  EXPECT_THAT(Devices(out), ElementsAre("gpu-0-mig-4g-20gb-at-0", "gpu-0-mig-3g-20gb-at-4"));
  // A 1g.5gb at slice 4 blocks both 3g placements' partner: 4g.20gb + 3g.20gb no longer fit.
  EXPECT_EQ(Allocate({{"4g.20gb", 1}, {"3g.20gb", 1}}, {"gpu-0-mig-1g-5gb-at-4"}).kind,
            allocator::OutcomeKind::kUnschedulable);
}

}  // namespace
}  // namespace qm::agent
