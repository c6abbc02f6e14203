#include "service/placement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace qm::service {
namespace {

using ::testing::HasSubstr;

constexpr char kDriver[] = "gpu.example.com";

model::ResourceSlice Slice(const std::string& node, int devices) {
  model::ResourceSlice s;
  s.name = node;
  s.driver = kDriver;
  s.pool = node;
  s.node_name = node;
  for (int i = 0; i < devices; ++i) {
    model::Device d;
    d.name = "gpu-" + std::to_string(i);
    s.devices.push_back(std::move(d));
  }
  return s;
}

model::ResourceClaim Claim(int64_t count) {
  model::ResourceClaim c;
  c.namespace_ = "default";
  c.name = "c1";
  model::DeviceRequest r;
  r.name = "gpu";
  r.exactly = model::ExactDeviceRequest{};
  r.exactly->device_class_name = "gpu";
  r.exactly->count = count;
  c.spec.requests.push_back(std::move(r));
  return c;
}

class PlacementTest : public ::testing::Test {
 protected:
  void Build(std::vector<model::ResourceSlice> slices,
             std::vector<allocator::AllocatedDevice> used = {}) {
    inventory_ = allocator::Inventory::Build(
        {{std::make_move_iterator(slices.begin()), std::make_move_iterator(slices.end())},
         {model::DeviceClass{"gpu", {"device.driver == 'gpu.example.com'"}, {}, ""}},
         {}});
    allocated_ = inventory_->ResolveAllocated(used);
  }
  PlacementRequest Request(const model::ResourceClaim& claim) {
    PlacementRequest r;
    r.inventory = inventory_.get();
    r.allocated = &allocated_;
    r.nodes = &nodes_;
    r.to_allocate = {&claim};
    return r;
  }
  std::shared_ptr<const allocator::Inventory> inventory_;
  allocator::AllocatedState allocated_;
  std::vector<NodeState> nodes_;
};

TEST_F(PlacementTest, PacksOntoTheNodeWithFewestFreeDevicesLeft) {
  Build({Slice("a", 4), Slice("b", 2), Slice("c", 8)});
  nodes_ = {{{"a", {}}}, {{"b", {}}}, {{"c", {}}}};
  model::ResourceClaim claim = Claim(1);
  Placement p = Place(Request(claim));
  ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << p.message;
  EXPECT_EQ(p.node, "b");
  ASSERT_EQ(p.allocations.size(), 1u);
  EXPECT_EQ(p.allocations[0].results[0].pool, "b");

  PlacementRequest spread = Request(claim);
  spread.pod.spread = true;
  EXPECT_EQ(Place(spread).node, "c");
}

TEST_F(PlacementTest, TiesGoToTheFirstNodeByName) {
  Build({Slice("n2", 4), Slice("n1", 4), Slice("n3", 4)});
  nodes_ = {{{"n2", {}}}, {{"n3", {}}}, {{"n1", {}}}};
  model::ResourceClaim claim = Claim(2);
  EXPECT_EQ(Place(Request(claim)).node, "n1");
}

TEST_F(PlacementTest, CountsWhyEveryNodeWasRejected) {
  Build({Slice("full", 1), Slice("tainted", 4), Slice("cordoned", 4), Slice("other", 4),
         Slice("down", 4)},
        {{kDriver, "full", "gpu-0", "", {}, false}});
  nodes_ = {
      {{"full", {{"zone", "a"}}}},
      {{"tainted", {{"zone", "a"}}}, true, false, {{"nvidia.com/gpu", "present", "NoSchedule"}}},
      {{"cordoned", {{"zone", "a"}}}, true, true, {}},
      {{"other", {{"zone", "b"}}}},
      {{"down", {{"zone", "a"}}}, false, false, {}}};
  model::ResourceClaim claim = Claim(1);
  PlacementRequest r = Request(claim);
  r.pod.node_selector = {{"zone", "a"}};
  Placement p = Place(r);
  ASSERT_EQ(p.kind, Placement::Kind::kUnschedulable);
  EXPECT_EQ(p.message,
            "0/5 nodes are available: 1 insufficient devices of class gpu, 1 node(s) didn't match "
            "Pod's node affinity/selector, 1 node(s) had untolerated taint {nvidia.com/gpu: "
            "present}, 1 node(s) were not ready, 1 node(s) were unschedulable.");

  // Tolerating the taint makes the tainted node the only feasible one.
  r.pod.tolerations.push_back({"nvidia.com/gpu", "Exists", "", ""});
  p = Place(r);
  ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << p.message;
  EXPECT_EQ(p.node, "tainted");
}

TEST_F(PlacementTest, AllocatedClaimsPinTheNode) {
  Build({Slice("a", 4), Slice("b", 1)});
  nodes_ = {{{"a", {}}}, {{"b", {}}}};
  model::ResourceClaim claim = Claim(1);
  PlacementRequest r = Request(claim);
  model::NodeSelectorTerm term;
  term.match_fields.push_back({"metadata.name", "In", {"a"}});
  r.pinned.push_back(model::NodeSelector{{term}});
  Placement p = Place(r);
  ASSERT_EQ(p.kind, Placement::Kind::kPlaced) << p.message;
  EXPECT_EQ(p.node, "a");  // b would pack better, but the pod's other claim lives on a
}

TEST_F(PlacementTest, RequiredNodeAffinityFilters) {
  Build({Slice("a", 1), Slice("b", 1)});
  nodes_ = {{{"a", {{"gpu", "a100"}}}}, {{"b", {{"gpu", "l4"}}}}};
  model::ResourceClaim claim = Claim(1);
  PlacementRequest r = Request(claim);
  model::NodeSelectorTerm term;
  term.match_expressions.push_back({"gpu", "In", {"l4", "h100"}});
  r.pod.required_affinity = model::NodeSelector{{term}};
  EXPECT_EQ(Place(r).node, "b");
}

TEST_F(PlacementTest, InvalidClaimIsReportedOnce) {
  Build({Slice("a", 1)});
  nodes_ = {{{"a", {}}}};
  model::ResourceClaim claim = Claim(1);
  claim.spec.requests[0].exactly->device_class_name = "missing";
  Placement p = Place(Request(claim));
  EXPECT_EQ(p.kind, Placement::Kind::kInvalid);
  EXPECT_THAT(p.message, HasSubstr("could not retrieve device class missing"));
}

TEST_F(PlacementTest, ManyNodesInParallelAgreeWithOneWorker) {
  std::vector<model::ResourceSlice> slices;
  std::vector<allocator::AllocatedDevice> used;
  for (int n = 0; n < 200; ++n) {
    std::string name = "n" + std::to_string(1000 + n);
    slices.push_back(Slice(name, 8));
    nodes_.push_back({{name, {}}});
    for (int d = 0; d < n % 8; ++d)
      used.push_back({kDriver, name, "gpu-" + std::to_string(d), "", {}, false});
  }
  Build(slices, used);
  model::ResourceClaim claim = Claim(1);
  PlacementRequest one = Request(claim);
  one.parallelism = 1;
  PlacementRequest many = Request(claim);
  many.parallelism = 4;
  Placement a = Place(one);
  Placement b = Place(many);
  ASSERT_EQ(a.kind, Placement::Kind::kPlaced);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.node, "n1007");  // 7 of 8 in use: one left, taking it leaves zero free
}

