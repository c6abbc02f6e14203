// Allocator behaviour that the scenario table does not express: explanation wording, the score
// of a feasible node, the inventory preview, cancellation, and sharing one snapshot between
// threads.

#include "allocator/allocator.h"

#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace qm::allocator {
namespace {

using ::testing::ElementsAre;
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
    d.attributes["model"] = std::string(i < 5 ? "a100" : "l4");
    d.attributes["resource.kubernetes.io/pcieRoot"] = std::string(i < 2 ? "root-0" : "root-1");
    s.devices.push_back(std::move(d));
  }
  return s;
}

model::ResourceClaim Claim(const std::string& cls, int64_t count) {
  model::ResourceClaim c;
  c.namespace_ = "default";
  c.name = "c1";
  model::DeviceRequest r;
  r.name = "gpu";
  r.exactly = model::ExactDeviceRequest{};
  r.exactly->device_class_name = cls;
  r.exactly->count = count;
  c.spec.requests.push_back(std::move(r));
  return c;
}

model::DeviceClass A100Class() {
  return {"a100-80g", {"device.attributes['gpu.example.com'].model == 'a100'"}, {}, ""};
}

TEST(AllocatorTest, ExplainsWhyARequestDoesNotFit) {
  model::ResourceSlice slice = Slice("n1", 5);
  slice.devices[3].taints.push_back({"nvidia.com/gpu", "present", "NoSchedule", ""});
  auto inv = Inventory::Build({{slice}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({{kDriver, "n1", "gpu-0", "", {}, false},
                                                {kDriver, "n1", "gpu-1", "", {}, false},
                                                {kDriver, "n1", "gpu-2", "", {}, false}});
  model::ResourceClaim claim = Claim("a100-80g", 2);
  model::NodeInfo node{"n1", {}};
  Outcome out = Allocate(*inv, state, {&claim}, &node);
  ASSERT_EQ(out.kind, OutcomeKind::kUnschedulable);
  EXPECT_EQ(out.reason,
            "request gpu: needs 2 devices of class a100-80g, node n1 has 1 matching free "
            "(3 allocated, 1 tainted NoSchedule)");
}

TEST(AllocatorTest, ExplainsConstraintConflicts) {
  auto inv = Inventory::Build({{Slice("n1", 5)}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({{kDriver, "n1", "gpu-0", "", {}, false}});
  model::ResourceClaim claim = Claim("a100-80g", 2);
  claim.spec.constraints.push_back({{}, "resource.kubernetes.io/pcieRoot", ""});
  claim.spec.requests[0].exactly->count = 4;
  model::NodeInfo node{"n1", {}};
  Outcome out = Allocate(*inv, state, {&claim}, &node);
  ASSERT_EQ(out.kind, OutcomeKind::kUnschedulable);
  EXPECT_THAT(out.reason, HasSubstr("no combination of them satisfies the claim constraints"));
}

TEST(AllocatorTest, ScoresFreeDevicesLeftInTouchedPools) {
  auto inv = Inventory::Build({{Slice("n1", 8), Slice("n2", 8)}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({{kDriver, "n1", "gpu-4", "", {}, false}});
  model::ResourceClaim claim = Claim("a100-80g", 2);
  claim.spec.constraints.push_back({{}, "resource.kubernetes.io/pcieRoot", ""});
  model::NodeInfo node{"n1", {}};
  Outcome out = Allocate(*inv, state, {&claim}, &node);
  ASSERT_EQ(out.kind, OutcomeKind::kAllocated) << out.reason << out.error;
  // n1 has 8 devices, one was in use and two are taken now.
  ASSERT_EQ(out.score.pools.size(), 1u);
  EXPECT_EQ(out.score.pools[0].pool, "n1");
  EXPECT_EQ(out.score.pools[0].total, 8);
  EXPECT_EQ(out.score.pools[0].free_after, 5);
  EXPECT_EQ(out.score.free_after, 5);
  // gpu-0 and gpu-1 share root-0; nothing else on root-0 stays free.
  EXPECT_THAT(out.score.match_group_free_after, ElementsAre(0));
}

// No Kubernetes-style ceiling in the engine: a pool of 1,024 devices in one slice, and a claim
// for 256 of them that must share a NUMA node. Node 0 is one device short (gpu-0 is in use), so
// all 256 come from node 1. The server's limit on results (Options::max_results_per_claim)
// still refuses the claim when it is lower.
TEST(AllocatorTest, LargePoolsAndClaimsHaveNoCeilingOfTheirOwn) {
  model::ResourceSlice slice;
  slice.name = "n1";
  slice.driver = kDriver;
  slice.pool = "n1";
  slice.node_name = "n1";
  for (int i = 0; i < 1024; ++i) {
    model::Device d;
    d.name = "gpu-" + std::to_string(i);
    d.attributes["example.com/numa"] = int64_t{i % 4};
    slice.devices.push_back(std::move(d));
  }
  model::DeviceClass any{"any", {"device.driver == 'gpu.example.com'"}, {}, ""};
  auto inv = Inventory::Build({{slice}, {any}, {}});
  AllocatedState state = inv->ResolveAllocated({{kDriver, "n1", "gpu-0", "", {}, false}});
  model::ResourceClaim claim = Claim("any", 256);
  claim.spec.constraints.push_back({{}, "example.com/numa", ""});
  model::NodeInfo node{"n1", {}};

  Outcome out = Allocate(*inv, state, {&claim}, &node);
  ASSERT_EQ(out.kind, OutcomeKind::kAllocated) << out.reason << out.error;
  ASSERT_EQ(out.allocations.size(), 1u);
  std::set<std::string> devices;
  for (const auto& r : out.allocations[0].results) devices.insert(r.device);
  ASSERT_EQ(devices.size(), 256u);
  for (int i = 1; i < 1024; i += 4) {
    EXPECT_TRUE(devices.contains("gpu-" + std::to_string(i))) << i;
  }

  Options limited;
  limited.max_results_per_claim = 32;
  out = Allocate(*inv, state, {&claim}, &node, limited);
  ASSERT_EQ(out.kind, OutcomeKind::kInvalid);
  EXPECT_EQ(out.error.message(),
            "claim default/c1: number of requested devices 256 exceeds the claim limit of 32");
}

TEST(AllocatorTest, PreviewListsMatchingDevicesIgnoringAvailability) {
  auto inv = Inventory::Build({{Slice("n1", 6)}, {A100Class()}, {}});
  auto preview = PreviewMatches(
      *inv, "a100-80g", {"device.attributes['resource.kubernetes.io'].pcieRoot == 'root-1'"});
  ASSERT_TRUE(preview.ok()) << preview.status();
  EXPECT_THAT(preview->devices, ElementsAre("gpu.example.com/n1/gpu-2", "gpu.example.com/n1/gpu-3",
                                            "gpu.example.com/n1/gpu-4"));
  EXPECT_TRUE(preview->errors.empty());

  auto bad = PreviewMatches(*inv, "a100-80g", {"device.driver =="});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("Syntax error"));
  EXPECT_EQ(PreviewMatches(*inv, "nope", {}).status().code(), absl::StatusCode::kNotFound);

  // A runtime error (unknown attribute) is reported per device, not as a failure of the preview.
  auto failing =
      PreviewMatches(*inv, "a100-80g", {"device.attributes['gpu.example.com'].nope == 1"});
  ASSERT_TRUE(failing.ok()) << failing.status();
  EXPECT_TRUE(failing->devices.empty());
  ASSERT_EQ(failing->errors.size(), 5u);
  EXPECT_THAT(failing->errors[0],
              HasSubstr("gpu.example.com/n1/gpu-0: selector #0: no such key: nope"));
}

TEST(AllocatorTest, CancellationStopsTheSearch) {
  // 32 of 40 devices with pairwise distinct `slot` values, but only 31 values exist: no
  // solution, and the search has to try every combination of up to 31 devices.
  model::ResourceSlice slice = Slice("n1", 40);
  for (size_t i = 0; i < slice.devices.size(); ++i) {
    slice.devices[i].attributes["slot"] = static_cast<int64_t>(i % 31);
    slice.devices[i].attributes["model"] = std::string("a100");
  }
  auto inv = Inventory::Build({{slice}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({});
  model::ResourceClaim claim = Claim("a100-80g", 32);
  claim.spec.constraints.push_back({{}, "", "gpu.example.com/slot"});
  std::atomic<bool> cancelled{true};
  Options options;
  options.cancelled = &cancelled;
  model::NodeInfo node{"n1", {}};
  Outcome out = Allocate(*inv, state, {&claim}, &node, options);
  EXPECT_EQ(out.kind, OutcomeKind::kTimeout);
  EXPECT_EQ(out.error.code(), absl::StatusCode::kCancelled);

  options.cancelled = nullptr;
  // The deadline is read from the injected monotonic clock: it passes at the third check.
  const std::chrono::steady_clock::time_point t0{};
  int checks = 0;
  options.deadline = t0 + std::chrono::seconds(1);
  options.now = [&] { return ++checks < 3 ? t0 : t0 + std::chrono::hours(1); };
  out = Allocate(*inv, state, {&claim}, &node, options);
  EXPECT_EQ(out.kind, OutcomeKind::kTimeout);
  EXPECT_EQ(out.error.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(checks, 3);
}

TEST(AllocatorTest, OneSnapshotServesManyThreads) {
  std::vector<model::ResourceSlice> slices;
  for (int n = 0; n < 50; ++n) slices.push_back(Slice("n" + std::to_string(n), 8));
  auto inv = Inventory::Build({{slices.begin(), slices.end()}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({});
  model::ResourceClaim claim = Claim("a100-80g", 3);
  std::atomic<int> allocated{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int n = t; n < 50; n += 4) {
        model::NodeInfo node{"n" + std::to_string(n), {}};
        Outcome out = Allocate(*inv, state, {&claim}, &node);
        if (out.kind == OutcomeKind::kAllocated && out.allocations[0].results.size() == 3 &&
            out.allocations[0].results[0].pool == node.name) {
          ++allocated;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allocated.load(), 50);
}

TEST(AllocatorTest, AdminAccessAllocationsBlockNothing) {
  auto inv = Inventory::Build({{Slice("n1", 1)}, {A100Class()}, {}});
  AllocatedState state = inv->ResolveAllocated({{kDriver, "n1", "gpu-0", "", {}, true}});
  EXPECT_FALSE(state.Exclusive(0));
  EXPECT_EQ(state.size(), 0u);
  model::ResourceClaim claim = Claim("a100-80g", 1);
  model::NodeInfo node{"n1", {}};
  EXPECT_EQ(Allocate(*inv, state, {&claim}, &node).kind, OutcomeKind::kAllocated);
}

}  // namespace
}  // namespace qm::allocator
