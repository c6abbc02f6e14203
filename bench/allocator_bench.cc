// Allocator micro-benchmarks (issue 4 targets, one core):
//   one-device claim on a node of 8 devices                     <= 2 us
//   8 devices with matchAttribute on the PCIe root out of 64    <= 20 us
//   partitionable backtracking (count 7 of 8, one oversized)    <= 1 ms
//   one claim tried against 500 nodes x 10 devices              <= 1 ms
//   256 devices with matchAttribute out of one slice of 1,024 (issue 14: no engine ceiling)
// Each iteration is a whole Allocate call (pool gathering, request preparation, search, result)
// against a snapshot built once, as the scheduler uses it. Run: build/bench/allocator_bench
#include <benchmark/benchmark.h>

#include "allocator/allocator.h"

namespace {

using namespace qm;
using namespace qm::allocator;

constexpr char kDriver[] = "gpu.example.com";

model::ResourceSlice NodeSlice(const std::string& node, int devices, int per_root = 0) {
  model::ResourceSlice s;
  s.name = node + "-slice";
  s.driver = kDriver;
  s.pool = node;
  s.node_name = node;
  for (int i = 0; i < devices; ++i) {
    model::Device d;
    d.name = "gpu-" + std::to_string(i);
    d.attributes["type"] = std::string("gpu");
    d.attributes["index"] = static_cast<int64_t>(i);
    if (per_root > 0) {
      d.attributes["resource.kubernetes.io/pcieRoot"] = "pci000" + std::to_string(i / per_root);
    }
    d.capacity["memory"] = model::DeviceCapacity{*ParseQuantity("80Gi"), nullptr};
    s.devices.push_back(std::move(d));
  }
  return s;
}

model::DeviceClass GpuClass() {
  return model::DeviceClass{
      "gpu",
      {"device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].type == 'gpu'"},
      {},
      ""};
}

model::ResourceClaim Claim(int64_t count) {
  model::ResourceClaim c;
  c.namespace_ = "default";
  c.name = "claim";
  model::DeviceRequest r;
  r.name = "gpu";
  r.exactly = model::ExactDeviceRequest{};
  r.exactly->device_class_name = "gpu";
  r.exactly->count = count;
  c.spec.requests.push_back(std::move(r));
  return c;
}

void Run(benchmark::State& state, const Inventory& inv, const AllocatedState& allocated,
         const model::ResourceClaim& claim, const model::NodeInfo& node) {
  std::vector<const model::ResourceClaim*> claims{&claim};
  Options options;
  options.new_share_id = [] { return std::string("00000000-0000-4000-8000-000000000001"); };
  for (auto _ : state) {
    Outcome out = Allocate(inv, allocated, claims, &node, options);
    if (out.kind != OutcomeKind::kAllocated) {
      state.SkipWithError(("not allocated: " + out.reason + out.error.ToString()).c_str());
      break;
    }
    benchmark::DoNotOptimize(out);
  }
}

void BM_OneDeviceOfEight(benchmark::State& state) {
  auto inv = Inventory::Build(InventoryInput{{NodeSlice("node-0", 8)}, {GpuClass()}, {}});
  // Half the node is in use, so the search skips allocated devices first.
  std::vector<AllocatedDevice> used;
  for (int i = 0; i < 4; ++i)
    used.push_back({kDriver, "node-0", "gpu-" + std::to_string(i), "", {}, false});
  AllocatedState allocated = inv->ResolveAllocated(used);
  Run(state, *inv, allocated, Claim(1), model::NodeInfo{"node-0", {}});
}
BENCHMARK(BM_OneDeviceOfEight);

void BM_EightMatchingPcieRootOf64(benchmark::State& state) {
  auto inv = Inventory::Build(InventoryInput{{NodeSlice("node-0", 64, 8)}, {GpuClass()}, {}});
  // One device of the first root is taken, so the first root cannot supply 8 and the search
  // has to move on to the second.
  AllocatedState allocated = inv->ResolveAllocated({{kDriver, "node-0", "gpu-3", "", {}, false}});
  model::ResourceClaim claim = Claim(8);
  claim.spec.constraints.push_back({{}, "resource.kubernetes.io/pcieRoot", ""});
  Run(state, *inv, allocated, claim, model::NodeInfo{"node-0", {}});
}
BENCHMARK(BM_EightMatchingPcieRootOf64);

void BM_PartitionableSevenOfEightOneOversized(benchmark::State& state) {
  // A partitionable pool: 8 partitions share a counter of 7 units. The first partition needs 2
  // units, the others 1, so any set with the first one runs out of units and the search must
  // backtrack through every combination that contains it.
  model::ResourceSlice counters;
  counters.name = "node-0-counters";
  counters.driver = kDriver;
  counters.pool = "node-0";
  counters.node_name = "node-0";
  counters.resource_slice_count = 2;
  counters.shared_counters.push_back(
      model::CounterSet{"gpu-0", {{"memory", Quantity::FromInt(7)}}});
  model::ResourceSlice devices = NodeSlice("node-0", 8);
  devices.resource_slice_count = 2;
  for (size_t i = 0; i < devices.devices.size(); ++i) {
    devices.devices[i].consumes_counters.push_back(
        {"gpu-0", {{"memory", Quantity::FromInt(i == 0 ? 2 : 1)}}});
  }
  auto inv = Inventory::Build(InventoryInput{{counters, devices}, {GpuClass()}, {}});
  AllocatedState allocated = inv->ResolveAllocated({});
  Run(state, *inv, allocated, Claim(7), model::NodeInfo{"node-0", {}});
}
BENCHMARK(BM_PartitionableSevenOfEightOneOversized);

// 500 nodes with 10 devices each, and the nodes to try.
std::shared_ptr<const Inventory> Cluster500x10(std::vector<model::NodeInfo>* nodes) {
  InventoryInput input;
  for (int n = 0; n < 500; ++n) {
    std::string name = "node-" + std::to_string(n);
    input.slices.push_back(NodeSlice(name, 10));
    nodes->push_back(model::NodeInfo{name, {}});
  }
  input.classes.push_back(GpuClass());
  return Inventory::Build(std::move(input));
}

// One claim tried against every node of a 500 x 10 cluster (the scheduler's filter loop on one
// core); reported time is for all 500 nodes.
void BM_OneClaimAgainst500Nodes(benchmark::State& state) {
  std::vector<model::NodeInfo> nodes;
  auto inv = Cluster500x10(&nodes);
  AllocatedState allocated = inv->ResolveAllocated({});
  model::ResourceClaim claim = Claim(2);
  std::vector<const model::ResourceClaim*> claims{&claim};
  for (auto _ : state) {
    int feasible = 0;
    for (const auto& node : nodes) {
      Outcome out = Allocate(*inv, allocated, claims, &node);
      feasible += out.kind == OutcomeKind::kAllocated ? 1 : 0;
    }
    if (feasible != 500) {
      state.SkipWithError("not every node was feasible");
      break;
    }
  }
}
BENCHMARK(BM_OneClaimAgainst500Nodes)->Unit(benchmark::kMicrosecond);

// As above, with a request selector evaluated per device (not memoised across calls).
void BM_OneClaimWithSelectorAgainst500Nodes(benchmark::State& state) {
  std::vector<model::NodeInfo> nodes;
  auto inv = Cluster500x10(&nodes);
  AllocatedState allocated = inv->ResolveAllocated({});
  model::ResourceClaim claim = Claim(2);
  claim.spec.requests[0].exactly->selectors.push_back(
      "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0");
  std::vector<const model::ResourceClaim*> claims{&claim};
  for (auto _ : state) {
    for (const auto& node : nodes) {
      Outcome out = Allocate(*inv, allocated, claims, &node);
      benchmark::DoNotOptimize(out);
    }
  }
}
BENCHMARK(BM_OneClaimWithSelectorAgainst500Nodes)->Unit(benchmark::kMicrosecond);

}  // namespace

void BM_256MatchingNumaOf1024(benchmark::State& state) {
  // No Kubernetes-style ceiling in the engine: one slice of 1,024 devices on four NUMA nodes
  // (256 each, interleaved), one device of the first in use, and a claim for 256 that must
  // share a NUMA node: the search has to give up on the first node and take the second whole.
  model::ResourceSlice slice = NodeSlice("node-0", 1024);
  for (size_t i = 0; i < slice.devices.size(); ++i) {
    slice.devices[i].attributes["numa"] = static_cast<int64_t>(i % 4);
  }
  auto inv = Inventory::Build(InventoryInput{{slice}, {GpuClass()}, {}});
  AllocatedState allocated = inv->ResolveAllocated({{kDriver, "node-0", "gpu-0", "", {}, false}});
  model::ResourceClaim claim = Claim(256);
  claim.spec.constraints.push_back({{}, "gpu.example.com/numa", ""});
  Run(state, *inv, allocated, claim, model::NodeInfo{"node-0", {}});
}
BENCHMARK(BM_256MatchingNumaOf1024)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