// A memo answers as a placement from scratch would, pod after pod, while bindings land on nodes
// (their versions bumped), with packing and with spreading, until the devices run out. Node
// names are not in index order, so ties are decided by name, not by position.
TEST_F(PlacementTest, AMemoAgreesWithAFreshPlacementAsBindingsLand) {
  for (const bool spread : {false, true}) {
    SCOPED_TRACE(spread ? "spread" : "pack");
    std::vector<model::ResourceSlice> slices;
    std::vector<allocator::AllocatedDevice> used;
    nodes_.clear();
    for (int n = 0; n < 30; ++n) {
      const std::string name = "n" + std::to_string(1000 + (n * 7) % 30);
      slices.push_back(Slice(name, 4));
      nodes_.push_back({{name, {}}});
      for (int d = 0; d < n % 3; ++d) {
        used.push_back({kDriver, name, "gpu-" + std::to_string(d), "", {}, false});
      }
    }
    Build(slices, used);
    model::ResourceClaim claim = Claim(2);
    // Two memos: one that compares every node's version, one told which nodes changed.
    PlacementMemo memo, told;
    std::vector<uint64_t> versions(nodes_.size(), 0);
    std::vector<uint32_t> changed;
    int placed = 0;
    for (int pod = 0; pod < 80; ++pod) {
      PlacementRequest fresh = Request(claim);
      fresh.pod.spread = spread;
      PlacementRequest memoized = fresh;
      memoized.memo = &memo;
      memoized.node_versions = &versions;
      PlacementRequest by_changes = memoized;
      by_changes.memo = &told;
      by_changes.changed_nodes = &changed;
      const Placement want = Place(fresh);
      const Placement got = Place(memoized);
      const Placement got_by_changes = Place(by_changes);
      ASSERT_EQ(got.kind, want.kind) << "pod " << pod;
      EXPECT_EQ(got.node, want.node) << "pod " << pod;
      EXPECT_EQ(got.message, want.message) << "pod " << pod;
      ASSERT_EQ(got_by_changes.kind, want.kind) << "pod " << pod;
      EXPECT_EQ(got_by_changes.node, want.node) << "pod " << pod;
      EXPECT_EQ(got_by_changes.message, want.message) << "pod " << pod;
      if (want.kind != Placement::Kind::kPlaced) break;
      ++placed;
      std::vector<allocator::AllocatedDevice> taken;
      for (const auto& r : want.allocations.at(0).results) {
        taken.push_back({r.driver, r.pool, r.device, r.share_id, r.consumed_capacity, false});
      }
      inventory_->AddAllocated(allocated_, taken);
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i].info.name != want.node) continue;
        ++versions[i];
        changed.push_back(static_cast<uint32_t>(i));
        if (pod % 5 == 0) changed.push_back(static_cast<uint32_t>(i));  // repeats are allowed
      }
    }
    // 120 devices, 30 in use, two per pod: 45 pods fit (nodes with 3 free keep one).
    EXPECT_GE(placed, 30);
    EXPECT_LE(placed, 45);
  }
}

// Kubernetes' taint eviction: an untolerated NoExecute taint evicts at once; a tolerated one
// after the smallest matching tolerationSeconds, counted from timeAdded; without tolerationSeconds
// never. NoSchedule taints never evict.
TEST(NodeEvictionReasonTest, FollowsTolerationSeconds) {
  const auto t0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'000'000));
  const NodeTaint unreachable{"node.kubernetes.io/unreachable", "", "NoExecute", t0};
  const NodeTaint no_schedule{"node.kubernetes.io/unreachable", "", "NoSchedule", std::nullopt};
  EXPECT_EQ(NodeEvictionReason({}, {no_schedule}, t0), "");
  EXPECT_THAT(NodeEvictionReason({}, {unreachable}, t0), HasSubstr("untolerated taint"));
  PodToleration five{"node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 5};
  PodToleration three{"", "Exists", "", "", 3};
  PodToleration forever{"node.kubernetes.io/unreachable", "Exists", "", "NoExecute", std::nullopt};
  EXPECT_EQ(NodeEvictionReason({five}, {unreachable}, t0 + std::chrono::seconds(4)), "");
  EXPECT_THAT(NodeEvictionReason({five}, {unreachable}, t0 + std::chrono::seconds(5)),
              HasSubstr("for 5s"));
  EXPECT_THAT(NodeEvictionReason({five, three}, {unreachable}, t0 + std::chrono::seconds(3)),
              HasSubstr("for 3s"));
  EXPECT_THAT(NodeEvictionReason({forever, five}, {unreachable}, t0 + std::chrono::seconds(6)),
              HasSubstr("for 5s"));
  EXPECT_EQ(NodeEvictionReason({forever}, {unreachable}, t0 + std::chrono::hours(100)), "");
  // A toleration of another key does not count.
  PodToleration other{"node.kubernetes.io/not-ready", "Exists", "", "NoExecute", std::nullopt};
  EXPECT_THAT(NodeEvictionReason({other}, {unreachable}, t0), HasSubstr("untolerated"));
}

}  // namespace
}  // namespace qm::service
